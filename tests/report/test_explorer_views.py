"""The explorer's language, scale, test picker, recipe views and article overlay, and the run panel's Stop,
headless (the same widgets the JupyterLab test drives in a browser: test_explorer_jupyterlab.py)."""
import json
import time

import pytest

from cli_helpers import ROOT, needs_fio

pytest.importorskip("ipywidgets")
from iolab.explorer import views, widgets  # noqa: E402
from iolab.report import i18n  # noqa: E402
from iolab.core.errors import IolabError  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "data"
SECTIONS = ROOT / "tests" / "fixtures" / "sections"


def png(output):
    return next((o["data"]["image/png"] for o in output.outputs if "image/png" in o.get("data", {})), None)


def test_language_switches_every_control_chart_and_text():
    app = widgets.explore([str(FIXTURES)], threaded=False)
    e, panel = app.explorer, app.panel
    before = png(e.chart)
    assert e.recipe.description == "Recipe" and panel.start_button.description == "Start"
    assert "3 runs of crystaldiskmark; 24 bars, one per test and system (3)" in e.message.value
    e.language.value = "ja"
    assert e.lang == panel.lang == "ja"
    assert (e.recipe.description, e.tests.description, e.scale.description) == ("レシピ", "テスト", "目盛")
    assert e.metric.options[0] == ("スループット（MB/秒）", "bw_mbps") and e.metric.value == "bw_mbps"
    assert e.render_button.description == "レポートを作成" and e.reference.options[0] == ("なし", "")
    assert (panel.start_button.description, panel.stop_button.description) == ("開始", "停止")
    assert panel.isolation.options[0] == ("レシピの既定", "") and panel.status.value == "準備完了。"
    assert app.widget.get_title(0) == "実行結果を見る"
    assert "crystaldiskmarkの実行3件、棒24本（テストとシステムごと、システムは3種類）" in e.message.value
    # the axis says its log scale inside the unit's bracket (i18n.with_note), in Japanese too
    assert png(e.chart) != before and e.axes.get_ylabel() in ("スループット（MB/秒）", "スループット（MB/秒、対数目盛）")
    assert e.findings.outputs[0]["data"]["text/markdown"].startswith("**所見**")
    e.language.value = "en"
    assert e.recipe.description == "Recipe" and app.widget.get_title(1) == "Run a benchmark"


def test_test_picker_and_scale_change_the_chart():
    e = widgets.Explorer([str(FIXTURES)])
    assert e.tests.options == (("SEQ1M-Q8T1", "SEQ1M-Q8T1"), ("SEQ1M-Q1T1", "SEQ1M-Q1T1"),
                               ("RND4K-Q32T1", "RND4K-Q32T1"), ("RND4K-Q1T1", "RND4K-Q1T1"))
    everything, image = e.summary, png(e.chart)
    e.tests.value = ("SEQ1M-Q1T1",)
    assert set(e.summary["test"]) == {"SEQ1M-Q1T1"} and len(e.summary) == 6 and png(e.chart) != image
    assert e.summary.set_index(["system", "direction"])["value"].equals(
        everything[everything["test"] == "SEQ1M-Q1T1"].set_index(["system", "direction"])["value"])
    assert e.axes.get_yscale() == "linear"  # auto: these figures span less than 100x
    e.scale.value = "log"
    assert e.axes.get_yscale() == "log"
    e.tests.value = ()
    assert e.axes.get_yscale() == "log" and len(e.summary) == 24  # none picked: every test
    e.scale.value = "linear"
    assert e.axes.get_yscale() == "linear"
    e.recipe.value = "quick"  # the picker follows the recipe
    assert [v for _, v in e.tests.options] == list(dict.fromkeys(e.data["test"]))


def test_recipe_views_show_the_sections_of_the_report():
    e = widgets.Explorer([str(SECTIONS)], recipe="bonnie")
    assert [v for _, v in e.view.options] == ["bars", "bonnie"]
    e.view.value = "bonnie"
    assert e.section is not None and e.section.kind == "bonnie" and e.section.tables
    assert e.describe() == "bonnie | bonnie | HDD (emulated), NVMe"
    assert png(e.chart) and e.table.outputs and "Bonnie++" in e.chart.outputs[0]["data"]["text/markdown"]
    e.recipe.value = "qd-sweep"  # the view is offered per recipe: back to bars, the curves offered
    assert e.view.value == "bars" and [v for _, v in e.view.options] == ["bars", "qd-sweep", "concurrency"]
    e.view.value = "qd-sweep"
    assert e.section.kind == "qd-sweep" and e.axes is not None and e.axes.lines  # a curve, not bars
    e.recipe.value = "tiobench"
    e.view.value = "tiobench"
    assert e.section.kind == "tiobench" and len(e.section.tables) >= 2
    with pytest.raises(IolabError, match="unknown view"):
        views.section(e.data, "nosuch", lang="en")


