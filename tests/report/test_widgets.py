"""The exploration widgets, headless: build them, set values, click, check what they show and run."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from cli_helpers import ROOT, needs_fio

pytest.importorskip("ipywidgets")
from iolab.explorer import widgets  # noqa: E402
from iolab.core.errors import IolabError  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "data"


def bar_heights(ax):
    return [round(p.get_height(), 6) for p in ax.patches]


def png(output):
    return output.outputs[0]["data"]["image/png"] if output.outputs else None


def test_ipywidgets_is_imported_only_when_a_widget_is_built():
    code = ("import sys, iolab.explorer.widgets, iolab.fleet.batch, iolab.report.notebooks; print('ipywidgets' in sys.modules); "
            "iolab.explorer.widgetkit.ipywidgets_module(); print('ipywidgets' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.split() == ["False", "True"], proc.stderr


def test_explorer_follows_every_choice():
    e = widgets.Explorer([str(FIXTURES)])
    # first view: the first recipe, throughput, one bar per system and test
    assert e.recipe.options == ("crystaldiskmark", "quick")
    assert e.hosts.options == ("hdd-node", "nvme-node", "ssd-node")
    assert e.describe() == "crystaldiskmark | bw_mbps by system (mean) | HDD (emulated), NVMe, SATA SSD (emulated)"
    heights, image, renders = bar_heights(e.axes), png(e.chart), e.renders
    assert len(heights) == 24 and image and e.table.outputs and e.findings.outputs
    assert "Throughput (MB/s)" in e.table.outputs[0]["data"]["text/html"]

    e.metric.value = "iops"
    assert e.renders == renders + 1 and set(e.summary["metric"]) == {"iops"}
    assert bar_heights(e.axes) != heights and png(e.chart) != image
    assert "IOPS" in e.table.outputs[0]["data"]["text/html"]
    assert e.axes.get_ylabel() == ("IOPS (log scale)" if e.axes.get_yscale() == "log" else "IOPS")  # a log axis says so

    e.metric.value = "lat_p99_us"  # shown in ms: stored microseconds / 1000
    row = e.summary.iloc[0]
    raw = e.data[(e.data["system"] == row["system"]) & (e.data["test"] == row["test"])
                 & (e.data["direction"] == row["direction"])]["lat_p99_us"].mean()
    assert row["value"] == pytest.approx(raw / 1000)

    e.metric.value = "bw_mbps"
    mean = e.summary.set_index(["system", "test", "direction"])["value"]
    e.statistic.value = "best"
    best = e.summary.set_index(["system", "test", "direction"])["value"]
    assert (best >= mean - 1e-9).all() and (best > mean).any()

    e.recipe.value = "quick"
    assert set(e.summary["system"]) == {"HDD (emulated)", "HDD, cached", "SATA SSD (emulated)"}
    findings = e.findings.outputs[0]["data"]["text/markdown"]
    assert "HDD, cached" in findings  # the cached run is called out against the isolated one

    e.hue.value = "isolation"
    assert set(e.summary["system"]) == {"cgroup", "none", "direct"}
    assert e.axes.get_legend() is not None

    # filters: one host leaves its runs; the recipe list follows the runs left
    e.hue.value = "system"
    e.hosts.value = ("ssd-node",)
    assert set(e.summary["system"]) == {"SATA SSD (emulated)"}
    e.labels.value = ("NVMe",)  # no run of ssd-node is labelled NVMe
    assert e.summary.empty and e.describe() == "nothing shown" and not e.chart.outputs
    e.hosts.value = ()
    assert e.recipe.options == ("crystaldiskmark",) and e.describe().endswith("| NVMe")


def test_explorer_without_runs_says_so_and_recovers(tmp_path):
    e = widgets.Explorer([str(tmp_path / "nowhere"), str(tmp_path)])
    assert e.describe().startswith("nothing shown: ") and "nowhere: does not exist" in e.describe() and e.views == []
    assert "does not exist" in e.message.value and "no runs" in e.message.value
    e.sources.value = str(FIXTURES)  # typing a data directory reloads
    assert e.describe().startswith("crystaldiskmark |")
    with pytest.raises(IolabError, match="unknown metric"):
        widgets.Explorer([str(FIXTURES)], metric="speed")


def _panel_run(tmp_path, **kwargs):
    target = tmp_path / "disk"
    target.mkdir()
    data = tmp_path / "data"
    panel = widgets.RunPanel(data, target=str(target), recipe="quick", size="16M", runtime="1",
                             tests=["SEQ1M-Q1T1"], label="panel disk", **kwargs)
    return panel, target, data


@needs_fio
def test_start_button_runs_a_benchmark_with_progress_and_the_explorer_shows_it(tmp_path):
    app = widgets.explore([str(FIXTURES)], run_data_dir=str(tmp_path / "data"), target=str(tmp_path / "disk"))
    (tmp_path / "disk").mkdir()
    panel, explorer = app.panel, app.explorer
    panel.size.value, panel.runtime.value, panel.tests.value = "16M", "1", "SEQ1M-Q1T1"
    panel.label.value = "panel disk"
    seen = []
    panel.progress.observe(lambda change: seen.append(change["new"]), names="value")

    panel.start_button.click()
    assert panel.start_button.disabled and panel.running
    panel.start_button.click()  # ignored while a run is going
    assert panel.wait(180), "the run did not finish"
    assert not panel.start_button.disabled and not panel.running
    assert panel.error is None, panel.status.value

    run_dirs = list((tmp_path / "data").glob("*/*/manifest.json"))
    assert len(run_dirs) == 1 and panel.run_dir == run_dirs[0].parent
    manifest = json.loads(run_dirs[0].read_text())
    assert manifest["status"] == "completed" and manifest["label"] == "panel disk"
    assert [t["name"] for t in manifest["tests"]] == ["SEQ1M-Q1T1-read", "SEQ1M-Q1T1-write"]
    assert panel.progress.value == 1.0 and panel.progress.bar_style == "success"
    assert any(0 < v < 1 for v in seen), seen  # the bar moved while fio ran
    assert "Run completed" in panel.status.value and str(panel.run_dir) in panel.status.value

    # the new run's store joined the Explorer, which can show it beside the fixture runs
    assert str(tmp_path / "data") in explorer.source_list()
    explorer.recipe.value = "quick"
    assert "panel disk" in set(explorer.summary["system"])
    explorer.labels.value = ("panel disk",)
    assert set(explorer.summary["system"]) == {"panel disk"}
    assert list(explorer.summary["test"].unique()) == ["SEQ1M-Q1T1"]


def test_errors_are_shown_in_the_panel_not_raised(tmp_path):
    panel, target, data = _panel_run(tmp_path, threaded=False)
    panel.target.value = str(tmp_path / "missing")
    panel.start_button.click()
    assert not panel.running and not panel.start_button.disabled
    assert "Error" in panel.status.value and "no such file or directory" in panel.status.value
    assert panel.error and panel.run_dir is None and panel.progress.bar_style == "danger"
    assert not data.exists()  # nothing was created

    panel.target.value = ""
    panel.start()
    assert "enter a target" in panel.status.value

    panel.target.value = str(target)
    panel.tests.value = "SEQ9"
    panel.start()
    assert "has no test" in panel.status.value and "SEQ1M-Q8T1" in panel.status.value

    panel.tests.value, panel.size.value = "", "a lot"
    panel.start()
    assert "--size" in panel.status.value and not data.exists()


def test_without_fio_exploring_works_and_the_panel_says_what_is_missing(tmp_path, monkeypatch):
    """Binder and CI report machines: no fio (and no root) needed to explore stored runs."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no fio anywhere
    app = widgets.explore([str(FIXTURES)], run_data_dir=str(tmp_path / "data"), target=str(tmp_path),
                          threaded=False)
    assert app.explorer.describe().startswith("crystaldiskmark |") and app.explorer.views
    app.panel.start_button.click()
    assert "Error" in app.panel.status.value and "fio" in app.panel.status.value
    assert not app.panel.start_button.disabled and not (tmp_path / "data").exists()


