"""Which block device serves a path, and how many bytes it really moved.

The evidence behind every cache-isolation claim: fio says how many bytes it
read, ``/sys/dev/block/MAJ:MIN/stat`` says how many the device served. Sector
counts in that file are always 512-byte units, whatever the device's logical
block size.

``stat`` fields used (Documentation/block/stat.rst): 0 read I/Os, 2 read
sectors, 4 write I/Os, 6 write sectors (I/Os are completed requests, after
merging), 15 flush requests (Linux >= 5.5). A cache flush is counted on the
whole disk that serves it (not on a partition) and only by a request-based
device: a device-mapper or md device counts none, the disks under it do. So
:attr:`Snapshot.flushes` sums the flushes of the disks at the bottom of the
device's stack (:func:`flush_disks`): for an emulated hdd (dm-delay over a
loop device) the loop device's, which received each flush after its delay.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import stat as _stat
import time
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.core.mountinfo import mount_of

log = logging.getLogger(__name__)

SECTOR = 512
SYS_DEV_BLOCK = Path("/sys/dev/block")


@dataclasses.dataclass(frozen=True)
class BlockDevice:
    """A block device as the kernel names it.

    ``disk`` is the whole disk (``sda`` for ``sda1``; the device itself when it
    is not a partition).
    """

    name: str
    devnum: str
    partition: bool
    disk: str

    @property
    def path(self) -> str:
        return f"/dev/{self.name}"

    @property
    def sysfs(self) -> Path:
        return SYS_DEV_BLOCK / self.devnum

    @property
    def disk_sysfs(self) -> Path:
        return Path("/sys/block") / self.disk

    @property
    def is_loop(self) -> bool:
        return (self.disk_sysfs / "loop").is_dir()

    @property
    def loop_dio(self) -> bool | None:
        """For a loop device (or a partition of one): direct I/O on the backing file."""
        text = _read(self.disk_sysfs / "loop" / "dio")
        return None if text is None else text == "1"

    @property
    def backing_file(self) -> str | None:
        return _read(self.disk_sysfs / "loop" / "backing_file")

    @property
    def rotational(self) -> bool | None:
        text = _read(self.disk_sysfs / "queue" / "rotational")
        return None if text is None else text == "1"

    def queue(self, attribute: str) -> str | None:
        """A queue attribute of the disk (``max_sectors_kb``, ``scheduler``, ...)."""
        return _read(self.disk_sysfs / "queue" / attribute)

    def slaves(self) -> list[str]:
        """Devices this one is built on (device-mapper, md)."""
        try:
            return sorted(os.listdir(self.disk_sysfs / "slaves"))
        except OSError:
            return []

    def flush_disks(self) -> list[Path]:
        """sysfs directories of the disks that receive this device's cache flushes (see the module's note)."""
        return flush_disks(self.disk_sysfs)

    def describe(self) -> dict:
        info = {"name": self.name, "path": self.path, "devnum": self.devnum,
                "partition": self.partition, "disk": self.disk, "rotational": self.rotational}
        if self.is_loop:
            info.update(loop=True, loop_dio=self.loop_dio, backing_file=self.backing_file)
        slaves = self.slaves()
        if slaves:
            info["slaves"] = slaves
        return info


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def flush_disks(disk: Path) -> list[Path]:
    """The disks at the bottom of ``disk``'s stack (``/sys/block/X`` directories): ``disk`` itself when
    nothing is under it; a partition under a device-mapper or md device stands for its whole disk."""
    try:
        below = sorted(os.listdir(disk / "slaves"))
    except OSError:
        below = []
    if not below:
        return [disk]
    found = []
    for name in below:
        real = Path(os.path.realpath(disk / "slaves" / name))
        whole = disk.parent / (real.parent.name if (real / "partition").exists() else real.name)  # /sys/block/X
        found.extend(d for d in flush_disks(whole) if d not in found)
    return found


def device_by_number(major: int, minor: int) -> BlockDevice:
    """The block device ``major:minor``."""
    devnum = f"{major}:{minor}"
    link = SYS_DEV_BLOCK / devnum
    try:
        real = Path(os.path.realpath(link))
    except OSError:
        real = None
    if real is None or not (real / "stat").exists():
        raise IolabError(f"no block device {devnum} in /sys/dev/block", context=devnum)
    partition = (real / "partition").exists()
    disk = real.parent.name if partition else real.name
    return BlockDevice(name=real.name, devnum=devnum, partition=partition, disk=disk)


def _mount_source(path: str) -> tuple[str, str, str] | None:
    """``(mount point, fs type, source)`` of the mount holding ``path``."""
    mount = mount_of(path)
    return None if mount is None else (mount.mountpoint, mount.fstype, mount.source)


def device_for(path: str | os.PathLike) -> BlockDevice:
    """The block device serving ``path`` (a file, a directory or a block device).

    A path that does not exist yet (a test file fio will lay out) is looked up
    through its nearest existing parent directory.
    """
    original = str(path)
    p = Path(path)
    while not p.exists():
        if p.parent == p:
            raise IolabError("no such file or directory", context=original)
        p = p.parent
    st = os.stat(p)
    if _stat.S_ISBLK(st.st_mode):
        return device_by_number(os.major(st.st_rdev), os.minor(st.st_rdev))
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    if major != 0:
        return device_by_number(major, minor)
    # anonymous device numbers: btrfs, overlayfs, tmpfs, network file systems
    found = _mount_source(str(p))
    if found and found[2].startswith("/dev/") and os.path.exists(found[2]):
        src = os.stat(found[2])
        if _stat.S_ISBLK(src.st_mode):
            log.info("%s is on %s (%s); counting I/O of %s", original, found[0], found[1], found[2])
            return device_by_number(os.major(src.st_rdev), os.minor(src.st_rdev))
    fstype = found[1] if found else "unknown"
    raise IolabError(f"not served by a single block device (file system {fstype})", context=original,
                     hint="device I/O counters need a file system on a block device")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Counters of one device at one moment (monotonic seconds)."""

    device: str
    read_ios: int
    read_sectors: int
    write_ios: int
    write_sectors: int
    at: float
    flushes: int | None = None  # cache flushes the disks under the device received (None: kernel < 5.5)

    @property
    def read_bytes(self) -> int:
        return self.read_sectors * SECTOR

    @property
    def write_bytes(self) -> int:
        return self.write_sectors * SECTOR


