"""iolab.isolation.resident on the real kernel: fio's own files survive a verified cache drop while
the keeper runs (in the lab VM every test's fio re-read ~80 MB of libraries over 9p after the drop),
and the keeper is gone afterwards, also when the block fails."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.core import procstat
from iolab.core.deadline import wait_until
from iolab.engine import fio
from iolab.isolation import cache
from iolab.isolation.resident import kept_resident

from kernel_fixtures import machine_clean, needs_fio, needs_root, resident_bytes  # noqa: F401

pytestmark = [needs_fio, pytest.mark.usefixtures("machine_clean")]


def keeper_argv() -> list[str]:
    return [fio.fio_binary(), "--parse-only", "-"]


def mapped_files(pid: int) -> set[Path]:
    """The regular files ``pid`` maps (its executable and shared libraries)."""
    files = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and os.path.isfile(parts[5]):
            files.add(Path(parts[5]))
    return files


def loaded(keeper, timeout: float = 60.0) -> set[Path]:
    """fio's mapped files once it waits on stdin (its libraries are all mapped by then)."""
    wait_until(lambda: procstat.state_of(keeper.pid) == "S" and Path(f"/proc/{keeper.pid}/exe").resolve()
               == Path(fio.fio_binary()).resolve(), timeout, what=f"fio keeper (pid {keeper.pid}) to wait on its stdin")
    return mapped_files(keeper.pid)


@needs_root
def test_fio_files_stay_cached_across_a_verified_drop():
    with kept_resident(keeper_argv(), mode="direct") as keeper:
        assert keeper is not None and keeper.poll() is None
        files = loaded(keeper)
        fio_path = Path(fio.fio_binary()).resolve()
        assert fio_path in {f.resolve() for f in files} and len(files) > 2   # the binary and its libraries
        record = cache.drop_caches()
        assert record["verified"], record
        cold = [f for f in files if resident_bytes(f) == 0]
        assert not cold, f"dropped despite the keeper: {cold}"
    assert keeper.returncode == 0      # ended by itself when its stdin closed, not killed


def test_no_keeper_where_it_would_change_the_evidence():
    for mode in ("cgroup", "hugepages", "none"):   # a memory cgroup's peak would lose fio's libraries
        with kept_resident(keeper_argv(), mode=mode) as keeper:
            assert keeper is None


def test_keeper_ends_when_the_block_fails():
    with pytest.raises(RuntimeError), kept_resident(keeper_argv(), mode="direct") as keeper:
        assert keeper.poll() is None
        raise RuntimeError("a test failed")
    assert keeper.returncode == 0 and not Path(f"/proc/{keeper.pid}").exists()


def test_a_missing_program_only_costs_speed(tmp_path):
    with kept_resident([str(tmp_path / "no-such-fio"), "--parse-only", "-"], mode="direct") as keeper:
        assert keeper is None
