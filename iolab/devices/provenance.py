"""What serves a path (a file, directory or block device), for a run manifest: the device
with its hardware facts, the file system and its options, the md RAID layout, the loop
device's backing file (and what serves that, in turn).
"""
from __future__ import annotations

import os
import stat
from operator import attrgetter

from iolab.core import mountinfo
from iolab.core.errors import IolabError
from iolab.devices import loopdev
from iolab.devices.blockdev import (
    SYS_BLOCK, Mount, firmware, model, name_of_devno, queue, sysfs_text, sysfs_int, rotational, serial,
    mounts, mounts_of, parent_disk, partition_number, scheduler, size_bytes, slaves)


def _serving_device(path: str) -> tuple[str | None, list[Mount]]:
    """Kernel name of the block device serving ``path`` and the mount(s) involved."""
    st = os.stat(path)
    table = mounts()
    if stat.S_ISBLK(st.st_mode):
        name = name_of_devno(st.st_rdev)
        return name, (mounts_of(name, table) if name else [])
    name = name_of_devno(st.st_dev)
    mount = _mount_for(path, table)
    if name is None and mount is not None and mount.devno is not None:
        name = name_of_devno(mount.devno)
    return name, ([mount] if mount else [])


def _mount_for(path: str, table: list[Mount]) -> Mount | None:
    """The mount containing ``path`` (:func:`iolab.core.mountinfo.holder`)."""
    return mountinfo.holder(path, table, mountpoint=attrgetter("target"))


def _hardware(name: str) -> dict:
    disk = parent_disk(name)
    return {
        "model": model(name), "serial": serial(name), "firmware": firmware(name),
        "rotational": rotational(name), "scheduler": scheduler(name),
        "queue": queue(name), "disk": disk, "disk_size_bytes": size_bytes(disk),
    }


def _raid(name: str) -> dict | None:
    disk = parent_disk(name)
    md = SYS_BLOCK / disk / "md"
    if not md.is_dir():
        return None
    members = []
    for slave in slaves(disk):
        members.append({"device": f"/dev/{slave}", **_hardware(slave)})
    chunk = sysfs_int(md / "chunk_size")
    return {"device": f"/dev/{disk}", "level": sysfs_text(md / "level"), "chunk_bytes": chunk,
            "raid_disks": sysfs_int(md / "raid_disks"), "metadata": sysfs_text(md / "metadata_version"),
            "members": members}


def device_provenance(path: str | os.PathLike, *, _depth: int = 0) -> dict:
    """What serves ``path`` (a file, directory or block device), for a run manifest.

    Returns the serving block device with model, serial (where readable),
    firmware, rotational flag, scheduler and queue settings, the file system
    and its mount options, the md RAID layout (level, chunk, members) when on
    md, and the backing file with its direct-I/O flag (and the backing file's
    own provenance) when on a loop device. Values the system does not expose
    are ``None``.
    """
    path = str(path)
    if not os.path.exists(path):
        raise IolabError("no such file, directory or device", context=path)
    name, found_mounts = _serving_device(path)
    info: dict = {"path": os.path.realpath(path), "device": f"/dev/{name}" if name else None,
                  "kname": name}
    mount = found_mounts[0] if found_mounts else None
    info["filesystem"] = ({"target": mount.target, "source": mount.source,
                           "fstype": mount.fstype, "options": mount.options} if mount else None)
    if name is None:
        info["note"] = "not served by a block device (e.g. tmpfs, overlay or a network file system)"
        return info
    info["size_bytes"] = size_bytes(name)
    info["partition"] = partition_number(name)
    info.update(_hardware(name))
    info["raid"] = _raid(name)
    disk = parent_disk(name)
    if (SYS_BLOCK / disk / "loop").exists():
        backing = loopdev.backing_file(f"/dev/{disk}")
        loop = {"backing_file": backing, "direct_io": loopdev.dio_enabled(f"/dev/{disk}")}
        if backing and _depth < 3 and os.path.exists(backing):
            try:
                loop["backing"] = device_provenance(backing, _depth=_depth + 1)
            except (IolabError, OSError) as exc:
                loop["backing"] = {"error": str(exc)}
        info["loop"] = loop
    else:
        info["loop"] = None
    if disk.startswith("dm-") or (slaves(disk) and info["raid"] is None):
        info["slaves"] = [f"/dev/{s}" for s in slaves(disk)]
    return info