def snapshot(device: BlockDevice | str | os.PathLike) -> Snapshot:
    """Read the device's ``stat`` now; ``device`` may also be a path it serves."""
    dev = device if isinstance(device, BlockDevice) else device_for(device)
    text = _read(dev.sysfs / "stat")
    if text is None:
        raise IolabError("cannot read the device's I/O counters", context=str(dev.sysfs / "stat"))
    fields = [int(x) for x in text.split()]
    return Snapshot(device=dev.name, read_ios=fields[0], read_sectors=fields[2],
                    write_ios=fields[4], write_sectors=fields[6], at=time.monotonic(), flushes=_flushes(dev))


def _flushes(dev: BlockDevice) -> int | None:
    """Flush requests the disks under ``dev`` have completed (``stat`` field 15), None where one lacks it."""
    total = 0
    for disk in dev.flush_disks():
        text = _read(disk / "stat")
        fields = text.split() if text else []
        if len(fields) < 17:
            return None
        total += int(fields[15])
    return total


def delta(before: Snapshot, after: Snapshot) -> dict:
    """What the device did between two snapshots, in bytes and I/Os."""
    if before.device != after.device:
        raise IolabError(f"snapshots of different devices: {before.device} and {after.device}")
    return {"device": after.device,
            "read_bytes": (after.read_sectors - before.read_sectors) * SECTOR,
            "write_bytes": (after.write_sectors - before.write_sectors) * SECTOR,
            "read_ios": after.read_ios - before.read_ios,
            "write_ios": after.write_ios - before.write_ios,
            "flushes": None if None in (after.flushes, before.flushes) else after.flushes - before.flushes,
            "seconds": round(after.at - before.at, 6)}


class BlockCounter:
    """Snapshots of the device serving one path: ``before = c.snapshot(); ...; c.delta(before)``."""

    def __init__(self, device: BlockDevice):
        self.device = device

    @classmethod
    def for_path(cls, path: str | os.PathLike) -> "BlockCounter":
        return cls(device_for(path))

    def snapshot(self) -> Snapshot:
        return snapshot(self.device)

    def delta(self, before: Snapshot, after: Snapshot | None = None) -> dict:
        return delta(before, after or self.snapshot())

    def describe(self) -> dict:
        return self.device.describe()
