"""Contention measured, not guessed: a run on an emulated (throttled) device beside a real CPU hog
(one busy loop pinned to each core) and beside a real second writer (dd to the same loop device)
is flagged ``contended`` with the figures that say why; a quiet run is not.

What the tests assert is what they control: the foreign bytes against what dd wrote, the CPU
starvation against hogs that take both cores. The quiet run waits for its throttled device, so
the other users of a busy shared machine do not starve it. The lab VM counts the second writer
under cgroup v2 too (tests/lab/test_lab_contention.py).
"""
from __future__ import annotations

import os
import subprocess
import sys

from contention_helpers import MIB, THROTTLED_READS, flags, run, with_second_writer
from kernel_fixtures import machine_clean, needs_fio, needs_root  # noqa: F401
from iolab.isolation import contention

pytestmark = [needs_root, needs_fio]

CACHED_READS = """
name: contention-cpu
description: 4 KiB reads from the page cache (CPU-bound) on a throttled device
isolation: none
defaults: {size: 16M, runtime: 3, repeat: 1}
fio: {ioengine: psync, direct: 0}
tests:
  - name: CACHED4K
    rw: [read]
    bs: 4k
"""


def test_a_quiet_run_on_a_throttled_device_is_not_contended(tmp_path, machine_clean):
    row = run(tmp_path, THROTTLED_READS, "quiet")
    assert "contended" not in flags(row), row[list(contention.COLUMNS)].to_dict()
    assert row["dev_foreign_bytes"] < 1 * MIB
    assert row["cpu_want_pct"] < contention.CPU_WANT_PCT and row["cpu_s"] > 0 and row["cpu_pct"] >= 0
    assert 0 <= row["host_busy_pct"] <= 100 and row["steal_pct"] >= 0 and row["load_1m"] >= 0


def test_a_second_writer_on_the_same_device_is_counted_and_flagged(tmp_path, machine_clean):
    written = 32 * MIB
    row, done = with_second_writer(tmp_path, written)
    assert done.get("returncode") == 0 and done["fio_after"], done  # dd ended while fio still ran
    # everything dd wrote went to the device during the test (1 MiB of slack for the device's own requests)
    assert written <= row["dev_foreign_write_bytes"] <= written + 1 * MIB, row["dev_foreign_write_bytes"]
    assert row["dev_foreign_read_bytes"] < 1 * MIB
    assert row["dev_foreign_bytes"] == row["dev_foreign_write_bytes"] + row["dev_foreign_read_bytes"]
    assert "contended" in flags(row)


def test_a_cpu_hog_on_every_core_starves_a_cpu_bound_test(tmp_path, machine_clean):
    hogs = [subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])
            for cpu in sorted(os.sched_getaffinity(0))]
    try:
        row = run(tmp_path, CACHED_READS, "hog")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    # one busy loop per core: fio's job shares its core with one, so it waits about as long as it runs
    assert row["cpu_want_pct"] >= contention.CPU_WANT_PCT, row[list(contention.COLUMNS)].to_dict()
    assert row["cpu_got_pct"] <= contention.STARVED_GOT_PCT
    assert row["host_busy_pct"] >= 90
    assert "contended" in flags(row)


def test_the_flag_decides_on_the_figures():
    quiet = {"cpu_want_pct": 20.0, "cpu_got_pct": 15.0, "steal_pct": 0.0, "dev_foreign_bytes": 0,
             "dev_own_bytes": 64 * MIB}
    assert not contention.contended(quiet)  # a test waiting for its device, on a busy host: not starved
    assert contention.contended({**quiet, "cpu_want_pct": 95.0, "cpu_got_pct": 50.0})
    assert not contention.contended({**quiet, "cpu_want_pct": 95.0, "cpu_got_pct": 98.0})  # cpu-bound, not starved
    assert contention.contended({**quiet, "steal_pct": contention.STEAL_PCT})
    # the file system's own few blocks beside a test are not a second writer; 4 MiB and 5% of its own bytes are
    assert not contention.contended({**quiet, "dev_foreign_bytes": 1 * MIB})
    assert contention.contended({**quiet, "dev_foreign_bytes": 4 * MIB})
    assert not contention.contended({**quiet, "dev_foreign_bytes": 4 * MIB, "dev_own_bytes": 1000 * MIB})
    assert not contention.contended({**quiet, "dev_foreign_bytes": None})
