"""The single-server report page (report.ipynb) on stored runs: which statistic each recipe is shown by,
said per run from the manifests, never taken from the first run alone (issue 23)."""
import json
import shutil

import pytest

from iolab.report import i18n, notebooks as report, tables
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
    sel = report.select(None, runs)
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