@needs_fio
def test_failed_run_keeps_its_directory_and_says_where(tmp_path):
    """fio rejects the job at run time: the panel shows the error and the run directory it left."""
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("name: bad\ndescription: fio rejects it\nfio: {ioengine: nosuchengine}\n"
                      "tests: [{name: T, rw: read, bs: 4k}]\n")
    panel, target, data = _panel_run(tmp_path, threaded=False)
    panel.recipe.options = list(panel.recipe.options) + [str(recipe)]
    panel.recipe.value, panel.tests.value = str(recipe), ""
    panel.start()
    assert panel.error and "Error" in panel.status.value
    assert panel.run_dir is not None and (panel.run_dir / "manifest.json").is_file()
    assert json.loads((panel.run_dir / "manifest.json").read_text())["status"] == "failed"
    assert str(panel.run_dir) in panel.status.value


def test_explore_notebook_parameters_default_to_stored_data():
    nb = nbformat.read(str(ROOT / "notebooks" / "explore.ipynb"), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and 'data_dir = ["../tests/fixtures/data"]' in tagged[0].source
    checked = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# NBVAL_CHECK_OUTPUT")]
    assert checked and all(c.outputs for c in checked)
    # no output is committed except the checked cells' (the widgets render live)
    assert all(not c.outputs for c in nb.cells if c.cell_type == "code" and c not in checked)



def test_explorer_findings_list_failed_tests_and_emulated_ceilings():
    """The explorer says what the compare notebook says of the runs it shows: the failed test with
    fio's reason, the tests never reached, and each emulated test against its ceiling."""
    e = widgets.Explorer([str(FIXTURES)], recipe="quick")
    findings = e.findings.outputs[0]["data"]["text/markdown"]
    assert "#### Failed tests and tests not run" in findings
    assert "No space left on device" in findings and "6 tests not run" in findings
    assert "**Emulated devices.** HDD (emulated) and HDD, cached are emulated devices (profile hdd" in findings
    e.hosts.value = ("nvme-node",)  # a real NVMe: no ceiling, no failure
    e.recipe.value = "crystaldiskmark"
    findings = e.findings.outputs[0]["data"]["text/markdown"]
    assert "Emulated devices" not in findings and "Failed tests" not in findings
