"""``iolab run --simultaneous`` for real: two emulated devices throttled at known, different rates, read by one
fio at the same time, each land at their own rate and the total at their sum; two directories share one
confined fio; the reports keep the total apart from the targets. Needs root and fio (the device window)."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cli_helpers import cli_main
from kernel_fixtures import machine_clean, needs_fio, needs_root  # noqa: F401  (fixture)
from iolab.devices import emulated
from iolab.engine import runner
from iolab.engine.fio import text as fiotext
from iolab.report import notebooks
from iolab.report.sections import common

pytestmark = [needs_root, needs_fio, pytest.mark.usefixtures("machine_clean")]

RUNTIME = 3
#: blk-throttle dispatches in ~0.1 s slices: a rate over RUNTIME seconds may be off by a slice at each end,
#: and two devices share this machine's two CPUs while they run
TOLERANCE = 2 * 0.1 / RUNTIME + 0.05

READ_RECIPE = f"""
name: simultaneous-read
description: one {RUNTIME}-second sequential 1 MiB read at QD8 (simultaneous tests)
isolation: direct
defaults:
  size: 64M
  runtime: {RUNTIME}
  repeat: 1
fio:
  ioengine: libaio
  direct: 1
tests:
  - name: seqread
    rw: [read]
    bs: 1M
    iodepth: 8
"""

WRITE_RECIPE = """
name: simultaneous-write
description: one 1-second random 4 KiB write at QD4 (simultaneous tests)
isolation: direct
defaults:
  size: 16M
  runtime: 1
  repeat: 2
fio:
  ioengine: libaio
  direct: 1
tests:
  - name: randwrite
    rw: [randwrite]
    bs: 4k
    iodepth: 4
