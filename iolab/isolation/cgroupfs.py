"""The cgroup file system itself: where the hierarchies are mounted on this machine and how
their files are read and written.

Machines come in three shapes: **v2** (unified: one directory per group),
**v1** (legacy: one hierarchy per controller, ``/sys/fs/cgroup/memory``,
``/sys/fs/cgroup/blkio``) and **hybrid** (v1 controllers plus a unified mount
that may hold some controllers). :func:`detect` reads which controller is
served where; the per-version semantics live in :mod:`iolab.isolation.cgroup_v1`
and :mod:`iolab.isolation.cgroup_v2`, the group built on them in
:mod:`iolab.isolation.cgroups`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import re
import signal
from pathlib import Path
from typing import Iterable

from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.core.mountinfo import MOUNTINFO, mount_of, mounts

log = logging.getLogger(__name__)

#: logical controller names used by iolab -> (v1 name, v2 name)
CONTROLLERS = {"memory": ("memory", "memory"), "io": ("blkio", "io")}
_ALIASES = {"memory": "memory", "io": "io", "blkio": "io"}
PREFIX = "iolab-"
_NAME_RE = re.compile(r"^iolab-(\d+)-[0-9a-f]+(?:\.scope)?$")  # cgroupfs groups and systemd scopes
SCOPE_SUFFIX = ".scope"
_V1_CONTROLLERS = ("memory", "blkio", "cpu", "cpuacct", "cpuset", "pids", "devices",
                   "freezer", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma", "misc")


def logical(controller: str) -> str:
    """iolab's name (memory, io) for a controller name (memory, io, blkio)."""
    try:
        return _ALIASES[controller]
    except KeyError:
        raise IolabError(f"unknown controller {controller!r}", hint="use memory or io (blkio)") from None


# --------------------------------------------------------------------------- detection

@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each controller lives on this machine.

    ``version`` is ``"v2"`` (unified only), ``"v1"`` (legacy only),
    ``"hybrid"`` (v1 hierarchies and a unified mount) or ``"none"``.
    """

    version: str
    v1: dict                      # v1 controller name -> mount point
    v2: str | None                # unified mount point
    v2_controllers: frozenset     # controllers available in the unified root

    def locate(self, controller: str) -> tuple[str, str] | None:
        """``(version, mount point)`` serving a logical controller (memory, io)."""
        v1_name, v2_name = CONTROLLERS[logical(controller)]
        if v1_name in self.v1:
            return "v1", self.v1[v1_name]
        if self.v2 and v2_name in self.v2_controllers:
            return "v2", self.v2
        return None

    def describe(self) -> dict:
        return {"version": self.version, "v1": dict(self.v1), "v2": self.v2,
                "v2_controllers": sorted(self.v2_controllers)}


def detect(mountinfo: str | os.PathLike = MOUNTINFO) -> Layout:
    """Read the cgroup mounts of this machine (v1, v2 or hybrid)."""
    v1: dict[str, str] = {}
    v2 = None
    for mount in mounts(mountinfo):
        mountpoint, fstype, options = mount.mountpoint, mount.fstype, mount.options
        if options is None:
            continue
        if fstype == "cgroup2" and v2 is None:
            v2 = mountpoint
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in _V1_CONTROLLERS:
                    v1.setdefault(option, mountpoint)
    v2_controllers: frozenset = frozenset()
    if v2:
        try:
            v2_controllers = frozenset((Path(v2) / "cgroup.controllers").read_text().split())
        except OSError:
            pass
    version = "hybrid" if v1 and v2 else "v1" if v1 else "v2" if v2 else "none"
    return Layout(version, v1, v2, v2_controllers)


def is_cgroupfs(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies on a cgroup/cgroup2 mount (False for a fake tree)."""
    mount = mount_of(path)
    return mount is not None and mount.fstype in ("cgroup", "cgroup2")


def systemd_managed() -> bool:
    """True where systemd is PID 1 and manages cgroups (``systemd-run --scope`` works).

    :mod:`iolab.isolation.systemd_scope` then makes iolab's groups as transient scopes.
    """
    return os.path.isdir("/run/systemd/system")


def own_cgroup(controller: str, proc_cgroup: str | os.PathLike = "/proc/self/cgroup") -> str | None:
    """Our cgroup path (``/a/b``) in the hierarchy serving ``controller`` (``unified`` for v2)."""
    wanted = None if controller == "unified" else CONTROLLERS[logical(controller)][0]
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        if wanted is None and names == "":
            return path
        if wanted is not None and wanted in names.split(","):
            return path
    return None


