"""The steady-state recipe's purge on real loop devices: one over a file on ext4 (the loop driver takes
discards by punching holes in its file) is purged with blkdiscard, whole, when --confirm names it; one
over a file on ramfs (no fallocate: the kernel gives the loop device no discard, queue/discard_max_bytes
0) is not purged, and the record says why. A drive's secure erase is never attempted (not testable here).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.analysis.steadystate import decode
from iolab.classic.purge import discard_limit, purge, purge_plan
from iolab.devices import loopdev
from iolab.engine.targets import Target

from kernel_fixtures import machine_clean, module_clean, needs_fio, needs_root, write_file  # noqa: F401
from steady_fixtures import steady_run

MiB = 1024**2
needs_blkdiscard = pytest.mark.skipif(shutil.which("blkdiscard") is None, reason="blkdiscard (util-linux) missing")
pytestmark = [needs_root, needs_blkdiscard, pytest.mark.usefixtures("module_clean", "machine_clean")]


@contextlib.contextmanager
def loop_over(backing: Path, size: int):
    """A loop device over ``backing`` filled with ``size`` bytes of non-zero data (buffered: ramfs has no
    O_DIRECT); detached afterwards."""
    write_file(backing, size)
    device = loopdev.attach(backing, direct_io=False)
    try:
        yield device
    finally:
        loopdev.detach(device)


@contextlib.contextmanager
def ramfs(tmp_path: Path):
    """A ramfs mounted under the test's directory (named so that machine_clean would find it left)."""
    point = tmp_path / "iolab-mnt-ramfs"
    point.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def _block(device: str, confirm=True) -> Target:
    return Target(spec=device, kind="block", name=Path(device).name, path=device,
                  confirm=[device] if confirm else None)


def _zeros(device: str, start: int, length: int) -> bool:
    fd = os.open(device, os.O_RDONLY)
    try:
        return os.pread(fd, length, start) == bytes(length)
    finally:
        os.close(fd)


def test_a_loop_device_that_takes_discards_is_purged_whole_with_blkdiscard(tmp_path):
    with loop_over(tmp_path / "disk.img", 16 * MiB) as device:
        name = Path(device).name
        assert discard_limit(device) > 0 and not _zeros(device, 0, 16 * MiB)
        assert purge_plan(_block(device, confirm=False))[0] is None  # not without --confirm naming it
        assert not _zeros(device, 0, 16 * MiB)
        record = purge(_block(device))
        assert record["purged"] is True and record["code"] == f"blkdiscard device={name}"
        assert record["command"][0] == "blkdiscard" and record["command"][-1] == device  # the whole device
        assert _zeros(device, 0, 16 * MiB)  # every block, read back through the device
        assert os.stat(tmp_path / "disk.img").st_blocks == 0  # the loop driver punched its file empty


def test_a_loop_device_without_discard_is_not_purged_and_says_why(tmp_path):
    with ramfs(tmp_path) as point, loop_over(point / "disk.img", 8 * MiB) as device:
        name = Path(device).name
        assert discard_limit(device) == 0
        refused = subprocess.run(["blkdiscard", "--force", device], capture_output=True, text=True)
        assert refused.returncode != 0  # the kernel itself refuses: the limit is not our guess
        record = purge(_block(device))
        assert record == {"target": name, "purged": False, "code": f"no_discard device={name}",
                          "what": f"not purged: {name} does not support discard (queue/discard_max_bytes is 0)"}
        assert not _zeros(device, 0, 8 * MiB)  # the data is still there


@needs_fio
def test_a_steady_state_run_purges_the_confirmed_device_first(tmp_path):
    """`iolab run steady-state` on a confirmed loop device: the whole device is discarded before
    preconditioning (a declared 16 MiB, written from the start: the PTS's twice the capacity would write the
    whole device over), so the rest of it reads as zeros after the run; the round rows say it was purged."""
    with loop_over(tmp_path / "disk.img", 48 * MiB) as device:
        run_dir, rows, found = steady_run(tmp_path, device, "16M", "--confirm", device, "--max-rounds", "5",
                                          "--precondition-size", "16M")
        name = Path(device).name
        assert found["purge"][0]["purged"] is True
        assert set(rows.loc[rows["test"].eq("round"), "steady_purge"]) == {f"blkdiscard device={name}"}
        assert decode(f"blkdiscard device={name}")[0].figures == {"device": name}
        assert _zeros(device, 16 * MiB, 32 * MiB) and not _zeros(device, 0, 16 * MiB)
