"""A mixed test's three rows in results.csv (fio's read, write and KDiskMark's ``mix`` figure, 26a82f1) downstream:
the cdm-text export writes CrystalDiskMark's figure (reads + writes) once, never adding the ``mix`` row in; its
re-import holds that total in bw_total_mbps as a measured run does; fio-plot gets fio's JSON per step and nothing
for the ``mix`` row; ``iolab report`` renders the row labelled, in en and ja. One real short run (~15 s) for all."""
import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from iolab.engine import store
from iolab.interop import cdmtext, exports, imports

from cli_helpers import iolab_cli, needs_fio, needs_root

pytestmark = [needs_fio, needs_root]

MIX = "MIX-SEQ1M-Q8T1"


@pytest.fixture
def run_dir(cdm_demo_mix_run):
    """crystaldiskmark demo + --mix R70, two passes on a small file (tests/conftest.py's shared run)."""
    return cdm_demo_mix_run[0]


@pytest.fixture
def measured(run_dir):
    table = pd.read_csv(run_dir / "results.csv")
    table = table[table["rep"] > 0]
    assert set(table.loc[table["test"] == MIX, "direction"]) == {"read", "write", "mix"}
    return table


def _passes(measured, test, directions):
    rows = measured[(measured["test"] == test) & measured["direction"].isin(directions)]
    rows = rows.assign(weighted=rows["lat_mean_us"] * rows["iops"])
    per = rows.groupby("rep").agg(bw=("bw_mbps", "sum"), iops=("iops", "sum"), weighted=("weighted", "sum"))
    return per.assign(lat=per["weighted"] / per["iops"])


@pytest.mark.parametrize("statistic", ["best", "mean"])
def test_cdm_text_mix_line_is_reads_plus_writes_counted_once(run_dir, measured, tmp_path, statistic):
    [path] = exports.export(run_dir, tmp_path, fmt="cdm-text", statistic=statistic)
    text = path.read_text()
    assert "* Mix = read + write MB/s and IOPS" in text and "not KDiskMark's" in text
    parsed = cdmtext.parse(text)
    assert parsed.mix == "Read 70%/Write 30%"
    assert [r["direction"] for r in parsed.rows] == ["read", "write", "mix"]  # one line each, mix not in Read/Write
    per = _passes(measured, MIX, ("read", "write"))
    want = per.loc[per["bw"].idxmax()] if statistic == "best" else per.mean()
    mix = parsed.rows[-1]
    assert mix["bw_mbps"] == pytest.approx(want["bw"], abs=5e-4)
    assert mix["iops"] == pytest.approx(want["iops"], abs=0.05)
    assert mix["latency_us"] == pytest.approx(want["lat"], abs=5e-3)
    rows = measured[measured["test"] == MIX].set_index(["rep", "direction"])
    for rep in per.index:  # the figure is results.csv's total, and not the weighted mix row (nor + it)
        assert per.loc[rep, "bw"] == pytest.approx(rows.loc[(rep, "mix"), "bw_total_mbps"], rel=1e-9)
    weighted = rows.xs("mix", level="direction")["bw_mbps"]
    assert all(abs(mix["bw_mbps"] - w) > 1e-3 for w in weighted)
    # plain tests keep their one row each
    seq = _passes(measured, "SEQ1M-Q8T1", ("read",))
    assert parsed.rows[0]["bw_mbps"] == pytest.approx(
        seq["bw"].max() if statistic == "best" else seq["bw"].mean(), abs=5e-4)


def test_reimported_mix_row_holds_the_total_as_a_measured_one(run_dir, measured, tmp_path):
    [path] = exports.export(run_dir, tmp_path / "text", fmt="cdm-text", statistic="best")
    [imported] = imports.import_paths([path], data_dir=tmp_path / "data")
    rows = store.load(imported)
    mix = rows[rows["direction"] == "mix"].iloc[0]
    assert mix["test"] == MIX and int(mix["rwmixread"]) == 70
    best = measured[(measured["test"] == MIX) & (measured["direction"] == "mix")]["bw_total_mbps"].max()
    assert mix["bw_total_mbps"] == pytest.approx(best, abs=5e-4) and mix["bw_mbps"] == mix["bw_total_mbps"]


def test_fio_plot_gets_one_json_per_step_and_pass_and_none_for_the_mix_row(run_dir, tmp_path):
    exports.export(run_dir, tmp_path, fmt="fio-plot")
    found = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json"))
    per_pass = ["1m/read-8-1.json", "1m/rw-8-1.json", "1m/write-8-1.json"]
    passes = [f for f in found if not f.startswith("warmup/")]  # a warm-up pass where the recipe has one
    assert passes == sorted(f"{folder}/{name}" for folder in ("best", "pass-1", "pass-2") for name in per_pass)
    assert {f.split("/", 1)[1] for f in found} == set(per_pass)
    doc = json.loads((tmp_path / "best" / "1m" / "rw-8-1.json").read_text())
    assert doc["jobs"][0]["job options"]["rw"] == "rw" and doc["jobs"][0]["job options"]["rwmixread"] == "70"


@pytest.mark.parametrize("lang, label", [("en", "mix"), ("ja", "混合")])
def test_report_renders_the_mix_row_labelled(run_dir, tmp_path, lang, label):
    proc = iolab_cli("report", run_dir, "--lang", lang, "--out", tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(str(tmp_path / "report.ipynb"), as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"| {MIX} | {label} |" in md, md[:4000]
    read, write = ("read", "write") if lang == "en" else ("読み込み", "書き込み")
    # the results table (test x direction): the mix figure after its parts, once; the best-of table's columns alike
    mixed = [line.split("|")[2].strip() for line in md.splitlines()
             if line.startswith(f"| {MIX} |") and line.count("|") >= 6]
    assert mixed == [read, write, label], mixed
    assert f"/ {read} | vm / {write} | vm / {label} |" in md


def test_an_imported_crystaldiskmark_mix_row_is_its_total_and_is_written_back_as_is(tmp_path):
    """No fio here: CrystalDiskMark's [Mix] figure is reads + writes, so it fills bw_total_mbps too, and an export
    of the imported run writes that line as it was, under a header line that says so."""
    fixture = Path(__file__).parents[1] / "fixtures" / "interop" / "cdm8-nvme.txt"
    [run] = imports.import_paths([fixture], data_dir=tmp_path / "data")
    rows = store.load(run)
    mix = rows[rows["direction"] == "mix"]
    assert len(mix) and (mix["rwmixread"] == 70).all()
    assert list(mix["bw_total_mbps"]) == list(mix["bw_mbps"]) and list(mix["iops_total"]) == list(mix["iops"])
    [path] = exports.export(run, tmp_path / "out", fmt="cdm-text")
    text = path.read_text()
    assert exports.MIX_COPIED in text and exports.MIX_NOTE not in text
    again = [r for r in cdmtext.parse(text).rows if r["direction"] == "mix"]
    assert [r["bw_mbps"] for r in again] == list(mix["bw_mbps"])
