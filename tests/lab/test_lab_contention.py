"""Contention under cgroup v2 (the lab VM): a real second writer on the run's device is counted as foreign.

The host's test (tests/isolation/test_contention.py) proves it under cgroup v1, where the run's own
bytes come from blkio.throttle.io_service_bytes; here they come from the run's io.stat, and the same
dd beside the same throttled reads must be counted, the run's own reads not.
"""
from pathlib import Path

import pytest

from contention_helpers import MIB, flags, with_second_writer

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]


def test_a_second_writer_is_counted_from_io_stat_on_v2(tmp_path):
    assert "io" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()  # the unified hierarchy
    written = 32 * MIB
    row, done = with_second_writer(tmp_path, written)
    print(f"\nv2 contention: foreign write {row['dev_foreign_write_bytes']} B, read {row['dev_foreign_read_bytes']} B, "
          f"own {row['io_bytes']} B, dd {done}")
    assert done.get("returncode") == 0 and done["fio_after"], done  # dd ended while fio still ran
    assert written <= row["dev_foreign_write_bytes"] <= written + 1 * MIB, row["dev_foreign_write_bytes"]
    # fio's own 400 MB of reads, counted by io.stat, are not foreign; what is: udev's probe of the device (blkid,
    # about 1 MiB) once dd closes it after writing, a real second reader
    assert row["dev_foreign_read_bytes"] < 4 * MIB < row["io_bytes"], row["dev_foreign_read_bytes"]
    assert "contended" in flags(row)
