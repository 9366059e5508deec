"""The single-server report page (report.ipynb) on stored runs: which statistic each recipe is shown by,
said per run from the manifests, never taken from the first run alone (issue 23)."""
import json
import shutil

import pandas as pd
import pytest

from iolab.report import i18n, notebooks as report, sections, steady_window, tables
from iolab.report.commentary_base import Rules
from cli_helpers import FIXTURES

#: two CrystalDiskMark runs of three passes each (stored fixture runs; recipe.yaml says ``best``)
CDM_RUNS = [FIXTURES / "data" / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a",
            FIXTURES / "data" / "ssd-node" / "20261120T223550Z-crystaldiskmark-a2dd"]


def _copies(tmp_path, statistics):
    """The CDM runs copied, each manifest recording its ``statistic`` as the runner writes it today."""
    runs = []
    for source, statistic in zip(CDM_RUNS, statistics):
        run = shutil.copytree(source, tmp_path / "runs" / source.name)
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["statistic"] = statistic
        (run / "manifest.json").write_text(json.dumps(manifest))
        runs.append(run)
    return runs


def _best_of(lang, n=3):
    return i18n.text("labels.best_of", lang, caption=tables.caption_for("bw_mbps", "MB/s", lang), n=n,
                     tool="CrystalDiskMark 8")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_runs_that_disagree_on_the_statistic_are_said_to_and_none_is_picked(tmp_path, lang):
    # the first run (hdd) records best: before, the page took its statistic for both runs
    runs = _copies(tmp_path, ["best", "mean"])
    md = report.report(runs, out=tmp_path / "page", lang=lang).markdown.read_text()
    sel = report.select(None, runs, lang=lang)  # the systems as the page names them
    _, note = report.tool_statistic(sel.manifests, lang)
    assert note and note in md
    for name in sel.manifests["system_name"]:
        assert name in note
    assert _best_of(lang) not in md  # no best-of table: the runs' tools do not agree on it
    assert i18n.text("labels.ci_note", lang, statistic=i18n.text("labels.mean", lang), n=3) in md


def test_runs_that_agree_on_best_get_the_tools_best_of_n_and_no_note(tmp_path):
    runs = _copies(tmp_path, ["best", "best"])
    md = report.report(runs, out=tmp_path / "page", lang="en").markdown.read_text()
    assert _best_of("en") in md
    assert i18n.text("statistic.disagree", "en", each="").split(":")[0] not in md


def test_a_later_run_recording_best_does_not_set_the_statistic_for_the_first(tmp_path):
    runs = _copies(tmp_path, ["mean", "best"])
    md = report.report(runs, out=tmp_path / "page", lang="en").markdown.read_text()
    assert _best_of("en") not in md
    assert i18n.text("statistic.disagree", "en", each="").split(":")[0] in md


# ---------------------------------------------------------------------------
# a steady-state run's rounds: the summary takes the measurement window only (issue 25)

STEADY = FIXTURES / "flash"


def _window_means():
    """Each stored steady-state run's window mean, as the run itself recorded it (steadystate.json)."""
    means = {}
    for path in STEADY.glob("*/*steady-state*/steadystate.json"):
        for target, verdict in json.loads(path.read_text())["targets"].items():
            means[target] = (verdict["mean"], verdict["figures"], verdict["window"])
    return means


