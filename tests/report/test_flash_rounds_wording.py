"""A steady-state run's rounds are a series in time, not repetitions: the high_variance caveat says so (issue 25).

The rows are the stored real runs of two emulated drives (tests/fixtures/flash): the consumer-ssd's rounds fall
from its burst rate to the rate behind its cache, so the engine flagged them high_variance.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from iolab.engine import store
from iolab.report import section_caveats, sections

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "flash"
WORDS = {"en": ("across the rounds", "repetitions"), "ja": ("ラウンドの間", "繰り返し")}


@pytest.fixture(scope="module")
def steady():
    rows = store.load(RUNS)
    rows["system"] = rows["label"]
    return rows[rows["recipe"].eq("steady-state")]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_steady_state_sections_variance_caveat_speaks_of_rounds(steady, lang, request):
    if lang == "ja":
        request.getfixturevalue("japanese")
    rounds, repetitions = WORDS[lang]
    built, _ = sections.build(steady, lang=lang)
    (section,) = [s for s in built if s.kind == "steady-state"]
    (said,) = [c for c in section.caveats if "(high_variance)" in c or "（high_variance）" in c]
    assert said.startswith("**consumer-ssd**") and rounds in said and repetitions not in said
    # the same rows outside a steady-state section (a generic table): repetitions, as before
    (generic,) = [c for c in section_caveats.caveat_lines(steady, lang=lang) if "high_variance" in c]
    assert repetitions in generic and rounds not in generic
