"""What serves a path (a file, directory or block device), for a run manifest: the device
with its hardware facts, the file system and its options, the md RAID layout, the loop
device's backing file (and what serves that, in turn).
"""
from __future__ import annotations

import json
import os
import stat

from iolab.core import commands
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
    """The mount containing ``path`` (the longest matching target; last one wins)."""
    real = os.path.realpath(path)
    best = None
    for mount in table:
        target = mount.target.rstrip("/") or "/"
        if real == target or real.startswith(target + "/") or target == "/":
            if best is None or len(target) >= len(best.target.rstrip("/") or "/"):
                best = mount
    return best


def _findmnt(path: str) -> dict | None:
    try:
        proc = commands.run(["findmnt", "--json", "--target", path,
                             "--output", "TARGET,SOURCE,FSTYPE,OPTIONS"], check=False)
    except IolabError:
        return None
    if proc.returncode != 0:
        return None
    try:
        found = json.loads(proc.stdout).get("filesystems") or []
    except ValueError:
        return None
    return found[0] if found else None


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
    if stat.S_ISBLK(os.stat(path).st_mode):
        info["filesystem"] = ({"target": mount.target, "source": mount.source,
                               "fstype": mount.fstype, "options": mount.options} if mount else None)
    else:
        fm = _findmnt(path)
        if fm:
            info["filesystem"] = {"target": fm.get("target"), "source": fm.get("source"),
                                  "fstype": fm.get("fstype"), "options": fm.get("options")}
        elif mount:
            info["filesystem"] = {"target": mount.target, "source": mount.source,
                                  "fstype": mount.fstype, "options": mount.options}
        else:
            info["filesystem"] = None
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