def test_the_summary_takes_each_window_as_one_row_holding_its_mean():
    sel = report.select(None, [STEADY], recipe="steady-state")
    found, rest = sections.build(sel.results)
    summary = steady_window.summary_rows(rest, sel.results, sel.manifests)
    rounds = summary.rows[summary.rows["test"] == "round"]
    means = _window_means()
    assert sorted(rounds["system"]) == sorted(means) and len(means) == 2
    for system, (mean, figures, window) in means.items():
        row = rounds[rounds["system"] == system].iloc[0]
        assert row["iops"] == pytest.approx(mean, rel=1e-6)
        assert row["rep"] == 1
        # the flags of the window's rounds carry over to its row: consumer-ssd's rounds varied (high_variance)
        rounds_flags = set(";".join(sel.results.loc[(sel.results["system"] == system)
                                                    & (sel.results["test"] == "round"), "flags"]).split(";"))
        assert set(str(row["flags"]).split(";")) == rounds_flags
        w = summary.windows[summary.windows["system"] == system].iloc[0]
        assert (w["first"], w["last"], w["rounds"]) == (window[0], window[-1], len(figures))
    assert "high_variance" in str(rounds[rounds["system"] == "consumer-ssd"]["flags"].iloc[0])
    assert "high_variance" not in str(rounds[rounds["system"] == "sata-ssd"]["flags"].iloc[0])
    # consumer-ssd's fresh rounds ran far above its window: all rounds averaged would be another figure
    mean, figures, _ = means["consumer-ssd"]
    assert sum(figures) / len(figures) > 1.5 * mean
    assert "round" not in set(summary.measurements["test"])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_report_page_summarises_the_window_and_says_so(tmp_path, lang):
    md = report.report([STEADY], out=tmp_path / "page", lang=lang, recipe="steady-state").markdown.read_text()
    means = _window_means()
    each = [i18n.text("steady_window.each", lang, system=system, first=window[0], last=window[-1],
                      rounds=len(figures)) for system, (_, figures, window) in sorted(means.items())]
    assert i18n.text("steady_window.taken", lang, each=i18n.join(each, lang)) in md
    table = md.split(i18n.text("steady_window.taken", lang, each=i18n.join(each, lang)), 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| round |"))
    for system in sorted(means):  # the columns follow the systems' order: consumer-ssd, sata-ssd
        assert i18n.number(means[system][0]) in row
    # the note under it: the window's rounds, not a single repetition to be repeated
    assert f"*{i18n.text('repetitions_note.single_window', lang)}*" in table and "--repeat" not in table


def test_rounds_without_a_window_are_left_out_and_said(tmp_path):
    """A run that ended before its verdict: its rounds carry no window, and are not averaged as repetitions."""
    source = next(STEADY.glob("consumer-ssd/*steady-state*"))
    run = shutil.copytree(source, tmp_path / "runs" / source.name)
    results = pd.read_csv(run / "results.csv")
    results.drop(columns=[c for c in results.columns if c.startswith("steady_") or c == "round"]).to_csv(
        run / "results.csv", index=False)
    md = report.report([run], out=tmp_path / "page", lang="en").markdown.read_text()
    rounds = int((results["test"] == "round").sum())
    assert i18n.text("steady_window.without", "en", each=i18n.text(
        "steady_window.each_without", "en", system="consumer-ssd", rounds=rounds)) in md
    assert not any(line.startswith("| round |") for line in md.splitlines())
    assert "| precondition |" in md


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_windows_high_variance_is_said_under_the_summary_in_the_words_of_rounds(tmp_path, lang):
    """The window's row dropped consumer-ssd's high_variance: its rounds varied, and the summary said nothing."""
    md = report.report([STEADY], out=tmp_path / "page", lang=lang, recipe="steady-state").markdown.read_text()
    summary = md.split(i18n.text("steady_window.taken", lang, each="").split("{")[0][:20], 1)[1]
    caveats = summary.split(i18n.text("commentary.caveats", lang), 1)[1]
    test = i18n.test_label("round", "write", lang)
    threshold = i18n.percent(Rules().max_cov)
    rounds = i18n.text("rounds.high_variance", lang, system="consumer-ssd", tests=test, threshold=threshold)
    assert rounds in caveats
    # not in the words of repetitions, and not for the drive whose rounds agreed
    assert i18n.text("flags.high_variance", lang, system="consumer-ssd", tests=test,
                     threshold=threshold) not in caveats
    assert not any("sata-ssd" in line and "high_variance" in line for line in caveats.splitlines())
