"""The kernel's mount table (``/proc/self/mountinfo``) and the mount that holds a path: the one reader of
it (isolation's cgroup layout and block counters, devices' mounts and file-system types, the lab's tmpfs check)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from operator import attrgetter
from typing import Callable, Iterable, Iterator, NamedTuple, TypeVar

from iolab.core.errors import IolabError

MOUNTINFO = "/proc/self/mountinfo"
T = TypeVar("T")


class Mount(NamedTuple):
    mountpoint: str
    fstype: str
    source: str | None
    options: str | None   # the super block options (for cgroup v1: the controllers)
    mount_options: str = ""  # the mount's own (per mount point: ro/rw, nosuid, relatime, ...)
    majmin: str = "0:0"     # the file system's device number, "major:minor" (major 0: anonymous)

    @property
    def all_options(self) -> str:
        """The mount's options then the super block's, comma-separated, each once, as ``mount`` and ``findmnt``
        show them (both lists start with ``rw`` or ``ro``)."""
        seen = [part for options in (self.mount_options, self.options) for part in (options or "").split(",") if part]
        return ",".join(dict.fromkeys(seen))


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
        yield Mount(unescape(fields[4]), rfields[0], unescape(rfields[1]) if len(rfields) > 1 else None,
                    rfields[2] if len(rfields) > 2 else None, fields[5] if len(fields) > 5 else "", fields[2])


def holder(path: str | os.PathLike, table: Iterable[T], mountpoint: Callable[[T], str] = attrgetter("mountpoint")) -> T | None:
    """The entry of ``table`` whose mount point holds ``path``: the longest containing it, the last mounted
    of equals (the one rule for "which mount is this path on"; ``mountpoint`` reads an entry's mount point)."""
    path = os.path.realpath(path)
    best, longest = None, -1
    for entry in table:
        mnt = mountpoint(entry)
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= longest:
            best, longest = entry, len(mnt)
    return best


def mount_of(path: str | os.PathLike) -> Mount | None:
    """The mount holding ``path`` (:func:`holder`); None if the table is unreadable."""
    try:
        return holder(path, list(mounts()))
    except IolabError:
        return None
