"""iolab report: selection of runs, real papermill + nbconvert runs, the CLI contract."""
import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from iolab.report import i18n, notebooks as report, tables
from iolab.core.errors import IolabError
from cli_helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "data"


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "iolab", "report", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------------------
# selection


def test_select_reads_every_run_and_names_systems():
    sel = report.select(FIXTURES)
    assert len(sel.manifests) == 7
    assert sel.manifests["has_results"].sum() == 6
    assert sorted(sel.recipes) == ["crystaldiskmark", "quick"]
    assert set(sel.systems) == {"HDD (emulated)", "HDD, cached", "NVMe", "SATA SSD (emulated)"}
    assert sel.results["system"].notna().all()
    quick = sel.for_recipe("quick")
    assert set(quick.manifests["recipe"]) == {"quick"} and len(quick.manifests) == 3


def test_select_filters_and_run_dirs():
    sel = report.select(FIXTURES, host="hdd-node", recipe=["quick"])
    assert set(sel.manifests["label"]) == {"HDD (emulated)", "HDD, cached"}
    run_dir = sel.manifests["run_dir"].iloc[0]
    one = report.select(runs=[run_dir])
    assert len(one.manifests) == 1 and one.results["run_dir"].eq(run_dir).all()
    with_results = report.select(FIXTURES, with_results=True)
    assert "broken-node" not in set(with_results.manifests["host"])


def test_select_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(IolabError, match=r"nowhere: no such file or directory"):
        report.select(tmp_path / "nowhere")
    with pytest.raises(IolabError, match="no runs found"):
        report.select(tmp_path)
    with pytest.raises(IolabError, match="no runs match host=mars"):
        report.select(FIXTURES, host="mars")
    with pytest.raises(IolabError, match="none of the selected runs has results"):
        report.select(FIXTURES, host="broken-node", with_results=True)
    with pytest.raises(IolabError, match="no run directory or data directory given"):
        report.select()


def test_system_names_are_unique_per_recipe():
    manifests = pd.DataFrame({"label": ["db", "db", "db", "web"], "host": ["a", "b", "b", "c"],
                              "recipe": ["quick"] * 3 + ["quick"], "run_id": ["r1", "r2", "r3", "r4"]})
    assert report.system_names(manifests) == ["db @ a", "db @ b (r2)", "db @ b (r3)", "web"]
    manifests["recipe"] = ["quick", "cdm", "bonnie", "quick"]
    assert report.system_names(manifests) == ["db", "db", "db", "web"]


# ---------------------------------------------------------------------------
# rendering (real papermill and nbconvert)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report-en")
    proc = cli("--data", FIXTURES, "--out", out)
    return proc, out


def test_cli_prints_the_html_path_last_and_writes_three_files(rendered):
    proc, out = rendered
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last == str(out / "report.html")
    for name in ("report.ipynb", "report.html", "report.md"):
        assert (out / name).is_file(), name
    assert "Kernel is running over TCP" not in proc.stderr


def test_html_has_no_code_and_embedded_images(rendered):
    _, out = rendered
    html = (out / "report.html").read_text(encoding="utf-8")
    body = html[html.index("<body"):]
    assert 'class="jp-InputArea' not in body and "jp-CodeMirrorEditor" not in body
    assert "import " not in body and "display(" not in body and "report.select" not in body
    images = re.findall(r'<img[^>]*\ssrc="([^"]+)"', body)
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)
    assert len(re.findall(r"<img[^>]*\salt=\"quick: ", body)) == 1
    for src in images:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # opens offline: nothing is fetched from anywhere
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', html)
    assert "<title>Storage benchmark report</title>" in html
    # provenance and results tables, the failed runs explained
    assert "<caption>Runs</caption>" in html and "<caption>Results</caption>" in html
    assert "Throughput (MB/s)" in html and "IOPS" in html
    assert "No space left on device" in html and "fio is not installed" in html


