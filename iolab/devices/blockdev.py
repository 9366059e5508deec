"""Facts about block devices, read from sysfs and the kernel's tables: names and numbers,
partitions, holders and slaves, sizes and queues, model and serial, mounts, swap and the loop
devices over a file.

Nothing here judges whether a device may be written: :mod:`iolab.devices.safety`
does, from these facts; :mod:`iolab.devices.listing` lists them for every device.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
import stat
from pathlib import Path

from iolab.core import mountinfo, recorded
from iolab.core.errors import IolabError
from iolab.devices import loopdev

log = logging.getLogger(__name__)

SYS_BLOCK = Path("/sys/class/block")
SYS_DEV_BLOCK = Path("/sys/dev/block")


def sysfs_text(path: Path) -> str | None:
    """A sysfs attribute's text, stripped; None when it cannot be read."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def sysfs_int(path: Path) -> int | None:
    """A sysfs attribute as a whole number; None when it cannot be read or is not one."""
    text = sysfs_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _devno(devno: int) -> str:
    return f"{os.major(devno)}:{os.minor(devno)}"


def name_of_devno(devno: int) -> str | None:
    """Kernel name (``sda1``, ``dm-0``, ``loop3p1``) of a block device number."""
    link = SYS_DEV_BLOCK / _devno(devno)
    try:
        return Path(os.path.realpath(link)).name if link.exists() else None
    except OSError:
        return None


def devno_of_name(name: str) -> int | None:
    """Device number of a kernel name (``sda1``), from sysfs; None when there is no such device."""
    text = sysfs_text(SYS_BLOCK / name / "dev")
    if not text or ":" not in text:
        return None
    major, minor = text.split(":", 1)
    return os.makedev(int(major), int(minor))


def resolve(device: str | os.PathLike) -> tuple[str, str, int]:
    """``(realpath, kernel name, device number)`` of a block device path.

    Symlinks (``/dev/disk/by-id/...``, ``/dev/mapper/...``) are followed; the
    kernel name comes from the device number, not from the path's spelling.
    """
    real = os.path.realpath(device)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise IolabError("no such device", context=str(device)) from None
    except OSError as exc:
        raise IolabError(f"cannot stat: {exc.strerror}", context=str(device)) from exc
    if not stat.S_ISBLK(st.st_mode):
        raise IolabError("not a block device", context=str(device))
    name = name_of_devno(st.st_rdev) or Path(real).name
    return real, name, st.st_rdev


def is_partition(name: str) -> bool:
    return (SYS_BLOCK / name / "partition").exists()


def parent_disk(name: str) -> str:
    """Whole-disk name of a partition (``sda1`` -> ``sda``); a disk is its own parent."""
    if is_partition(name):
        return Path(os.path.realpath(SYS_BLOCK / name)).parent.name
    return name


def partitions(name: str) -> list[str]:
    """Partition names of a whole disk, in partition-number order."""
    base = Path(os.path.realpath(SYS_BLOCK / name))
    found = []
    try:
        for child in base.iterdir():
            number = sysfs_int(child / "partition")
            if number is not None:
                found.append((number, child.name))
    except OSError:
        return []
    return [n for _, n in sorted(found)]


def partition_number(name: str) -> int | None:
    return sysfs_int(SYS_BLOCK / name / "partition")


def holders(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (SYS_BLOCK / name / "holders").iterdir())
    except OSError:
        return []


def slaves(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (SYS_BLOCK / name / "slaves").iterdir())
    except OSError:
        return []


def scheduler(name: str) -> str | None:
    text = sysfs_text(SYS_BLOCK / parent_disk(name) / "queue" / "scheduler")
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text


def size_bytes(name: str) -> int | None:
    sectors = sysfs_int(SYS_BLOCK / name / "size")  # always 512-byte units
    return sectors * 512 if sectors is not None else None


# ------------------------------------------------------------- mounts and swap

@dataclasses.dataclass
class Mount:
    devno: int | None       # device number of the mounted file system (None: anonymous)
    target: str
    fstype: str
    source: str
    options: str


def mounts() -> list[Mount]:
    """Every mount this process can see (core.mountinfo), with the device number of its file system."""
    found = []
    for mount in mountinfo.mounts():
        major, minor = (int(x) for x in mount.majmin.split(":"))
        devno = os.makedev(major, minor) if major != 0 else None
        source = mount.source or ""
        if devno is None and source.startswith("/"):
            # btrfs and friends report an anonymous device number: use the source
            try:
                st = os.stat(source)
                if stat.S_ISBLK(st.st_mode):
                    devno = st.st_rdev
            except OSError:
                pass
        found.append(Mount(devno=devno, target=mount.mountpoint, fstype=mount.fstype, source=source,
                           options=mount.all_options))
    return found


