"""The kernel's mount table (``/proc/self/mountinfo``) and the mount that holds a path."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator, NamedTuple

from iolab.core.errors import IolabError

MOUNTINFO = "/proc/self/mountinfo"


class Mount(NamedTuple):
    mountpoint: str
    fstype: str
    source: str | None
    options: str | None   # the super block options (for cgroup v1: the controllers)


def unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (``\\040``) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts(mountinfo: str | os.PathLike = MOUNTINFO) -> Iterator[Mount]:
    """Every mount of the table; an unreadable table is an IolabError."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError as exc:
        raise IolabError(f"cannot read mount table: {exc.strerror}", context=str(mountinfo)) from None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or not rfields:
            continue
        yield Mount(unescape(fields[4]), rfields[0], rfields[1] if len(rfields) > 1 else None,
                    rfields[2] if len(rfields) > 2 else None)


def mount_of(path: str | os.PathLike) -> Mount | None:
    """The mount holding ``path`` (the longest mount point containing it); None if unreadable."""
    path = os.path.realpath(path)
    best = None
    try:
        table = list(mounts())
    except IolabError:
        return None
    for mount in table:
        mnt = mount.mountpoint
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and (best is None or len(mnt) >= len(best.mountpoint)):
            best = mount
    return best
