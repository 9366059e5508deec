"""A crystaldiskmark run's report says what its figures are (issue 24 item 3): the statistic with the run's own
pass count, fio's lat against KDiskMark's clat, the unit and the 1000/1024 factor with a figure of the run, and
what the mix row holds, only when there is one; compare.ipynb draws no latency chart for a mix row. One real
short run (~13 s: RND4K-Q1T1 and its R70 mix, 2 passes) rendered by `iolab report` in en and ja, both notebooks."""
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from iolab.report import cdmnotes, i18n
from iolab.report import notebooks as report

from cli_helpers import iolab_cli, needs_fio, needs_root

pytestmark = [needs_fio, needs_root]

PASSES = 2
MIX = "MIX-RND4K-Q1T1"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cdmnotes")
    target = root / "target"
    target.mkdir()
    proc = iolab_cli("run", "crystaldiskmark", "--target", target, "--preset", "real-world", "--tests", "RND4K-Q1T1",
                     "--mix", "R70", "--size", "8M", "--runtime", "0.5", "--repeat", PASSES, "--pause", "0",
                     "--data", root / "data", "--no-progress", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pages(run_dir, tmp_path_factory):
    """(notebook, lang) -> the rendered Markdown page."""
    wanted = [(notebook, lang) for notebook in ("report", "compare") for lang in ("en", "ja")]
    places = {key: tmp_path_factory.mktemp("-".join(key)) for key in wanted}

    def render(key):
        notebook, lang = key
        return iolab_cli("report", run_dir, "--notebook", notebook, "--lang", lang, "--out", places[key], timeout=300)
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:  # four papermill renders side by side
        done = dict(zip(wanted, pool.map(render, wanted)))
    for key, proc in done.items():
        assert proc.returncode == 0, (key, proc.stderr[-3000:])
    return {key: (places[key] / f"{key[0]}.md").read_text(encoding="utf-8") for key in wanted}


def _best_read(run_dir):
    rows = pd.read_csv(run_dir / "results.csv")
    rows = rows[(rows["rep"] > 0) & (rows["test"] == "RND4K-Q1T1") & (rows["direction"] == "read")]
    assert rows["rep"].nunique() == PASSES
    return rows["bw_mbps"].max()


def _clat_gap(run_dir):
    """How much lower fio's mean clat is than its mean lat, least-most over the recorded passes, as the note says it."""
    gaps = []
    for path in (run_dir / "raw").glob("*.json"):
        if path.name.startswith("_") or path.stem.endswith("warmup"):
            continue
        for job in json.loads(path.read_text())["jobs"]:
            gaps += [1 - job[d]["clat_ns"]["mean"] / job[d]["lat_ns"]["mean"] for d in ("read", "write")
                     if job[d]["io_bytes"]]
    assert len(gaps) == 2 * PASSES + 2 * PASSES  # RND4K read and write, the mix's two directions, per pass
    low, high = (i18n.percent(max(g, 0.0)) for g in (min(gaps), max(gaps)))
    return low if low == high else f"{low}–{high}"


@pytest.mark.parametrize("notebook", ["report", "compare"])
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_statements_beside_the_table_with_the_runs_pass_count(pages, run_dir, notebook, lang):
    md = pages[notebook, lang]
    t = lambda key, **fields: i18n.text(f"cdm_notes.{key}", lang, **fields)  # noqa: E731
    assert t("heading") in md
    assert t("statistic_best", n=PASSES) in md and t("statistic_others_mean", n=PASSES) in md
    assert t("latency_run", gap=_clat_gap(run_dir)) in md
    factor = f"{cdmnotes.KDISKMARK_FACTOR:.4f}"
    assert factor == "0.9766"
    assert t("unit", factor=factor, percent="2.3") in md and t("compare", factor=factor) in md
    best = _best_read(run_dir)  # the example is this run's own best figure, in KDiskMark's unit too
    system = report.select(None, [run_dir]).manifests["system_name"].iloc[0]
    assert t("compare_example", test=i18n.test_label("RND4K-Q1T1", "read", lang), mbps=i18n.number(best),
             kdiskmark=i18n.number(best * 1000 / 1024), system=system) in md
    mix = t("mix", test=MIX, share=t("mix_share", read=70, write=30), read=70, write=30)
    assert md.count(mix) == 1
    # the best-of table's caption says its mix row is KDiskMark's weighted figure
    assert t("best_of_mix") in md
    # the notes come after the CDM table they explain
    assert md.index(t("best_of_mix")) < md.index(t("heading"))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_compare_draws_no_latency_chart_for_the_mix_row(pages, lang):
    md = pages["compare", lang]
    charts = [line for line in md.splitlines() if line.startswith("![") and i18n.text("headings.latency", lang) in line]
    mix = i18n.label("mix", lang, section="directions")
    assert charts and not [c for c in charts if c.split("](")[0].endswith(f" {mix}")], charts


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_mix_sentence_only_with_a_mix_row(run_dir, lang):
    sel = report.select(None, [run_dir], with_results=True)
    with_mix = cdmnotes.markdown(sel.results, sel.manifests, lang=lang, shown="best")
    plain = sel.results[~sel.results["test"].str.startswith("MIX-")]
    without = cdmnotes.markdown(plain, sel.manifests, lang=lang, shown="best")
    mix_words = i18n.text("cdm_notes.mix", lang, test=MIX, share="", read=70, write=30)[-40:]
    assert mix_words in with_mix and mix_words not in without
    caption = "X"
    assert cdmnotes.best_of_caption(plain, sel.manifests, caption, lang=lang) == caption
    assert cdmnotes.best_of_caption(sel.results, sel.manifests, caption, lang=lang) != caption
    # one pass: best and mean are the same figure, said so
    once = cdmnotes.markdown(plain[plain["rep"] <= 1], sel.manifests, lang=lang, shown="mean")
    assert i18n.text("cdm_notes.statistic_single", lang, n=1) in once
    # no measured crystaldiskmark rows (another recipe): nothing said
    assert cdmnotes.markdown(plain.assign(recipe="fio"), sel.manifests, lang=lang, shown="best") == ""
