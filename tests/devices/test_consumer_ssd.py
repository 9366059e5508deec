"""The emulated consumer SSD: its write ceiling falls after the declared bytes and comes back after idle.

Real fio on a real throttled loop device; the detector (iolab.analysis.cliff) reads fio's own
per-second bandwidth log. The rates are ceilings far below what the loop device does, so they
hold on a busy host; the cliff is placed by the device's own write counter.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from iolab.analysis.cliff import series_values
from iolab.core.errors import IolabError
from iolab.devices.cliffwatch import CliffSpec, parse_cliff
from iolab.devices.emulated import get_profile

from cli_helpers import iolab_cli
from kernel_fixtures import machine_clean, module_clean, needs_fio, needs_root  # noqa: F401

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")


@pytest.fixture
def ram_scratch():
    """A scratch directory in RAM (tmpfs; loop devices get direct I/O there since Linux 6.6).

    The declared rates are ceilings, but a disk-backed scratch file on a host whose disk is
    busy (other people's VMs) dips below them for seconds; in RAM only the throttle sets them.
    """
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm (tmpfs) for a RAM-backed scratch file")
    with tempfile.TemporaryDirectory(prefix="iolab-test-", dir="/dev/shm") as path:
        yield path

MiB = 1024**2


def test_the_profile_declares_its_cliff():
    p = get_profile("consumer-ssd")
    assert p.cliff == CliffSpec(after_bytes=160 * MiB, write_bps=10_000_000, recover_idle_s=3.0)
    assert p.write_bps == 50_000_000


@pytest.mark.parametrize("spec, message", [
    ("fast", "must be a mapping"),
    ({"after": "1G", "write_bps": 5}, "missing field"),
    ({"after": "1G", "write_bps": 5, "recover_idle_s": 1, "x": 1}, "unknown field"),
    ({"after": "1G", "write_bps": -5, "recover_idle_s": 1}, "write_bps"),
    ({"after": "1G", "write_bps": 5, "recover_idle_s": 0}, "recover_idle_s"),
])
def test_a_bad_cliff_names_its_field(spec, message):
    with pytest.raises(IolabError, match=message):
        parse_cliff(spec, "emulated.yaml: x.cliff")


@needs_root
@needs_fio
def test_the_sustained_write_recipe_reports_the_cliff(ram_scratch, tmp_path):
    """`iolab run sustained-write` on the emulated drive (the ground truth): the detector finds the cliff
    within 5% of the declared bytes and both rates within 10%, and the burst back after idle; fio's
    per-second log is in raw/, the cliff's record (declared, when applied) in the manifest's emulated entry."""
    p = get_profile("consumer-ssd")
    data = tmp_path / "data"
    proc = iolab_cli("run", "sustained-write", "--target", "emulated:consumer-ssd", "--size", "224M",
                     "--pause", "4", "--data", data, "--no-progress", env={**os.environ, "TMPDIR": ram_scratch})
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert (run_dir / "raw" / "sustained_bw.1.log").stat().st_size > 0
    rows = pd.read_csv(run_dir / "results.csv").set_index("test")
    row = rows.loc["sustained"]
    print(f"\nsustained-write: burst {row.burst_mbps} MB/s, cliff after {row.cliff_bytes / MiB:.1f} MiB, "
          f"then {row.after_mbps} MB/s, after idle {row.recovery_mbps} MB/s")
    assert bool(row.cliff_found) and bool(row.recovered)
    assert row.cliff_bytes == pytest.approx(p.cliff.after_bytes, rel=0.05)
    assert row.burst_mbps * 1e6 == pytest.approx(p.write_bps, rel=0.10)
    assert row.after_mbps * 1e6 == pytest.approx(p.cliff.write_bps, rel=0.10)
    assert row.recovery_mbps == pytest.approx(rows.loc["recovery", "bw_mbps"], abs=0.001)
    assert 4.0 <= row.idle_s < 30  # the pause, plus the set-up before the recovery write
    assert len(series_values(row.series_mbps)) == len(series_values(row.series_s)) >= 8  # the chart's data
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cliff = manifest["targets"][0]["emulated"]["cliff"]
    assert cliff["declared"]["after_bytes"] == p.cliff.after_bytes
    assert [e["event"] for e in cliff["events"]][:2] == ["cliff", "recovered"]
    # applied by the device's own counter within a poll of the declared amount, in the run's block cgroup
    assert cliff["events"][0]["written_bytes"] == pytest.approx(p.cliff.after_bytes, rel=0.02)
    assert cliff["events"][0]["groups"]
    # --size declared: the amount written; the write after idle 0.8 of the cache (3 s at 50 MB/s would not fit)
    sized = manifest["sustained"]
    assert sized["amount"]["consumer-ssd"]["why"] == "declared" and rows.loc["sustained", "io_bytes"] == 224 * MiB
    recovery = sized["recovery"]["consumer-ssd"]
    assert recovery["why"] == "cache" and recovery["bytes"] == rows.loc["recovery", "io_bytes"]
    assert recovery["bytes"] == pytest.approx(0.8 * row.cliff_bytes, abs=128 * 1024)


@needs_root
@needs_fio
def test_the_write_after_idle_is_long_enough_to_hold_the_ceiling(ram_scratch, tmp_path):
    """emulated:sata-ssd, 500 MB/s: a fixed 64 MiB after idle measured 594 MB/s (0.13 s, a first slice the
    throttle lets through). Sized from the burst rate (3 s of it, here the whole 1 GiB written), the write
    after idle lasts seconds and its rate is the ceiling's, within 10% and never more above it."""
    ceiling = get_profile("sata-ssd").write_bps / 1e6
    proc = iolab_cli("run", "sustained-write", "--target", "emulated:sata-ssd", "--size", "1G", "--pause", "1",
                     "--data", tmp_path / "data", "--no-progress", env={**os.environ, "TMPDIR": ram_scratch})
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    rows = pd.read_csv(run_dir / "results.csv").set_index("test")
    after_idle = rows.loc["recovery", "bw_mbps"]
    print(f"\nsata-ssd: sustained {rows.loc['sustained', 'bw_mbps']} MB/s, after idle {after_idle} MB/s "
          f"over {rows.loc['recovery', 'io_bytes'] / MiB:.0f} MiB")
    assert 0.9 * ceiling <= after_idle <= 1.1 * ceiling
    recovery = json.loads((run_dir / "manifest.json").read_text())["sustained"]["recovery"]["sata-ssd"]
    assert rows.loc["recovery", "io_bytes"] == recovery["bytes"] >= 512 * MiB  # a second or more at the ceiling
    assert recovery["burst_mbps"] == pytest.approx(ceiling, rel=0.10)


@needs_root
@needs_fio
def test_without_size_the_sustained_write_moves_a_file_targets_size(tmp_path):
    """No --size: the amount is the target's capacity, for a file target its size (32 MiB here, not the
    recipe's 1G test file); the file is written whole and not grown, and the manifest says why."""
    drive = tmp_path / "drive.img"
    drive.write_bytes(b"\1" * (32 * MiB))
    proc = iolab_cli("run", "sustained-write", "--target", drive, "--confirm", drive, "--pause", "1",
                     "--data", tmp_path / "data", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    rows = pd.read_csv(run_dir / "results.csv").set_index("test")
    sized = json.loads((run_dir / "manifest.json").read_text())["sustained"]
    assert sized["amount"]["drive.img"] == {"bytes": 32 * MiB, "why": "capacity", "capacity": 32 * MiB,
                                            "capacity_source": "file"}
    assert rows.loc["sustained", "io_bytes"] == 32 * MiB
    assert 0 < rows.loc["recovery", "io_bytes"] == sized["recovery"]["drive.img"]["bytes"] <= 32 * MiB
    assert drive.stat().st_size == 32 * MiB


@needs_root
def test_a_repeated_sustained_write_is_refused(ram_scratch, tmp_path):
    proc = iolab_cli("run", "sustained-write", "--target", "emulated:consumer-ssd", "--size", "16M",
                     "--repeat", "2", "--data", tmp_path / "data", env={**os.environ, "TMPDIR": ram_scratch})
    assert proc.returncode != 0 and "a sustained write runs once" in proc.stderr
