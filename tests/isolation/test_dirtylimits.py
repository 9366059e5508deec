"""The machine's dirty-page limits scaled to a run's memory limit (as a ``mem=`` boot scales them),
given back afterwards, after a crash by the reaper; and ``v1_writeback`` on any buffered write
under cgroup v1, here on a plain loop device that iolab did not make.

The machine's ``vm.dirty_*`` are shared by everyone on it: each test reads them just before and
asserts they are back just after, and restores them itself if they are not.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from device_fixtures import make_loop, scratch, sh  # noqa: F401
from kernel_fixtures import machine_clean, needs_fio, needs_root  # noqa: F401
from iolab.core import ownership
from iolab.engine import reaper, recipes, runner
from iolab.isolation import dirtylimits
from iolab.isolation.sandbox import open_sandbox

VM = Path("/proc/sys/vm")
MIB = 1024**2


def machine_values() -> dict:
    return {name: int((VM / name).read_text()) for name in dirtylimits.FIELDS}


@contextlib.contextmanager
def kept_dirty_limits():
    """The machine's values before the test; written back if the test left others (then it fails)."""
    before = machine_values()
    try:
        yield before
    finally:
        after = machine_values()
        if after != before:
            dirtylimits._put_back(VM, before)
            pytest.fail(f"dirty limits left changed: {after} instead of {before}")


def test_a_mem_boot_scales_the_machines_ratios_and_keeps_smaller_byte_limits():
    ratios = {"dirty_bytes": 0, "dirty_ratio": 30, "dirty_background_bytes": 0, "dirty_background_ratio": 5}
    assert dirtylimits.scaled(512 * MIB, ratios) == {"dirty_bytes": 512 * MIB * 30 // 100,
                                                     "dirty_background_bytes": 512 * MIB * 5 // 100}
    # the machine sets bytes: a boot keeps them where they are smaller; the kernel's ratios otherwise
    small = {"dirty_bytes": 16 * MIB, "dirty_ratio": 0, "dirty_background_bytes": 2 * GIB, "dirty_background_ratio": 0}
    assert dirtylimits.scaled(512 * MIB, small) == {"dirty_bytes": 16 * MIB, "dirty_background_bytes": 8 * MIB}
    with pytest.raises(ValueError, match="previous.dirty_ratio"):
        dirtylimits.check_details({"previous": {**ratios, "dirty_ratio": 400}, "want": small})


GIB = 1024**3


@needs_root
def test_a_cgroup_sandbox_holds_scaled_limits_and_gives_them_back(machine_clean):
    with kept_dirty_limits() as before:
        with open_sandbox("cgroup", mem_limit="256M", buffered=True) as box:
            record = box.describe()["dirty_limits"]
            assert record["previous"] == before
            assert record["want"] == dirtylimits.scaled(256 * MIB, before)
            now = machine_values()
            assert now["dirty_bytes"] == record["in_force"]["dirty_bytes"] <= record["want"]["dirty_bytes"]
            assert now["dirty_background_bytes"] == record["in_force"]["dirty_background_bytes"]
            assert ownership.find("sysctl", f"vm.dirty.pid-{os.getpid()}") is not None
        assert machine_values() == before
        assert record["restored"] is True and "gave back" in record["note"]
        assert ownership.find("sysctl", f"vm.dirty.pid-{os.getpid()}") is None
    # O_DIRECT-only tests and other modes leave the machine's limits alone
    with open_sandbox("cgroup", mem_limit="256M", buffered=False) as box:
        assert box.describe()["dirty_limits"] is None


HOLDER = """
import sys
from iolab.isolation import dirtylimits
dirtylimits.hold(int(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


def holder(mem_limit: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(mem_limit)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@needs_root
def test_the_reaper_gives_back_the_limits_of_a_run_that_died(machine_clean):
    with kept_dirty_limits() as before:
        other = holder(1 * GIB)
        try:
            want_other = dirtylimits.scaled(1 * GIB, before)
            assert machine_values()["dirty_bytes"] == want_other["dirty_bytes"]
            # a second holder with a smaller limit: the smaller values are in force; it leaves, the other's stay
            mine = dirtylimits.hold(256 * MIB)
            assert mine["previous"] == before and mine["held_with"] == [other.pid]
            assert machine_values()["dirty_bytes"] == min(want_other["dirty_bytes"], mine["want"]["dirty_bytes"])
            dirtylimits.release(mine)
            assert mine["restored"] is False and str(other.pid) in mine["note"]
            assert machine_values()["dirty_bytes"] == want_other["dirty_bytes"]
        finally:
            other.send_signal(signal.SIGKILL)
            other.wait()
        lines = reaper.reap()
        assert f"PID {other.pid}: gave back the machine's dirty limits {before}" in lines, lines
        assert machine_values() == before
        assert ownership.find("sysctl", f"vm.dirty.pid-{other.pid}") is None


BUFFERED_WRITE = """
name: buffered-write
description: a buffered sequential write of 8 MiB in a memory-limited cgroup
isolation: cgroup
defaults: {size: 8M, mem_limit: 64M}
fio: {ioengine: psync, direct: 0, bs: 1M, end_fsync: 1}
tests:
  - name: SEQ
    rw: [write, read]
"""


@needs_root
@needs_fio
def test_buffered_writes_on_a_plain_loop_device_under_v1_carry_v1_writeback(tmp_path, make_loop, machine_clean):
    device = make_loop("96M")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    sh("mkfs.ext4", "-q", device)
    sh("mount", device, mountpoint)
    path = tmp_path / "buffered-write.yaml"
    path.write_text(BUFFERED_WRITE)
    try:
        with kept_dirty_limits() as before:
            result = runner.run(recipes.load(str(path)), [str(mountpoint)], data_dir=tmp_path / "data",
                                progress=False, repeat=1)
    finally:
        sh("umount", mountpoint, check=False)
        deadline = time.monotonic() + 15  # udev may still hold the device a moment after the unmount
        while sh("losetup", "--detach", device, check=False).returncode and time.monotonic() < deadline:
            time.sleep(0.2)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    table = result.results
    write, read = table[table.direction == "write"].iloc[0], table[table.direction == "read"].iloc[0]
    flags_w, flags_r = str(write["flags"] or ""), str(read["flags"] or "")
    assert ("v1_writeback" in flags_w) == runner._io_cgroup_v1()
    assert "v1_writeback" not in flags_r and "emulated_latency" not in flags_w
    record = result.manifest["isolation"]["dirty_limits"]
    assert record["mem_limit"] == 64 * MIB and record["previous"] == before
    assert record["want"] == dirtylimits.scaled(64 * MIB, before) and record["restored"] is True
