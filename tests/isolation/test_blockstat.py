"""iolab.isolation.blockstat: which device serves a path, and what it really read and wrote (loop devices)."""
from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from iolab.isolation import blockstat
from iolab.devices import loopdev
from iolab.core.errors import IolabError

from kernel_fixtures import machine_clean, module_clean, needs_root  # noqa: F401

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")

MiB = 1024**2


def test_device_for_a_file_and_a_missing_file(tmp_path):
    f = tmp_path / "x"
    f.write_text("x")
    dev = blockstat.device_for(f)
    st = os.stat(f)
    if os.major(st.st_dev) != 0:
        assert dev.devnum == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    # a test file fio has not laid out yet: looked up through its directory
    assert blockstat.device_for(tmp_path / "not-yet" / "file.dat") == dev
    assert dev.path.startswith("/dev/") and (dev.sysfs / "stat").exists()
    snap = blockstat.snapshot(f)
    assert snap.device == dev.name and snap.read_bytes == snap.read_sectors * 512


def _a_tmpfs_mount() -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["tmpfs"] and os.access(fields[4], os.R_OK) and os.path.isdir(fields[4]):
            return fields[4]
    return None


def test_tmpfs_is_not_a_block_device():
    mount = _a_tmpfs_mount()
    if mount is None:
        pytest.skip("no tmpfs mounted on this machine")
    with pytest.raises(IolabError, match="not served by a single block device"):
        blockstat.device_for(mount)


def test_partition_in_a_fake_sysfs(tmp_path, monkeypatch):
    """sda1 (8:1) is a partition of sda: the parent disk is found from the sysfs path."""
    disk = tmp_path / "devices" / "pci0000:00" / "block" / "sda"
    part = disk / "sda1"
    part.mkdir(parents=True)
    (part / "partition").write_text("1\n")
    (part / "stat").write_text("10 0 80 0 4 0 16 0 0 0 0 0 0 0 0 0 0\n")
    (disk / "stat").write_text("10 0 80 0 4 0 16 0 0 0 0 0 0 0 0 0 0\n")
    links = tmp_path / "dev" / "block"
    links.mkdir(parents=True)
    (links / "8:1").symlink_to(part)
    (links / "8:0").symlink_to(disk)
    monkeypatch.setattr(blockstat, "SYS_DEV_BLOCK", links)
    dev = blockstat.device_by_number(8, 1)
    assert (dev.name, dev.partition, dev.disk, dev.devnum) == ("sda1", True, "sda", "8:1")
    whole = blockstat.device_by_number(8, 0)
    assert (whole.name, whole.partition, whole.disk) == ("sda", False, "sda")
    snap = blockstat.snapshot(dev)
    assert (snap.read_bytes, snap.write_bytes, snap.read_ios, snap.write_ios) == (80 * 512, 16 * 512, 10, 4)
    with pytest.raises(IolabError, match="no block device 9:9"):
        blockstat.device_by_number(9, 9)


def test_delta_refuses_two_devices():
    a = blockstat.Snapshot("loop0", 0, 0, 0, 0, 0.0)
    b = blockstat.Snapshot("loop1", 1, 8, 0, 0, 1.0)
    with pytest.raises(IolabError, match="different devices"):
        blockstat.delta(a, b)
    c = blockstat.Snapshot("loop0", 3, 16, 2, 8, 2.5)
    assert blockstat.delta(a, c) == {"device": "loop0", "read_bytes": 8192, "write_bytes": 4096,
                                     "read_ios": 3, "write_ios": 2, "flushes": None, "seconds": 2.5}
    e = blockstat.Snapshot("loop0", 3, 16, 2, 8, 3.0, flushes=7)
    assert blockstat.delta(blockstat.Snapshot("loop0", 0, 0, 0, 0, 0.0, flushes=4), e)["flushes"] == 3


def _direct_io(path: str, *, write: bool, nbytes: int, offset: int = 0) -> None:
    flags = (os.O_WRONLY if write else os.O_RDONLY) | os.O_DIRECT
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, nbytes)  # page-aligned, as O_DIRECT wants
    try:
        if write:
            buf.write(b"\x5a" * nbytes)
            assert os.pwritev(fd, [buf], offset) == nbytes
        else:
            assert os.preadv(fd, [buf], offset) == nbytes
    finally:
        os.close(fd)
        buf.close()


