"""Sizes a setup plan may ask for: what mkfs accepts and what storage can hold.

Checked when a plan is loaded (so ``iolab setup --dry-run`` already refuses),
each refusal naming the plan field:

* a file system smaller than its ``mkfs`` accepts: xfs needs at least 300 MiB
  (xfsprogs >= 5.19: "Filesystem must be larger than 300MB"), a striped xfs
  (on md RAID0, or su=/sunit= options) more than 512 MiB (else "Log size must
  be at least 64MB", measured with xfsprogs 6.1), mke2fs refuses a few
  hundred KiB, so ext4 is asked for at least 1 MiB. The size of a file system's
  device is known for a loop device, a sized partition and an array of known
  members (RAID0: n x the smallest member, RAID1: the smallest member, less
  1 MiB of md metadata per member);
* a loop device's backing file larger than the file system that would hold it
  (the nearest existing directory above the file), and any size above
  :data:`MAX_SIZE`, a typo rather than a disk.
"""
from __future__ import annotations

import os
from pathlib import Path

from iolab.core.units import human_size
from iolab.devices.plan import dm

MiB = 1024**2
MAX_SIZE = 1024**5          # 1 PiB: no single disk or file of a benchmark plan is larger
FS_MIN_SIZE = {"xfs": 300 * MiB, "ext4": 1 * MiB}
# a striped xfs (on an md array, whose geometry mkfs.xfs reads, or with su=/sunit=) gets more
# allocation groups, and at 512 MiB or less its log no longer fits: "Log size must be at least 64MB"
XFS_STRIPED_MIN = 513 * MiB
MD_METADATA = 1 * MiB       # per member, rounded up (1.2 metadata + data offset is at least this)


def check_sizes(plan, fail) -> None:
    """Refuse sizes mkfs will reject or storage cannot hold; ``fail(field, message)`` raises."""
    for i, loop in enumerate(plan.loops):
        _check_max(loop.size, f"loop_devices[{i}].size", fail)
        capacity = _capacity_for(loop.file)
        if capacity is not None and loop.size > capacity:
            fail(f"loop_devices[{i}].size", f"{human_size(loop.size)} is more than the file system holding "
                 f"{loop.file} can hold ({human_size(capacity)} in all)")
    for i, table in enumerate(plan.tables):
        for j, part in enumerate(table.parts):
            if part.size is not None:
                _check_max(part.size, f"partitions[{i}].parts[{j}].size", fail)
    sizes = known_sizes(plan)
    dm.check_sizes(plan, sizes, fail)
    raids = {raid.name for raid in plan.raids if raid.level == 0}  # striped: xfs needs more room
    for i, fs in enumerate(plan.filesystems):
        minimum = FS_MIN_SIZE.get(fs.type)
        if fs.type == "xfs" and (fs.device in raids or any(o in " ".join(fs.options) for o in ("su=", "sunit="))):
            minimum = XFS_STRIPED_MIN
        size = sizes.get(fs.device)
        if minimum and size is not None and size < minimum:
            fail(f"filesystems[{i}].device", f"{fs.device} is {human_size(size)} but mkfs.{fs.type} needs at least "
                 f"{human_size(minimum)}: make {_size_field(plan, fs.device)} larger")


def _check_max(size: int, field: str, fail) -> None:
    if size > MAX_SIZE:
        fail(field, f"{human_size(size)} is not a plausible size (more than {human_size(MAX_SIZE)})")


def known_sizes(plan) -> dict[str, int]:
    """Size in bytes of every plan device whose size the plan alone determines."""
    sizes = {loop.name: loop.size for loop in plan.loops}
    for table in plan.tables:
        for part in table.parts:
            if part.size is not None:
                sizes[part.name] = part.size
    for export in getattr(plan, "iscsi", []):  # the SCSI disk is as large as the device exported
        if export.export in sizes:
            sizes[export.name] = sizes[export.export]
    for raid in plan.raids:  # in plan order; a RAID of RAIDs sees its members' sizes
        members = [sizes.get(m) for m in raid.members]
        if None not in members:
            usable = min(members) - MD_METADATA
            sizes[raid.name] = usable * (len(members) if raid.level == 0 else 1)
    for _ in range(2):  # a delay over a cache or a cache over a delay: two passes see both
        for delay in getattr(plan, "delays", []):
            if delay.device in sizes:
                sizes[delay.name] = sizes[delay.device]
        for cache in getattr(plan, "caches", []):  # dm-cache is as large as its origin
            if cache.origin in sizes:
                sizes[cache.name] = sizes[cache.origin]
    return sizes


def _size_field(plan, name: str) -> str:
    for i, loop in enumerate(plan.loops):
        if loop.name == name:
            return f"loop_devices[{i}].size"
    for i, table in enumerate(plan.tables):
        for j, part in enumerate(table.parts):
            if part.name == name:
                return f"partitions[{i}].parts[{j}].size"
    for i, raid in enumerate(plan.raids):
        if raid.name == name:
            return f"the sizes of raid[{i}].members"
    for delay in getattr(plan, "delays", []):
        if delay.name == name:
            return _size_field(plan, delay.device)
    for cache in getattr(plan, "caches", []):
        if cache.name == name:
            return _size_field(plan, cache.origin)
    return name


def _capacity_for(path: str) -> int | None:
    """Total size of the file system the file ``path`` is (or would be) on; None if unknown."""
    directory = Path(path).parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize
