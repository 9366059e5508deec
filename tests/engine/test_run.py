"""A real fio run through the engine and the CLI: run directory, errors, interruption."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import iolab
from iolab.engine import runner
from iolab.core.columns import RESULT_COLUMNS

from cli_helpers import IOLAB, ROOT, live_processes, needs_fio
from kernel_fixtures import mounted

pytestmark = needs_fio


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One real `quick` run on a directory target, shared by the tests below."""
    target = tmp_path_factory.mktemp("target")
    data = tmp_path_factory.mktemp("data")
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(target), "--size", "16M", "--runtime", "1",
                                   "--label", "tmp dir", "--data", str(data)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1]), target, data


def test_run_directory_layout(quick_run):
    run_dir, target, data = quick_run
    assert run_dir.parent.parent == data
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    for key in ("host", "run_id", "started", "ended", "system", "versions", "targets", "isolation", "options"):
        assert manifest[key], key
    assert manifest["versions"]["fio"].startswith("fio-")
    assert manifest["targets"][0]["kind"] == "dir" and manifest["targets"][0]["filesystem"]
    assert manifest["isolation"]["mode"] == "direct"
    assert (run_dir / "recipe.yaml").read_text().startswith("name: quick")
    jobs = sorted(p.name for p in (run_dir / "jobs").iterdir())
    # the test file is laid out once (real data) before any test is timed
    assert "_layout.fio" in jobs and (run_dir / "raw" / "_layout.json").stat().st_size > 0
    jobs.remove("_layout.fio")
    assert len(jobs) == 8 and "SEQ1M-Q8T1-read.fio" in jobs
    raws = sorted(p.name for p in (run_dir / "raw").iterdir() if not p.name.startswith("_"))
    assert raws == sorted(j.replace(".fio", "-1.json") for j in jobs)
    raw = json.loads((run_dir / "raw" / "SEQ1M-Q8T1-read-1.json").read_text())
    assert raw["jobs"][0]["read"]["io_bytes"] > 0  # fio's own JSON, untouched
    # the test file iolab laid out in the directory is gone
    assert list(target.iterdir()) == []


def test_job_files_rerun_with_plain_fio(quick_run, tmp_path):
    run_dir, _, _ = quick_run
    text = (run_dir / "jobs" / "RND4K-Q1T1-randread.fio").read_text()
    assert "rw=randread" in text and "bs=4k" in text and "direct=1" in text and "lat_percentiles=1" in text
    rerun = text.replace(next(line for line in text.splitlines() if line.startswith("filename=")),
                         f"filename={tmp_path / 'again.dat'}").replace("runtime=1s", "runtime=1s")
    job = tmp_path / "again.fio"
    job.write_text(rerun)
    proc = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert iolab.engine.fio.parse_output(proc.stdout)["iops"].iloc[0] > 0


def test_results_have_the_contract_columns(quick_run):
    run_dir, _, data = quick_run
    table = iolab.load(data)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert len(table) == 8
    assert set(table["test"]) == {"SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1"}
    assert set(table["direction"]) == {"read", "write"}
    assert (table["bw_mbps"] > 0).all() and (table["iops"] > 0).all()
    assert table["error"].isna().all() and table["label"].eq("tmp dir").all()
    seq = table[(table.test == "SEQ1M-Q8T1") & (table.direction == "read")].iloc[0]
    assert seq["bs"] == 1024**2 and seq["iodepth"] == 8 and seq["numjobs"] == 1
    # MB/s x 10^6 / block size = IOPS (decimal MB/s, as in the articles)
    assert seq["bw_mbps"] * 1e6 / seq["bs"] == pytest.approx(seq["iops"], rel=0.02)
    assert (table["lat_p50_us"] <= table["lat_p99_us"]).all()
    # fio's percentiles come from log-linear histogram buckets (1/64 of a power of two
    # wide), so p99 may sit a bucket above the exact maximum
    assert (table["lat_p99_us"] <= table["lat_max_us"] * (1 + 2 / 64)).all()