@contextlib.contextmanager
def udev_kept_out(disk: str):
    """Count only the test's own I/O on ``disk`` where udev runs (the lab VM, any systemd machine).

    udev probes a block device (blkid) after it appears and again after every close of a
    write: measured on the lab's 6.1 kernel, 688 KiB read in the second after a loop device
    was attached, then 336 KiB after the test's write closed -- so a 4 MiB O_DIRECT read
    counted 4,538,368 bytes. The BSD lock udev honours (systemd.io/BLOCK_DEVICE_LOCKING,
    taken on the whole disk) keeps it out: taking it waits for a probe in progress, and
    udev postpones its events while it is held. On release, wait for those probes, so that
    no blkid still holds the device when the test detaches it."""
    fd = os.open(disk, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
        if Path("/run/udev/control").exists() and shutil.which("udevadm"):
            subprocess.run(["udevadm", "settle", "--timeout=30"], check=False)


@contextlib.contextmanager
def partitioned_loop(tmp_path, *, wait_s: float):
    """A loop device (direct I/O) over a 16 MiB image with one MBR partition: (device, its partition's
    path, or None when the kernel made none within ``wait_s``); detached afterwards."""
    img = tmp_path / "parted.img"
    with open(img, "wb") as fh:
        fh.truncate(16 * MiB)
    subprocess.run(["sfdisk", "--quiet", str(img)], input="label: dos\nstart=2048, size=16384\n", text=True,
                   check=True, capture_output=True)
    device = subprocess.run(["losetup", "--find", "--show", "--partscan", "--direct-io=on", str(img)],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        part = Path(f"{device}p1")
        deadline = time.monotonic() + wait_s
        while not part.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield device, part if part.exists() else None
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


def write_and_fsync(path: str, times: int) -> None:
    """``times`` x (a 4 KiB write, then fsync): each fsync of a block device is one cache flush."""
    fd = os.open(path, os.O_WRONLY)
    try:
        for _ in range(times):
            os.write(fd, b"\x5a" * 4096)
            os.fsync(fd)
    finally:
        os.close(fd)


@needs_root
def test_loop_device_counts_the_bytes(tmp_path):
    img = tmp_path / "disk.img"
    with open(img, "wb") as fh:
        fh.truncate(32 * MiB)
    device = loopdev.attach(img, direct_io=True)
    try:
        dev = blockstat.device_for(device)
        assert dev.is_loop and dev.loop_dio is True
        assert dev.backing_file == str(img)
        assert not dev.partition and dev.disk == dev.name
        info = dev.describe()
        assert info["loop"] and info["loop_dio"] and info["backing_file"] == str(img)
        counter = blockstat.BlockCounter.for_path(device)
        with udev_kept_out(device):
            before = counter.snapshot()
            _direct_io(device, write=False, nbytes=4 * MiB)
            _direct_io(device, write=True, nbytes=2 * MiB, offset=8 * MiB)
            time.sleep(0.05)
            d = counter.delta(before)
        print(f"\n{device}: {d}")
        assert d["device"] == dev.name
        assert d["read_bytes"] == 4 * MiB
        assert d["write_bytes"] == 2 * MiB
        assert d["read_ios"] >= 1 and d["write_ios"] >= 1
        assert d["flushes"] in (0, None)  # O_DIRECT without fsync: no cache flush
    finally:
        loopdev.detach(device)


@needs_root
def test_each_fsync_of_a_loop_device_is_one_flush(tmp_path):
    """fsync of a block device sends its disk one cache flush (the loop device has a write cache):
    n fsyncs, n flushes in ``stat`` field 15, which the kernel counts from 5.5 on."""
    img = tmp_path / "flush.img"
    with open(img, "wb") as fh:
        fh.truncate(16 * MiB)
    device = loopdev.attach(img, direct_io=True)
    try:
        dev = blockstat.device_for(device)
        assert dev.flush_disks() == [dev.disk_sysfs]  # nothing under a loop device
        counter = blockstat.BlockCounter(dev)
        with udev_kept_out(device):
            before = counter.snapshot()
            if before.flushes is None:
                pytest.skip("this kernel's block stat has no flush fields (Linux < 5.5)")
            write_and_fsync(device, 3)
            d = counter.delta(before)
        print(f"\n{device}: {d}")
        assert d["flushes"] == 3 and d["write_bytes"] >= 3 * 4096
    finally:
        loopdev.detach(device)


@pytest.mark.stock_kernel  # device-mapper and a loop device's partitions: the lab VM's kernel
@needs_root
@pytest.mark.skipif(shutil.which("sfdisk") is None or shutil.which("dmsetup") is None,
                    reason="sfdisk or dmsetup is not installed")
def test_flushes_of_a_dm_device_are_counted_on_the_disk_under_it(tmp_path):
    """A device-mapper device counts no cache flush: the disk under it does, and a partition's flushes are
    its whole disk's. dm-linear over the first partition of a loop device: 3 fsyncs of the dm device,
    3 flushes in the snapshot of the dm device (read from the loop disk under it)."""
    name = f"iolab-test-flush-{os.getpid()}"
    with partitioned_loop(tmp_path, wait_s=5) as (loop, part):
        assert part is not None, f"no partition of {loop}"
        try:
            subprocess.run(["dmsetup", "create", name], input=f"0 16384 linear {part} 0\n", text=True, check=True,
                           capture_output=True)
            subprocess.run(["udevadm", "settle", "--timeout=30"], check=False)
            dm = blockstat.device_for(f"/dev/mapper/{name}")
            assert dm.slaves() == [part.name]
            assert dm.flush_disks() == [Path("/sys/block") / Path(loop).name]
            with udev_kept_out(loop):
                before = blockstat.snapshot(dm)
                write_and_fsync(f"/dev/mapper/{name}", 3)
                d = blockstat.delta(before, blockstat.snapshot(dm))
            print(f"\n{dm.name} over {part.name}: {d}")
            assert d["flushes"] == 3
        finally:
            subprocess.run(["dmsetup", "remove", "--retry", name], check=False, capture_output=True)



@pytest.mark.stock_kernel  # a kernel that scans a loop device's partitions: the lab VM's
@needs_root
@pytest.mark.skipif(shutil.which("sfdisk") is None, reason="sfdisk is not installed (util-linux)")
def test_partition_knows_its_disk_and_the_loop_behind_it(tmp_path):
    with partitioned_loop(tmp_path, wait_s=2) as (device, part):
        if part is None:
            pytest.skip(f"this kernel made no partition for a partitioned loop device ({device} with an MBR "
                        "table, losetup --partscan): no partition table support; the partition logic is "
                        "tested on a fake sysfs instead")
        dev = blockstat.device_for(part)
        assert dev.partition and dev.name == part.name and dev.disk == Path(device).name
        assert dev.is_loop and dev.loop_dio is True and dev.backing_file == str(tmp_path / "parted.img")
        with udev_kept_out(device):  # udev probes the new disk and its partition
            before = blockstat.snapshot(dev)
            _direct_io(str(part), write=False, nbytes=MiB)
            assert blockstat.delta(before, blockstat.snapshot(dev))["read_bytes"] == MiB
