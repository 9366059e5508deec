"""The flash-cache section (iolab.report.sections.flashcache): cache on vs off, the ratio per test, the warm-up
per repetition, in English and Japanese.

``tests/fixtures/flashcache`` holds two runs in the store's format (tests/fixtures/make_flashcache.py:
`quick --tests RND4K-Q1T1,RND4K-Q32T1 --repeat 4` labelled ``flash-cache cache=on`` / ``cache=off``,
numbers shaped like the lab's dm-cache measurement); the expected ratios are computed here from their
results.csv files, independently of the section's code. The real cache on/off direction is asserted in
the lab (tests/lab/test_lab_flashcache.py).
"""
import csv
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import iolab  # noqa: E402
from iolab.report import i18n, plot, sections  # noqa: E402
from iolab.report.sections import flashcache  # noqa: E402
from cli_helpers import ROOT  # noqa: E402

STORE = ROOT / "tests" / "fixtures" / "flashcache"


@pytest.fixture(scope="module")
def data():
    return iolab.load(STORE)


def csv_rows(state: str) -> list[dict]:
    rows = []
    for path in STORE.rglob("results.csv"):
        with open(path, newline="") as handle:
            rows += [r for r in csv.DictReader(handle) if r["label"].endswith(f"cache={state}")]
    assert rows, f"no fixture run labelled cache={state}"
    return rows


def expected(test: str, direction: str) -> tuple[float, float, list[float]]:
    """(mean MB/s without the cache, warm ratio, MB/s with the cache per repetition) from results.csv."""
    pick = lambda rows: [r for r in rows if r["test"] == test and r["direction"] == direction]  # noqa: E731
    off = [float(r["bw_mbps"]) for r in pick(csv_rows("off"))]
    on = [float(r["bw_mbps"]) for r in sorted(pick(csv_rows("on")), key=lambda r: int(r["rep"]))]
    mean_off = sum(off) / len(off)
    return mean_off, on[-1] / mean_off, on


def test_cache_state_from_labels():
    labels = pd.DataFrame({"label": ["hdd cache=on", "hdd Cache=OFF", "hdd (cache on)", "hdd cache:off", "hdd",
                                     "nocache=on", "cachet=on"]})
    assert list(flashcache.cache_state(labels)) == ["on", "off", "on", "off", None, None, None]


def test_fixture_runs_get_the_flash_cache_section_not_the_generic_shape(data):
    assert "flash-cache" in sections.plan(data)
    built, rest = sections.build(data, lang="en")
    assert [s.kind for s in built] == ["flash-cache"]
    assert rest.empty


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_ratio_per_test_and_warm_up_per_repetition(data, lang):
    with matplotlib.rc_context({"font.family": plot.font_families(lang)}):
        section = flashcache.flashcache_section(data, lang=lang)
    assert section.title == i18n.text("flashcache.heading", lang)
    table = section.tables[0]
    reps = len(expected("RND4K-Q1T1", "read")[2])
    assert reps >= 3
    assert list(table.data.columns) == ([i18n.text("flashcache.off", lang)]
                                        + [i18n.text("flashcache.rep", lang, rep=r) for r in range(1, reps + 1)]
                                        + [i18n.text("flashcache.ratio_first", lang), i18n.text("flashcache.ratio_last", lang)])
    assert len(table.data) == 4  # two tests x read and write
    for (test, direction), row in zip([("RND4K-Q1T1", "read"), ("RND4K-Q1T1", "write"), ("RND4K-Q32T1", "read"),
                                       ("RND4K-Q32T1", "write")], table.data.itertuples(index=False)):
        mean_off, warm, on = expected(test, direction)
        assert row[0] == pytest.approx(mean_off)
        assert list(row[1:1 + reps]) == pytest.approx(on)
        assert row[-1] == pytest.approx(warm)
        assert row[-2] == pytest.approx(on[0] / mean_off)
    # the cache helped the warm random reads: a sentence says by how much, with the same rounding as the table
    mean_off, warm, on = expected("RND4K-Q1T1", "read")
    assert warm > 1.5, "the lab fixture: warm reads through the cache are much faster than the bare HDD"
    line = section.sentences[0]
    factor = f"{warm:.1f}" if warm < 10 else f"{warm:,.0f}"
    assert (f"{factor}x as fast" if lang == "en" else f"{factor}倍の速さ") in line, line
    assert (f"repetition {reps}" if lang == "en" else f"{reps}回目") in line, line
    markdown = section.markdown()
    assert table.caption in markdown and ("Flash cache" if lang == "en" else "フラッシュキャッシュ") in markdown
    if lang == "ja":
        assert "as fast" not in markdown and "cache off" not in markdown


def test_figure_shows_each_repetition_on_and_off(data):
    section = flashcache.flashcache_section(data, lang="en")
    axes = section.figures[0].axes
    assert len(axes) == 4
    for ax in axes:
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == {"cache on", "cache off"}
        assert list(lines["cache on"].get_xdata()) == list(range(1, len(lines["cache on"].get_xdata()) + 1))
        assert len(lines["cache on"].get_xdata()) >= 3


def test_japanese_figure_labels(data):
    with matplotlib.rc_context():
        matplotlib.rcParams["font.family"] = plot.font_families("ja")
        ax = flashcache.flashcache_section(data, lang="ja").figures[0].axes[0]
    assert ax.get_xlabel() == "繰り返し" and {l.get_label() for l in ax.get_lines()} == {"キャッシュ有効", "キャッシュ無効"}


def test_one_side_missing_is_said_not_guessed(data):
    only_on = data[data["label"].str.endswith("cache=on")]
    section = flashcache.flashcache_section(only_on, lang="en")
    assert not section.tables and not section.sentences
    assert section.notes == ["flash-cache: no run with the cache off to compare with."]
    assert flashcache.flashcache_section(data.assign(label="plain run"), lang="en") is None