def test_cli_errors_are_one_line_with_exit_2(iolab, tmp_path):
    cases = [
        (["run", "no-such-recipe", "--target", tmp_path], "unknown recipe 'no-such-recipe'"),
        (["run", "quick", "--target", tmp_path / "missing"], "missing: no such file or directory"),
        (["run", "quick", "--target", tmp_path, "--size", "900T"], "not enough free space"),
        (["run", "quick", "--target", tmp_path, "--size", "lots"], "--size: not a size"),
    ]
    for args, expected in cases:
        proc = iolab(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("iolab: error:") and expected in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_fio_missing_says_how_to_install(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no fio on this PATH
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(tmp_path)], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    assert proc.returncode == 2
    assert "fio is not installed" in proc.stderr and "apt-get install fio" in proc.stderr


def test_dry_run_prints_jobs_and_creates_nothing(iolab, tmp_path):
    data = tmp_path / "data"
    proc = iolab("run", "quick", "--target", tmp_path, "--dry-run", "--data", data)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("[SEQ1M-Q8T1-read]") == 1 and "rw=randwrite" in proc.stdout
    assert not data.exists()


FAILING = """
name: halfbad
description: a good read of a small file, then a write that does not fit the file system
isolation: none
defaults: {size: 4M, runtime: 1}
fio: {ioengine: psync}
tests:
  - name: GOOD
    rw: read
    bs: 1M
  - name: BAD
    rw: write
    bs: 1M
    fio: {size: 64m, time_based: 0}   # a raw fio option: beyond iolab's free-space check
"""


@pytest.fixture
def small_fs(tmp_path):
    """A 16 MiB tmpfs: writing 64 MiB into it fails with ENOSPC."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    with mounted(tmp_path / "small", "tmpfs", "16m") as mnt:
        yield mnt


def test_a_failed_step_keeps_the_rest_and_says_so(tmp_path, small_fs):
    recipe = tmp_path / "halfbad.yaml"
    recipe.write_text(FAILING)
    result = runner.run(str(recipe), [str(small_fs)], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "failed"
    assert "BAD" in result.manifest["reason"] and "ENOSPC" in result.manifest["reason"]
    table = iolab.load(result.path)
    good = table[table.test == "GOOD"]
    bad = table[table.test == "BAD"]
    assert len(good) == 1 and good["bw_mbps"].iloc[0] > 0 and good["error"].isna().all()
    assert len(bad) == 1 and "errno 28" in bad["error"].iloc[0]
    assert bad["io_bytes"].iloc[0] > 0  # what was written before the disk filled up is kept
    assert not bad["valid"].iloc[0]
    tests = {t["name"]: t["status"] for t in result.manifest["tests"]}
    assert tests == {"GOOD": "completed", "BAD": "failed"}
    assert (result.path / "raw" / "BAD-1.json").stat().st_size > 0
    assert list(small_fs.iterdir()) == []  # the test file is removed after the run


@pytest.mark.parametrize("signum, how", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_interrupting_keeps_what_was_measured(tmp_path, signum, how):
    data = tmp_path / "data"
    proc = subprocess.Popen(IOLAB + ["run", "quick", "--target", str(tmp_path), "--size", "16M", "--runtime", "3",
                                     "--data", str(data), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(data.glob("*/*/results.csv")):
        time.sleep(0.2)
    # the first step is kept; signal once the second step's fio and its job process run (not "1 s later")
    while time.monotonic() < deadline and len([p for p in live_processes(str(data)) if "--output-format=" in p]) < 2:
        time.sleep(0.05)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run_dir = next(data.glob("*/*"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and how in manifest["reason"]
    table = pd.read_csv(run_dir / "results.csv")
    done, cut = table[table["error"].isna()], table[table["error"].notna()]
    assert len(done) >= 1 and (done["bw_mbps"] > 0).all()
    # the test that was running: its row (what fio wrote when stopped) is kept and says why it is not a result
    assert len(cut) == 1 and cut["error"].iloc[0].startswith("interrupted by") and how in cut["error"].iloc[0]
    assert not cut["valid"].any()
    statuses = [t["status"] for t in manifest["tests"]]
    assert statuses.count("interrupted") == 1 and "running" not in statuses
    assert all(p.stat().st_size for p in (run_dir / "raw").iterdir())  # no empty raw JSON
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # test file removed
    # no fio of this run is left behind (its command line names the run directory)
    assert subprocess.run(["pgrep", "-f", str(data)], capture_output=True).returncode == 1


SWEEP = """
name: concurrency
description: random reads by 1 and 3 clients
defaults: {size: 16M, runtime: 1}
fio: {ioengine: psync, direct: 1}
tests:
  - name: RND4K
    rw: randread
    bs: 4k
    numjobs: [1, 3]
"""


def test_concurrency_sweep_keeps_each_client_and_their_fairness(tmp_path):
    recipe = tmp_path / "concurrency.yaml"
    recipe.write_text(SWEEP)
    result = runner.run(str(recipe), [str(tmp_path)], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest["reason"]
    table = iolab.load(result.path).set_index("test")
    one, three = table.loc["RND4K-Q1T1"], table.loc["RND4K-Q1T3"]
    assert one["numjobs"] == 1 and pd.isna(one["jain_index"])
    assert three["numjobs"] == 3 and three["sweep"] == "RND4K"
    raw = json.loads((result.path / "raw" / "RND4K-Q1T3-1.json").read_text())
    clients = [job["read"]["bw_bytes"] / 1e6 for job in raw["jobs"]]
    assert len(clients) == 3  # fio reported each client: no group_reporting
    # the row's rate is the clients' bytes over the longest one's runtime (fio's group_reporting, tiotest's Rate)
    longest = max(job["read"]["runtime"] for job in raw["jobs"]) / 1000
    assert three["bw_mbps"] == pytest.approx(sum(job["read"]["io_bytes"] for job in raw["jobs"]) / longest / 1e6,
                                             rel=1e-6)
    assert three["bw_mbps"] <= sum(clients) * (1 + 1e-6)  # never more than the clients' own rates add up to
    assert three["client_min_mbps"] == pytest.approx(min(clients))
    expected_jain = sum(clients) ** 2 / (3 * sum(c * c for c in clients))
    assert three["jain_index"] == pytest.approx(expected_jain)
    assert "--output-format=json+" in result.manifest["commands"]["jobs/RND4K-Q1T3.fio"]


def test_dry_run_of_an_engine_recipe_lists_its_tests(iolab, tmp_path):
    proc = iolab("run", "bonnie", "--target", tmp_path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "engine bonnie: it runs these tests itself" in proc.stdout and "[global]" not in proc.stdout
    assert "seeks: Random Seeks" in proc.stdout