def test_markdown_has_pipe_tables_and_figure_files(rendered):
    _, out = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# Storage benchmark report")
    assert "| Test | Direction |" in md and "<table" not in md
    figures = re.findall(r"!\[([^\]]*)\]\(([^)]+)\)", md)
    assert len(figures) == 2
    for alt, path in figures:
        assert alt.startswith(("crystaldiskmark:", "quick:"))
        assert (out / path).is_file() and (out / path).read_bytes()[:4] == b"\x89PNG"
    assert "```" not in md  # no code
    assert "\n\n\n" not in md  # one blank line between blocks, not the four of nbconvert's cells


def test_executed_notebook_keeps_parameters_and_no_errors(rendered):
    _, out = rendered
    nb = nbformat.read(str(out / "report.ipynb"), as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and str(FIXTURES) in injected[0].source
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    stderr = [o.text for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not stderr, stderr


def test_japanese_report(tmp_path):
    run_dir = report.select(FIXTURES, host="hdd-node", recipe="crystaldiskmark").manifests["run_dir"].iloc[0]
    other = report.select(FIXTURES, host="nvme-node").manifests["run_dir"].iloc[0]
    proc = cli(run_dir, Path(other).parent, "--lang", "ja", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = Path(proc.stdout.strip().splitlines()[-1]).read_text(encoding="utf-8")
    assert '<html lang="ja">' in html
    assert "<title>ストレージベンチマークレポート</title>" in html
    for word in ("測定の来歴", "結果", "スループット（MB/秒）", "平均レイテンシ（ミリ秒）", "読み込み", "書き込み"):
        assert word in html, word
    nb = nbformat.read(str(tmp_path / "report.ipynb"), as_version=4)
    stderr = " ".join(o.text for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stderr")
    assert "missing from font" not in stderr and "Glyph" not in stderr


@pytest.mark.parametrize("args, message", [
    (["--lang", "fr"], "lang: unknown language 'fr' (choose one of: en, ja)"),
    (["--data", "/nonexistent/iolab-data"], "/nonexistent/iolab-data: no such file or directory"),
    (["--data", "EMPTY"], "no runs found"),
    (["--data", str(FIXTURES), "--host", "mars"], "no runs match host=mars"),
    (["--reference", "no-such-article"], "unknown article 'no-such-article'"),
    (["--data", str(FIXTURES), "--notebook", "nope.ipynb"], "nope.ipynb: notebook not found"),
])
def test_bad_input_is_a_one_line_error(tmp_path, args, message):
    args = [str(tmp_path) if a == "EMPTY" else a for a in args]
    proc = cli(*args, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("iolab: error: ")
    assert message in proc.stderr
    assert not (tmp_path / "out" / "report.html").exists()


def test_failing_notebook_keeps_the_executed_notebook(tmp_path):
    broken = tmp_path / "broken.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("raise RuntimeError('boom')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(broken))
    with pytest.raises(IolabError, match=r"failed in cell \d+: RuntimeError: boom") as info:
        report.execute(broken, tmp_path / "out" / "broken.ipynb", parameters={"x": 2})
    assert str(tmp_path / "out" / "broken.ipynb") in str(info.value)
    kept = json.loads((tmp_path / "out" / "broken.ipynb").read_text())
    assert any(o.get("ename") == "RuntimeError" for c in kept["cells"] for o in c.get("outputs", []))


def test_default_out_dir_is_new_each_time(tmp_path):
    first = report.default_out_dir(tmp_path)
    first.mkdir()
    second = report.default_out_dir(tmp_path)
    assert first != second and first.parent == tmp_path and not second.exists()


def test_a_run_on_two_targets_gives_two_systems(tmp_path):
    from iolab.engine.store import Run
    run = Run.create(tmp_path, recipe="quick", label="box", host="box")
    rows = [{"run_id": run.run_id, "host": "box", "label": "box", "recipe": "quick", "test": "SEQ1M-Q8T1",
             "rep": rep, "direction": "read", "bw_mbps": bw, "target": target, "valid": True}
            for target, bw in (("sda", 100.0), ("nvme0n1", 3000.0)) for rep in (1, 2)]
    run.add_results(pd.DataFrame(rows))
    run.finish("completed")
    sel = report.select(tmp_path)
    assert sorted(sel.systems) == ["box · nvme0n1", "box · sda"]
    from iolab.report import tables
    summary = tables.summarize(sel.results)
    assert dict(zip(summary["system"], summary["value"])) == {"box · sda": 100.0, "box · nvme0n1": 3000.0}


def test_many_servers_render_through_the_speed_benchmark(tmp_path, capsys):
    """benchmarks/report_speed.py with 13 servers: turned tables and the dot chart, for real."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import report_speed
    finally:
        sys.path.pop(0)
    assert report_speed.main(["--servers", "13", "--keep", str(tmp_path), "--goal", "120"]) == 0
    md = (tmp_path / "report" / "compare.md").read_text(encoding="utf-8")
    assert "| System | SEQ1M-Q8T1 / read |" in md  # 13 systems: one row each
    assert re.search(r"the other \d+ systems range over", md)
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith("compare.html")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_plain_report_on_every_recipe_kind_leaves_fleet_sums_out(tmp_path, lang):
    """The first report on a store with every recipe kind, pgbench (no MB/s) and fleet runs (host "all"), in en and ja."""
    sections = ROOT / "tests" / "fixtures" / "sections"
    proc = cli("--data", sections, "--lang", lang, "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(str(tmp_path / "report.ipynb"), as_version=4)
    text = " ".join(str(o.get("text", "")) + json.dumps(o.get("data", {}), ensure_ascii=False) for c in nb.cells
                    for o in c.get("outputs", []))
    T = lambda key, **fields: i18n.text(key, lang, **fields)  # noqa: E731
    # pgbench (transactions, not MB/s) in its own section, with its findings, as on the compare page
    assert T("text.no_throughput") not in text
    assert "#### " + T("sections.pg.heading") in (tmp_path / "report.md").read_text()
    assert len(report.select(sections, host="all").manifests) >= 1  # the store has fleet sums...
    html = (tmp_path / "report.html").read_text()
    assert ">all<" not in html  # ...and no table shows one as a host of its own
    md = (tmp_path / "report.md").read_text()
    for name in report.select(sections).recipes:  # every recipe has its part of the report
        assert "### " + T("headings.recipe", recipe=name) in md, name
    # sql-bench's rows have seconds, no MB/s, IOPS or latency: no empty table claiming there were no runs
    assert T("text.no_runs") not in text
    # CrystalDiskMark's own figure (best of the passes) beside the mean, as the README promises, and charted
    cdm = md.split("### " + T("headings.recipe", recipe="crystaldiskmark"), 1)[1].split("\n### ", 1)[0]
    assert "#### " + T("sections.fleet.heading") in cdm  # its fleet section first, the hosts' tables after
    assert T("labels.best_of", caption=tables.caption_for("bw_mbps", "MB/s", lang), n=3, tool="CrystalDiskMark 8") in cdm
    assert T("labels.ci_note", statistic=T("labels.mean"), n=3) in cdm
    # the chart plots the best pass: no confidence interval drawn or promised
    assert T("text.chart_caption_ci", metric=i18n.label("bw_mbps", lang, section="metrics"),
             unit=i18n.unit("MB/s", lang)) not in cdm


def test_emulated_latency_percentiles_are_not_plotted_as_a_disks(tmp_path):
    """The demo's page plotted a throttled loop device's latency percentiles right after saying they are not a
    disk's: runs flagged emulated_latency get the caveat and no percentile plot; unflagged copies get both plots."""
    sections = ROOT / "tests" / "fixtures" / "sections"
    for flags, name in (("emulated_latency", "flagged"), ("", "plain")):
        for host in ("hdd-node", "ssd-node"):
            source = next((sections / host).glob("*-quick-*"))
            target = tmp_path / name / host / source.name
            shutil.copytree(source, target)
            frame = pd.read_csv(target / "results.csv")
            frame["flags"] = flags
            frame.to_csv(target / "results.csv", index=False)
    flagged = report.report(data=tmp_path / "flagged", notebook="compare", out=tmp_path / "out-flagged")
    md = flagged.markdown.read_text(encoding="utf-8")
    assert "(emulated_latency)" in md and "Latency percentiles" not in md and len(flagged.figures) == 1
    plain = report.report(data=tmp_path / "plain", notebook="compare", out=tmp_path / "out-plain")
    assert plain.markdown.read_text(encoding="utf-8").count("Latency percentiles") == 2