def dirs_of_pid(pid: int, controllers: Iterable[str], *, layout: Layout | None = None) -> dict:
    """``{controller: (version, directory)}`` of the cgroups process ``pid`` is in.

    Read from ``/proc/<pid>/cgroup``, each logical controller (memory, io) in
    the hierarchy that really serves it on this machine.
    """
    layout = layout or detect()
    proc_cgroup = Path(f"/proc/{int(pid)}/cgroup")
    if not proc_cgroup.exists():
        raise IolabError("the process is gone", context=str(proc_cgroup))
    out: dict[str, tuple[str, Path]] = {}
    for c in dict.fromkeys(logical(c) for c in controllers):
        found = layout.locate(c)
        if found is None:
            raise IolabError(f"no {c} controller on this machine (cgroup {layout.version})", context="cgroups")
        version, mount = found
        rel = own_cgroup("unified" if version == "v2" else c, proc_cgroup)
        if rel is None:
            raise IolabError(f"no {version} {c} line", context=str(proc_cgroup))
        out[c] = (version, Path(mount) / rel.lstrip("/"))
    return out


# --------------------------------------------------------------------------- files

def write(path: Path, value, *, fake: bool = False) -> None:
    """One ``write()`` of ``value`` to a cgroup file; kernel refusals become IolabError."""
    data = str(value).encode()
    flags = os.O_WRONLY | (os.O_CREAT | os.O_TRUNC if fake else 0)
    try:
        fd = os.open(path, flags, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise IolabError(f"cannot write {str(value).strip()!r}: {exc.strerror}", context=str(path)) from None
    log.debug("wrote %r to %s", str(value), path)


def read(path: Path) -> str | None:
    """The file's text; None when it (or its group) is gone."""
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ENODEV, errno.ENOENT):
            return None
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from None


def read_int(path: Path) -> int | None:
    """A one-number file; None for ``max``, empty or absent."""
    text = read(path)
    if text is None or not text.strip():
        return None
    text = text.strip()
    return None if text == "max" else int(text)


def read_keyed(path: Path) -> dict[str, int]:
    """``key value`` lines (memory.stat, memory.events, memory.oom_control)."""
    out: dict[str, int] = {}
    for line in (read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def read_pids(procs: Path) -> list[int]:
    """The PIDs listed in a ``cgroup.procs`` file (none when it is gone)."""
    return [int(x) for x in (read(procs) or "").split() if x.isdigit()]


# --------------------------------------------------------------------------- tasks

def tasks_in(dirs: Iterable[str | os.PathLike]) -> list[int]:
    """PIDs in the groups ``dirs`` (every hierarchy)."""
    found: set[int] = set()
    for d in dirs:
        found.update(read_pids(Path(d) / "cgroup.procs"))
    return sorted(found)


def kill_tasks(dirs: Iterable[str | os.PathLike], *, timeout: float = 10.0) -> list[int]:
    """SIGKILL every task in the groups ``dirs`` and wait until they are gone; returns the PIDs.

    For groups whose maker died: the fio (or postgres) it left keeps the
    device busy and the group populated. Raises :class:`IolabError` when a
    task outlives ``timeout`` (stuck in D state).
    """
    dirs = [Path(d) for d in dirs]
    killed: list[int] = []

    def emptied() -> bool:
        left = [p for p in tasks_in(dirs) if p != os.getpid()]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                if pid not in killed:
                    killed.append(pid)
        return not left
    wait_until(emptied, timeout, context=", ".join(map(str, dirs)), hint="a task in D state: look at /proc/PID/stack",
               what=lambda: f"tasks {tasks_in(dirs)} to leave the group after SIGKILL")
    return killed


# --------------------------------------------------------------------------- iolab's groups

def _search_roots(layout: Layout) -> list[Path]:
    roots: list[Path] = []
    for ctrl, mnt in layout.v1.items():
        if ctrl in ("memory", "blkio"):
            roots.append(Path(mnt))
    if layout.v2:
        roots.append(Path(layout.v2))
    return roots


def leftovers(*, owner: int | None = None, layout: Layout | None = None, depth: int = 3) -> list[str]:
    """Paths of iolab cgroups on this machine (optionally only those made by process ``owner``).

    Looks in the memory and block hierarchies (v1) and the unified tree, down
    to ``depth`` levels (groups are made under a root or under a process's own
    cgroup).
    """
    layout = layout or detect()
    found: list[str] = []
    for root in _search_roots(layout):
        stack = [(root, 0)]
        while stack:
            d, level = stack.pop()
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                match = _NAME_RE.match(entry.name)
                if match:
                    if owner is None or int(match.group(1)) == owner:
                        found.append(entry.path)
                elif level + 1 < depth:
                    stack.append((Path(entry.path), level + 1))
    return sorted(found)


def owner_of(name: str) -> int | None:
    """The PID in an iolab group or scope name (``iolab-<pid>-<hex>[.scope]``), else None."""
    match = _NAME_RE.match(name)
    return int(match.group(1)) if match else None
