"""iolab import on real fio output captured here: json, json+, numjobs > 1 without group_reporting,
a failed job (ENOSPC on /dev/full) with fio's text before the JSON, client/server output, a folder of
them, and a real bench-fio tree. Each import is a run in the store: raw/ byte for byte, the rows
parse_output gives, the manifest's provenance."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import iolab
from iolab.engine import store
from iolab.engine.fio import parse_output
from iolab.interop import imports

from cli_helpers import FIXTURES, ROOT, cli_main, iolab_cli, live_processes, needs_fio

pytestmark = needs_fio

JOB = ["--ioengine=psync", "--size=4M", "--runtime=1", "--time_based=1", "--bs=4k"]


def fio(out: Path, *args, stderr_too=False) -> Path:
    """Run the real fio; its stdout (and stderr, as a shell's 2>&1 would) into ``out``."""
    with open(out, "wb") as handle:
        subprocess.run(["fio", *args], stdout=handle, stderr=subprocess.STDOUT if stderr_too else None,
                       timeout=120, check=False)
    return out


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Real fio outputs of several kinds, in one folder (a tree: one of them one level down)."""
    root = tmp_path_factory.mktemp("fio-out")
    scratch = tmp_path_factory.mktemp("scratch")
    data = scratch / "t.dat"
    tree = root / "tree"
    (tree / "more").mkdir(parents=True)
    fio(tree / "randread.json", "--name=randread", f"--filename={data}", "--rw=randread", *JOB,
        "--output-format=json")
    fio(tree / "more" / "seqwrite-plus.json", "--name=seqwrite", f"--filename={data}", "--rw=write", *JOB,
        "--output-format=json+")
    fio(tree / "two-jobs.json", "--name=twojobs", f"--filename={data}", "--rw=randread", *JOB, "--numjobs=2",
        "--output-format=json")
    fio(root / "failed.json", "--name=full", "--filename=/dev/full", "--rw=write", "--bs=4k", "--size=1M",
        "--output-format=json", stderr_too=True)
    return root


@pytest.fixture(scope="module")
def client_output(tmp_path_factory):
    """fio's client/server output: a real fio server on a Unix socket, stopped afterwards."""
    where = tmp_path_factory.mktemp("cs")
    sock = where / "fio.sock"
    server = subprocess.Popen(["fio", f"--server=sock:{sock}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        job = where / "cs.fio"
        job.write_text(f"[cs]\nfilename={where / 'cs.dat'}\nrw=read\nsize=4M\nbs=64k\nruntime=1\n")
        out = fio(where / "client.json", f"--client=sock:{sock}", "--output-format=json", str(job))
    finally:  # the server and the child it forked for the job: its own process group
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        for _ in range(100):
            if not live_processes(f"--server=sock:{sock}"):
                break
            time.sleep(0.1)
    assert live_processes(f"--server=sock:{sock}") == []
    return out


@pytest.fixture(scope="module")
def bench_fio_tree(tmp_path_factory):
    """A real bench-fio run (fio-plot's companion, from PyPI) on a scratch file: its own output tree."""
    exe = Path(ROOT / ".venv" / "bin" / "bench-fio")
    if not exe.exists():
        pytest.skip("bench-fio is not installed (pip install fio-plot, the test extra)")
    where = tmp_path_factory.mktemp("bench")
    target = where / f"iolab-bf-{uuid.uuid4().hex[:8]}.dat"
    target.write_bytes(b"")
    os.truncate(target, 8 << 20)
    out = where / "out"
    try:
        proc = subprocess.run([str(exe), "-d", str(target), "-t", "file", "-s", "8M", "-o", str(out),
                               "-b", "4k", "--iodepth", "1", "4", "--numjobs", "2", "-m", "randread",
                               "--runtime", "1", "--quiet"], capture_output=True, text=True, timeout=300)
    finally:
        Path(f"/tmp/{target.name}-tmpjobfile.fio").unlink(missing_ok=True)  # bench-fio's fixed place
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_a_tree_of_fio_json_is_one_run_with_each_file_untouched(captured, tmp_path):
    (run_dir,) = imports.import_paths([captured / "tree"], data_dir=tmp_path, host="db1", label="old disk")
    assert run_dir.parent == tmp_path / "db1"
    for rel in ("randread.json", "more/seqwrite-plus.json", "two-jobs.json"):
        assert (run_dir / "raw" / rel).read_bytes() == (captured / "tree" / rel).read_bytes()
    manifest = store.read_manifest(run_dir)
    assert manifest["status"] == "completed" and manifest["recipe"] == "fio"
    assert manifest["provenance"] == (f"imported from {(captured / 'tree').resolve()}, measured by "
                                      f"{manifest['imported']['tool']}, not by iolab")
    assert manifest["tool"] == manifest["provenance"]  # reports print a run's tool: here, who measured it
    assert manifest["imported"]["tool"].startswith("fio 3.") and manifest["versions"]["fio"].startswith("fio-3.")
    assert manifest["imported"]["format"] == ["fio json", "fio json+"]
    assert manifest["started"] is None and manifest["isolation"] == {}  # never made up
    rows = iolab.load(tmp_path)
    assert sorted(rows["test"]) == ["randread", "seqwrite", "twojobs"]
    assert set(rows["label"]) == {"old disk"} and set(rows["host"]) == {"db1"}
    assert rows["isolation"].isna().all() and rows["flags"].isna().all()
    # every figure is what fio's own parser reads from that file
    for test, rel in (("randread", "randread.json"), ("seqwrite", "more/seqwrite-plus.json"),
                      ("twojobs", "two-jobs.json")):
        expected = parse_output((captured / "tree" / rel).read_text()).iloc[0]
        row = rows[rows["test"] == test].iloc[0]
        for column in ("bw_mbps", "iops", "lat_mean_us", "lat_p99_us", "io_bytes", "bs", "iodepth", "numjobs"):
            assert row[column] == pytest.approx(expected[column]), (test, column)
    two = rows[rows["test"] == "twojobs"].iloc[0]
    doc = json.loads((captured / "tree" / "two-jobs.json").read_text())
    assert len(doc["jobs"]) == 2 and two["numjobs"] == 2  # two entries, merged into one row:
    longest = max(j["read"]["runtime"] for j in doc["jobs"]) / 1000  # their I/O over the longest runtime
    assert two["bw_mbps"] == pytest.approx(sum(j["read"]["io_bytes"] for j in doc["jobs"]) / longest / 1e6)


def test_a_failed_job_with_fio_text_before_the_json_keeps_its_error(captured, tmp_path):
    assert (captured / "failed.json").read_text().startswith("fio: ")  # fio's lines, then the JSON
    (run_dir,) = imports.import_paths([captured / "failed.json"], data_dir=tmp_path)
    assert run_dir.parent.name == imports.UNKNOWN_HOST
    rows = iolab.load(run_dir)
    assert len(rows) == 1 and "ENOSPC" in rows["error"].iloc[0] and not rows["valid"].iloc[0]
    assert rows["label"].iloc[0] == "failed" and rows["test"].iloc[0] == "full"


def test_client_server_output_keeps_each_client_host(client_output, tmp_path):
    (run_dir,) = imports.import_paths([client_output], data_dir=tmp_path, host="fleet")
    rows = iolab.load(run_dir)
    expected = parse_output(client_output.read_text())
    assert len(rows) == len(expected) == 1
    assert rows["host"].iloc[0] == expected["host"].iloc[0] and rows["host"].iloc[0] != "fleet"
    assert rows["bw_mbps"].iloc[0] == pytest.approx(expected["bw_mbps"].iloc[0])


def test_a_bench_fio_tree_is_a_run_per_target_named_by_its_layout(bench_fio_tree, tmp_path):
    (target,) = [p.name for p in bench_fio_tree.iterdir()]
    (run_dir,) = imports.import_paths([bench_fio_tree], data_dir=tmp_path)
    manifest = store.read_manifest(run_dir)
    assert manifest["recipe"] == "bench-fio" and manifest["label"] == target
    assert manifest["imported"]["tool"].startswith("bench-fio with fio 3.")
    rows = iolab.load(run_dir).sort_values("iodepth")
    assert list(rows["test"]) == ["4k/randread-1-2", "4k/randread-4-2"]
    assert list(rows["iodepth"]) == [1, 4] and set(rows["numjobs"]) == {2} and set(rows["bs"]) == {4096}
    assert set(rows["target"]) == {target}
    # bench-fio's .log time series beside the JSON are not fio JSON output: not imported
    assert sorted(p.name for p in (run_dir / "raw" / target / "4k").iterdir()) == ["randread-1-2.json",
                                                                                  "randread-4-2.json"]


def test_the_cli_prints_each_run_and_refuses_what_is_not_fio_in_one_line(captured, capsys, caplog, tmp_path):
    code, out, err = cli_main(capsys, caplog, "import", captured / "tree", captured / "failed.json",
                              "--data", tmp_path / "d", "--host", "h1")
    assert code == 0 and len(out.splitlines()) == 2 and all(Path(l).is_dir() for l in out.splitlines())
    junk = tmp_path / "notes.json"
    junk.write_text('{"hello": 1}\n')
    code, out, err = cli_main(capsys, caplog, "import", junk, "--data", tmp_path / "d2")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"iolab: error: {junk}: neither fio JSON output nor a "
                                        "CrystalDiskMark/KDiskMark text export"]
    assert not (tmp_path / "d2").exists()  # nothing written
    code, _, err = cli_main(capsys, caplog, "import", tmp_path / "missing", "--data", tmp_path / "d2")
    assert code == 2 and err.startswith("iolab: error: ") and len(err.strip().splitlines()) == 1


def test_a_bench_fio_tree_and_a_folder_of_fio_json_become_a_report_beside_an_iolab_run(captured, bench_fio_tree,
                                                                                       tmp_path):
    """Issue 24's "done when" for fio's own outputs: each import is a system of the comparison article beside a
    stored iolab run, its origin said, its figures in the tables."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "data" / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a",
                    data / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a")
    (plain,) = imports.import_paths([captured / "tree"], data_dir=data, host="db1", label="old disk")
    (bench,) = imports.import_paths([bench_fio_tree], data_dir=data, host="db1")
    proc = iolab_cli("report", "--data", data, "--notebook", "compare", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "out" / "compare.md").read_text()
    for run_dir, source in ((plain, captured / "tree"), (bench, bench_fio_tree)):
        manifest = store.read_manifest(run_dir)
        assert f"imported from {source.resolve()}, measured by {manifest['imported']['tool']}" in text
    assert "old disk" in text and store.read_manifest(bench)["label"] in text and "HDD (emulated)" in text
    assert "## Recipe: fio" in text and "## Recipe: bench-fio" in text
    for run_dir in (plain, bench):  # every imported row's rate is in the tables, as the tables round it
        for value in iolab.load(run_dir)["iops"]:
            assert f"{value:,.0f}" in text or f"{value:,.1f}" in text, value