def mounts_of(name: str, table: list[Mount] | None = None) -> list[Mount]:
    devno = devno_of_name(name)
    return [m for m in (table if table is not None else mounts()) if devno is not None and m.devno == devno]


def mounted_devno(target: str) -> int | None:
    """Device number of the file system mounted (last) at ``target``, if any."""
    target = os.path.realpath(target)
    for mount in reversed(mounts()):
        if mount.target == target:
            return mount.devno
    return None


def swap_devnos() -> dict[int, str]:
    """Device numbers of active swap areas (block devices and the devices holding swap files)."""
    found = {}
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return found
    for line in lines:
        if not line.strip():
            continue
        filename = mountinfo.unescape(line.split()[0])
        try:
            st = os.stat(filename)
        except OSError:
            continue
        found[st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev] = filename
    return found


def swap_files() -> set[str]:
    """Realpaths of the active swap areas (``/proc/swaps``: files and devices)."""
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {os.path.realpath(mountinfo.unescape(line.split()[0])) for line in lines if line.strip()}


def loops_backed_by(path: str | os.PathLike) -> list[str]:
    """Loop devices (``/dev/loopN``) whose backing file is ``path`` (same file, by inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    found = []
    for entry in sorted(Path("/sys/block").glob("loop*")):
        backing = sysfs_text(entry / "loop" / "backing_file")
        if not backing:
            continue
        try:
            other = os.stat(backing.removesuffix(" (deleted)"))
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            found.append(f"/dev/{entry.name}")
    return found


# ------------------------------------------------------------------ hardware

def _hardware_dir(name: str) -> Path:
    return SYS_BLOCK / parent_disk(name)


def model(name: str) -> str | None:
    base = _hardware_dir(name) / "device"
    model = sysfs_text(base / "model")
    vendor = sysfs_text(base / "vendor")
    if model and vendor and vendor not in ("ATA",) and not model.startswith(vendor):
        return f"{vendor} {model}"
    if model:
        return model
    disk = parent_disk(name)
    said = functools.partial(recorded.write, recorded.DEVICE_DESCRIPTIONS)  # the kit's words, read back by key
    if disk.startswith("loop"):
        return said("loop")
    if disk.startswith("md"):
        level = (sysfs_text(SYS_BLOCK / disk / "md" / "level") or "").strip()
        return said("md_level", level=level) if level else "md"
    if disk.startswith("dm-"):
        dm_name = (sysfs_text(SYS_BLOCK / disk / "dm" / "name") or "").strip()
        return said("dm_named", name=dm_name) if dm_name else said("dm")
    if disk.startswith("zram"):
        return said("zram")
    if disk.startswith("vd"):
        return said("virtio")
    return vendor


def serial(name: str) -> str | None:
    """The drive's serial number as sysfs gives it: the device's own ``serial`` (NVMe, virtio, USB), else SCSI's
    VPD page 0x80, the unit serial number (libata answers it with an ATA drive's serial). Never ``wwid``: that is
    a T10 name built of vendor, model and serial (``t10.ATA     <model>   <serial>``), not the serial."""
    base = _hardware_dir(name)
    for path in (base / "serial", base / "device" / "serial"):
        text = sysfs_text(path)
        if text:
            return text
    try:  # SCSI/SATA: VPD page 0x80 (unit serial number): 4-byte header, then ASCII
        raw = (base / "device" / "vpd_pg80").read_bytes()
        text = raw[4:4 + raw[3]].decode("ascii", "replace").strip()
        return text or None
    except (OSError, IndexError):
        return None


def firmware(name: str) -> str | None:
    base = _hardware_dir(name) / "device"
    for leaf in ("firmware_rev", "rev", "fw_rev"):
        text = sysfs_text(base / leaf)
        if text:
            return text
    return None


def queue(name: str) -> dict:
    queue = _hardware_dir(name) / "queue"
    return {key: sysfs_int(queue / key) for key in (
        "nr_requests", "read_ahead_kb", "max_sectors_kb", "logical_block_size", "physical_block_size")}


def rotational(name: str) -> bool | None:
    value = sysfs_text(_hardware_dir(name) / "queue" / "rotational")
    return None if value is None else value == "1"


def listed_names() -> list[str]:
    """Disks and their partitions, skipping unattached loop devices."""
    names = []
    try:
        disks = sorted(p.name for p in Path("/sys/block").iterdir())
    except OSError:
        return names
    for disk in disks:
        if disk.startswith("loop") and loopdev.backing_file(f"/dev/{disk}") is None:
            continue
        names.append(disk)
        names.extend(partitions(disk))
    return names
