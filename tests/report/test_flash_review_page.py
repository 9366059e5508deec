"""Issue 25's "done when": a report of two emulated drives reads like a review's sustained-performance page.

The runs are real, stored (tests/fixtures/flash, made by `iolab run` on this machine: sustained-write and
steady-state on emulated:consumer-ssd and emulated:sata-ssd, each labelled with its profile); rendering them
needs no fio. Each figure is checked against what the profile declares (the ground truth), not against a
number copied from the run; each recipe's section (what `iolab report --notebook compare` shows) holds both
drives, in en and ja.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from iolab.devices.emulated import get_profile
from iolab.engine import store
from iolab.report import sections

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "flash"
MiB = 1024**2


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    data = store.load(RUNS)
    data["system"] = data["label"]
    return data


def _recipe(rows, name):
    return rows[rows["run_id"].str.contains(name)]


def test_the_stored_runs_hold_the_profiles_ground_truth(rows):
    consumer, sata = get_profile("consumer-ssd"), get_profile("sata-ssd")
    sustained = _recipe(rows, "sustained-write").query("test == 'sustained'").set_index("label")
    cliff = sustained.loc["consumer-ssd"]
    assert bool(cliff["cliff_found"]) and bool(cliff["recovered"])
    assert cliff["cliff_bytes"] == pytest.approx(consumer.cliff.after_bytes, rel=0.05)
    assert cliff["burst_mbps"] * 1e6 == pytest.approx(consumer.write_bps, rel=0.10)
    assert cliff["after_mbps"] * 1e6 == pytest.approx(consumer.cliff.write_bps, rel=0.10)
    assert not bool(sustained.loc["sata-ssd", "cliff_found"])
    rounds = _recipe(rows, "steady-state").query("test == 'round'")
    for label, rate in (("consumer-ssd", consumer.cliff.write_bps), ("sata-ssd", None)):
        mine = rounds[rounds["label"].eq(label)]
        assert mine["steady_reached"].all(), label
        if rate:  # steady only after the cliff: at the rate behind the cache
            assert mine["steady_figure"].iloc[0] == pytest.approx(rate / 4096, rel=0.10)
            assert mine["round"].max() > 5
    assert rounds.loc[rounds["label"].eq("sata-ssd"), "steady_figure"].iloc[0] == pytest.approx(
        sata.write_iops, rel=0.10)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_each_recipe_has_its_section_for_both_drives(rows, lang, request):
    if lang == "ja":
        request.getfixturevalue("japanese")  # the Japanese font for the figures' labels
    for name, kind in (("sustained-write", "sustained-write"), ("steady-state", "steady-state")):
        built, _ = sections.build(_recipe(rows, name), lang=lang)
        (section,) = [s for s in built if s.kind == kind]
        assert list(section.tables[0].frame.index) == ["consumer-ssd", "sata-ssd"]
        assert len(section.sentences) == 2 and section.figures
        said = " ".join(section.sentences)
        assert "**consumer-ssd**" in said and "**sata-ssd**" in said