"""


@pytest.fixture
def in_ram():
    """Emulated devices' backing files in RAM: two devices read at once must not share a slower disk."""
    path = tempfile.mkdtemp(prefix="iolab-simultaneous-", dir="/dev/shm")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _recipe(tmp_path, text, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def _ceiling(target: dict, profile) -> float:
    """MB/s the device's read throttle allows, or what the host reached of it when the probe fell short."""
    declared = profile.expected(bs=1024**2, rw="read")["bw_bps"]
    reached = ((target.get("emulated") or {}).get("reachable") or {}).get("read_bps")
    return min(declared, reached or declared) / 1e6


def test_two_throttled_devices_read_at_once_each_at_its_own_rate_and_the_total_their_sum(tmp_path, in_ram):
    result = runner.run(_recipe(tmp_path, READ_RECIPE, "read"), ["emulated:hdd", "emulated:consumer-ssd"],
                        simultaneous=True, data_dir=tmp_path / "data", progress=False, scratch_dir=in_ram)
    manifest, table = result.manifest, result.results
    assert manifest["status"] == "completed", manifest.get("reason")
    assert manifest["simultaneous"] == {"targets": ["hdd", "consumer-ssd"], "total": "hdd+consumer-ssd"}
    assert manifest["options"]["simultaneous"] is True
    # one fio for both: one job file, one raw output holding both jobs, started together
    assert sorted(p.name for p in (result.path / "raw").glob("*.json")) == ["seqread-1.json"]
    raw = fiotext.documents((result.path / "raw" / "seqread-1.json").read_text())[-1]  # after fio's notes
    assert sorted(j["jobname"] for j in raw["jobs"]) == ["seqread@consumer-ssd", "seqread@hdd"]
    starts = [j["job_start"] for j in raw["jobs"] if "job_start" in j]
    if len(starts) == 2:
        assert abs(starts[0] - starts[1]) < 1000, starts  # milliseconds apart, not one runtime
    job = (result.path / "jobs" / "seqread.fio").read_text()
    for target in manifest["targets"]:
        assert f"filename={target['path']}" in job
    assert job.count("iomem=mmaphuge") == 2  # each throttled device's own need, in its own section
    # the kernel's boundary held exactly the two devices
    devices = {os.path.realpath(d) for d in manifest["confinement"]["devices"]}
    assert devices == {os.path.realpath(t["path"]) for t in manifest["targets"]}

    rows = table[table["direction"] == "read"].set_index("target")
    assert set(rows.index) == {"hdd", "consumer-ssd", "hdd+consumer-ssd"}
    ceilings = {}
    for target in manifest["targets"]:
        ceilings[target["name"]] = _ceiling(target, emulated.get_profile(target["name"]))
        measured = rows.loc[target["name"], "bw_mbps"]
        assert measured == pytest.approx(ceilings[target["name"]], rel=TOLERANCE), (target["name"], measured)
        assert rows.loc[target["name"], "simultaneous"] == "target"
    assert ceilings["consumer-ssd"] > 1.5 * ceilings["hdd"]  # two known, different rates
    total = rows.loc["hdd+consumer-ssd"]
    assert total["simultaneous"] == "total" and "simultaneous_total" in total["flags"]
    # their I/O over the longer runtime: time-based jobs ran the same time, so it is their summed rates to 1%
    parts = rows.loc[["hdd", "consumer-ssd"]]
    assert total["bw_mbps"] == pytest.approx((parts["bw_mbps"] * parts["runtime_s"]).sum() / parts["runtime_s"].max())
    assert total["bw_mbps"] == pytest.approx(parts["bw_mbps"].sum(), rel=0.01)
    assert total["bw_mbps"] == pytest.approx(sum(ceilings.values()), rel=TOLERANCE)
    # measured at once: the pass took one runtime, not two
    assert rows.loc["hdd", "wall_s"] == rows.loc["consumer-ssd", "wall_s"] < 1.6 * RUNTIME + 1


def test_two_directories_share_one_confined_fio_and_reports_keep_the_total_apart(tmp_path):
    disks = [tmp_path / "disk1", tmp_path / "disk2"]
    for disk in disks:
        disk.mkdir()
    data = tmp_path / "data"
    result = runner.run(_recipe(tmp_path, WRITE_RECIPE, "write"), [str(d) for d in disks], simultaneous=True,
                        data_dir=data, progress=False)
    manifest, table = result.manifest, result.results
    assert manifest["status"] == "completed", manifest.get("reason")
    confinement = manifest["confinement"]
    assert confinement["confined"] is True
    run_dirs = {t["run_dir"] for t in manifest["targets"]}
    assert len(run_dirs) == 2 and run_dirs <= set(confinement["writable"])
    assert all(w in run_dirs or Path(w) == (result.path / "raw").absolute() for w in confinement["writable"])
    assert sorted(p.name for p in (result.path / "raw").glob("*.json")) == ["randwrite-1.json", "randwrite-2.json"]
    for rep in (1, 2):
        rows = table[table["rep"] == rep].set_index("target")
        assert set(rows.index) == {"disk1", "disk2", "disk1+disk2"}
        assert (rows.loc[["disk1", "disk2"], "io_bytes"] > 0).all()
        assert rows.loc["disk1+disk2", "iops"] == pytest.approx(rows.loc["disk1", "iops"] + rows.loc["disk2", "iops"])
    selection = notebooks.select(data, aggregates=False)
    assert sorted(common.measured_systems(selection.results)) == sorted(
        s for s in set(selection.results["system"]) if not s.endswith("disk1+disk2"))
    assert len(common.measured_systems(selection.results)) == 2


def test_the_dry_run_shows_one_job_file_per_test_with_every_target(tmp_path, capsys, caplog):
    disks = [tmp_path / "a", tmp_path / "b"]
    for disk in disks:
        disk.mkdir()
    code, out, err = cli_main(capsys, caplog, "run", "quick", "--target", disks[0], "--target", disks[1],
                              "--simultaneous", "--dry-run", "--data", tmp_path / "data")
    assert code == 0, err
    assert out.count("[SEQ1M-Q8T1-read@a]") == 1 and out.count("[SEQ1M-Q8T1-read@b]") == 1
    assert "total row: a+b" in out and not (tmp_path / "data").exists()


def test_one_target_is_refused_on_the_command_line_before_anything_exists(tmp_path, capsys, caplog):
    code, out, err = cli_main(capsys, caplog, "run", "quick", "--target", tmp_path, "--simultaneous",
                              "--data", tmp_path / "data")
    assert code != 0 and "run option --simultaneous" in err and not (tmp_path / "data").exists()