def test_article_overlay_puts_measured_systems_beside_the_published_ones():
    e = widgets.Explorer([str(SECTIONS)], recipe="bonnie", reference="dedicated-server-2013")
    shown = e.overlay
    assert shown is not None and (shown.benchmark, shown.metric) == ("bonnie++", "throughput")
    published = set(shown.summary["system"]) - set(shown.measured)
    assert {"SATA HDD (mem=512M)", "ioDrive (mem=512M)"} <= published and shown.measured
    legend = [t.get_text() for t in shown.axes.get_legend().get_texts()]
    assert set(shown.measured) <= set(legend) and "SATA HDD (mem=512M)" in legend
    assert "the published figures and the runs shown" in e.overlay_output.outputs[0]["data"]["text/markdown"]
    e.recipe.value = "quick"  # no Bonnie++, tiobench or sql-bench: the article's own figures, said so
    assert not e.overlay.measured and "have no test of this article" in e.overlay.text
    e.reference.value = ""
    assert e.overlay is None and not e.overlay_output.outputs


def test_render_without_runs_says_so(tmp_path):
    e = widgets.Explorer([str(tmp_path)], threaded=False, report_dir=tmp_path / "reports")
    e.render()
    assert "Nothing to render" in e.render_status.value and e.report is None
    assert not (tmp_path / "reports").exists()


def test_stop_without_a_run_does_nothing():
    panel = widgets.RunPanel("data", target="/nowhere")
    assert panel.stop_button.disabled and panel.stop() is False and not panel.stopped


@needs_fio
@pytest.mark.slow
def test_stop_ends_a_small_run_and_keeps_what_it_measured(tmp_path):
    """Start a 30 s test on a plain directory, Stop while fio runs: fio stops at once, the run directory is
    kept with its manifest interrupted, the panel says where and can start again."""
    target = tmp_path / "disk"
    target.mkdir()
    panel = widgets.RunPanel(tmp_path / "data", target=str(target), recipe="quick", size="16M", runtime="30",
                             tests=["SEQ1M-Q1T1"], label="stopped")
    panel.start()
    deadline = time.monotonic() + 60
    while "Running SEQ1M-Q1T1" not in panel.status.value and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "Running SEQ1M-Q1T1" in panel.status.value, panel.status.value
    running = time.monotonic()  # fio has started: left alone, the test would go on for most of its 30 s
    assert not panel.stop_button.disabled and panel.stop() is True
    assert panel.wait(60), "the run did not stop"
    assert time.monotonic() - running < 20, "Stop did not cut the 30 s test short"
    assert panel.stopped and panel.result is None and panel.run_dir is not None
    manifest = json.loads((panel.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["label"] == "stopped"
    assert f"Run stopped: what was measured is kept in {panel.run_dir}" in panel.status.value
    assert panel.progress.description == "stopped" and not panel.start_button.disabled
    assert panel.stop_button.disabled and panel.stop() is False
    assert i18n.text("explorer.panel.stopped", "ja", run_dir="x") == "実行を止めた：測った分はxに残した"


def test_explorer_findings_say_what_the_compare_report_says(render_once):
    """The same runs, metric and statistic: the explorer's findings are the compare report's sentences."""
    page = render_once(data=FIXTURES, notebook="compare", lang="ja").markdown.read_text(encoding="utf-8")
    e = widgets.Explorer([str(FIXTURES)], statistic="best", lang="ja")  # the report charts CrystalDiskMark's best
    findings = e.findings.outputs[0]["data"]["text/markdown"]
    said = [line for line in findings.splitlines() if line.strip() and not line.startswith("**所見")]
    assert len(said) >= 5 and "NVMeが最も速い" in said[0]
    assert [s for s in said if s not in page] == []


def test_a_system_keeps_its_colour_when_the_language_changes():
    """Switching to Japanese renames the emulated systems (HDD (emulated) -> HDD（エミュレート）): the chart drew them
    in new colours, unlike every chart drawn before the switch; each keeps its colour."""
    e = widgets.Explorer([str(FIXTURES)])

    def legend():
        handles, labels = e.axes.get_legend_handles_labels()
        return labels, [tuple(h.patches[0].get_facecolor()) for h in handles]  # one bar container each
    en_labels, en = legend()
    e.language.value = "ja"
    ja_labels, ja = legend()
    assert "HDD (emulated)" in en_labels and "HDD（エミュレート）" in ja_labels
    assert ja == en and len(set(en)) == 3


def test_a_system_keeps_its_colour_whatever_order_the_charts_drew_it_in():
    """The colour follows the run, not the order of the chart after the switch: SATA SSD was drawn first (by an
    earlier chart in the kernel); in Japanese HDD（エミュレート） comes first in the legend but keeps HDD's colour."""
    from iolab.report import palette
    palette.reset()
    palette.color("SATA SSD (emulated)")  # an earlier chart drew SATA SSD alone: the palette's first colour
    e = widgets.Explorer([str(FIXTURES)])

    def colours():
        handles, labels = e.axes.get_legend_handles_labels()
        return dict(zip(labels, (tuple(h.patches[0].get_facecolor()) for h in handles)))
    en = colours()
    e.language.value = "ja"
    ja = colours()
    assert list(en)[0] == "HDD (emulated)" and list(ja)[0] == "HDD（エミュレート）"  # first in the legend, not drawn first
    assert len(set(en.values())) == 3
    assert ja["HDD（エミュレート）"] == en["HDD (emulated)"]
    assert ja["SATA SSD（エミュレート）"] == en["SATA SSD (emulated)"] and ja["NVMe"] == en["NVMe"]
