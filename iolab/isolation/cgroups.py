"""Control groups for cache isolation and device throttling, written through cgroupfs.

iolab needs two controllers: **memory** (a hard limit that also caps the page
cache charged to the group) and the **block** controller (``blkio`` in v1,
``io`` in v2) for the throttles of emulated devices. :class:`Group` is the one
interface; where each controller is mounted (v1, v2 or hybrid) is read by
:mod:`iolab.isolation.cgroupfs`, and each hierarchy's files and semantics live in
:mod:`iolab.isolation.cgroup_v1` and :mod:`iolab.isolation.cgroup_v2`: a group
picks the module by the version really serving each controller.

Two ways to get a group:

* :meth:`Group.create` writes cgroupfs directly: the group is named
  ``iolab-<pid>-<random>`` and created as a child of the hierarchy's root, or
  of our own cgroup when the root is not writable.
* :meth:`Group.adopt` wraps directories someone else made -- the transient
  scope ``iolab-<pid>-<random>.scope`` that :mod:`iolab.isolation.systemd_scope` starts
  with ``systemd-run --scope`` where systemd manages cgroups
  (:func:`systemd_managed`). iolab then reads the limits back, puts tasks in
  and reads the evidence as for its own groups, but never ``mkdir``s or
  ``rmdir``s them: removing is left to whoever made them (the ``release``
  callback).

:func:`leftovers` finds both kinds that a crashed run left behind.

Semantics worth knowing: page cache is charged to the group of the task that
*first* reads a page: pages already cached by someone else are read for free,
so drop caches before a test (see :mod:`iolab.isolation.cache`); a group can be
pointed at a fake tree (``root=``, ``version=``) for tests: files are then
written as plain files.
"""
from __future__ import annotations

import dataclasses
import errno
import logging
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Iterable

from iolab.core import ownership
from iolab.core.deadline import Deadline
from iolab.core.errors import IolabError
from iolab.isolation import cgroup_v1, cgroup_v2
from iolab.isolation.cgroupfs import (  # noqa: F401  (the interface callers have always used)
    CONTROLLERS, PREFIX, SCOPE_SUFFIX, Layout, detect, leftovers, owner_of, dirs_of_pid, is_cgroupfs, kill_tasks, logical as _logical, own_cgroup,
    read as _read, read_int as _read_int, read_keyed as _read_keyed, read_pids, systemd_managed, tasks_in,
    write as _write)
from iolab.isolation.systemctl import stop_unit

log = logging.getLogger(__name__)

UNLIMITED_V1 = cgroup_v1.UNLIMITED
_HIERARCHIES = {"v1": cgroup_v1, "v2": cgroup_v2}


# --------------------------------------------------------------------------- throttles

@dataclasses.dataclass(frozen=True)
class Throttle:
    """Limits for one block device ``MAJ:MIN``; ``None`` means unlimited.

    Rates are bytes per second and I/Os per second, as the kernel takes them.
    """

    device: str
    read_bps: int | None = None
    write_bps: int | None = None
    read_iops: int | None = None
    write_iops: int | None = None

    def __post_init__(self):
        if not re.fullmatch(r"\d+:\d+", str(self.device)):
            raise IolabError(f"not a block device number MAJ:MIN: {self.device!r}", context="throttle")
        for field in ("read_bps", "write_bps", "read_iops", "write_iops"):
            value = getattr(self, field)
            if value is not None and (isinstance(value, bool) or int(value) <= 0):
                raise IolabError(f"{field} must be a positive number or None, got {value!r}",
                                 context=f"throttle {self.device}")

    @classmethod
    def coerce(cls, value) -> "Throttle":
        """Accept a Throttle or a mapping with the same keys."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls(**value)
        raise IolabError(f"not a throttle: {value!r}", hint="use iolab.isolation.cgroups.Throttle(device='7:0', read_bps=...)")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def io_max_line(self) -> str:
        """The v2 ``io.max`` line."""
        return cgroup_v2.io_max_line(self)




# --------------------------------------------------------------------------- the group

class Group:
    """One iolab cgroup spanning the controllers it was created with.

    Build it with :meth:`create` (cgroupfs) or wrap a systemd scope with
    :meth:`adopt`; remove it with :meth:`remove` (idempotent).
    ``dirs`` maps each logical controller (``memory``, ``io``) to
    ``(version, directory)``; in v1 every controller has its own directory,
    in v2 they share one.
    """

    def __init__(self, name: str, dirs: dict, *, fake: bool = False):
        self.name = name
        self.dirs = dirs
        self.fake = fake
        self.removed = False
        #: who made the directories: ``cgroupfs`` (iolab) or e.g. ``systemd-run scope <unit>``
        self.backend = "cgroupfs"
        #: provenance an adopting backend adds to :meth:`describe` (command, unit, read-backs)
        self.details: dict = {}
        self._release = None  # adopted groups: undoes whatever made them (instead of rmdir)
        self.memory_limit: int | None = None
        self.throttles: list[Throttle] = []
        self.notes: list[str] = []
        self._peak: cgroup_v1.Peak | cgroup_v2.Peak | None = None
        self._oom_baseline = 0

    # ---- creation
    @classmethod
    def create(cls, controllers: Iterable[str] = ("memory", "io"), *, root: str | os.PathLike | None = None,
               version: str | None = None, layout: Layout | None = None, name: str | None = None) -> "Group":
        """Create a group with ``controllers`` (``memory``, ``io``/``blkio``).

        Without ``root`` the machine's cgroup mounts are used (:func:`detect`),
        each controller where it is really attached. With ``root`` (and
        ``version`` ``"v1"`` or ``"v2"``) the group is made under that tree:
        for v2 ``root`` is the unified directory, for v1 it holds one
        directory per controller (``root/memory``, ``root/blkio``). A ``root``
        that is not a cgroup file system is treated as a fake tree (tests).
        """
        logical = list(dict.fromkeys(_logical(c) for c in controllers))
        if not logical:
            raise IolabError("a cgroup needs at least one controller")
        name = name or f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        fake = False
        places: dict[str, tuple[str, Path]] = {}
        if root is not None:
            if version not in ("v1", "v2"):
                raise IolabError("with root= name the version: v1 or v2", context=str(root))
            root = Path(root)
            fake = not is_cgroupfs(root)
            for c in logical:
                base = root if version == "v2" else root / CONTROLLERS[c][0]
                places[c] = (version, base)
        else:
            layout = layout or detect()
            for c in logical:
                found = layout.locate(c)
                if found is None:
                    v1n, v2n = CONTROLLERS[c]
                    raise IolabError(
                        f"no {c} controller on this machine (cgroup {layout.version}: v1 has "
                        f"{', '.join(sorted(layout.v1)) or 'nothing'}, v2 has "
                        f"{', '.join(sorted(layout.v2_controllers)) or 'nothing'})",
                        context="cgroups", hint=f"mount the {v1n} (v1) or enable {v2n} (v2) controller")
                places[c] = (found[0], Path(found[1]))
        group = cls(name, {}, fake=fake)
        # one directory per (version, hierarchy): v2 controllers share one
        wanted: dict[tuple[str, Path], list[str]] = {}
        for c in logical:
            wanted.setdefault(places[c], []).append(c)
        if not fake:  # recorded before the mkdirs: a crash right after still leaves the owner
            ownership.record("cgroup", name, undo="kill its tasks; rmdir",
                             dirs=[str(base / name) for _, base in wanted])
        try:
            for (ver, base), ctrls in wanted.items():
                group._make(ver, base, ctrls)
        except BaseException:
            group.remove()
            raise
        if not fake:  # where the directories really are (under our own cgroup when the root is not writable)
            ownership.record("cgroup", name, undo="kill its tasks; rmdir",
                             dirs=[str(d) for _, d in dict.fromkeys(group.dirs.values())])
        log.info("created cgroup %s (%s)", name,
                 ", ".join(f"{c}: {v} {d}" for c, (v, d) in group.dirs.items()))
        return group

    @classmethod
    def adopt(cls, name: str, dirs: dict, *, backend: str, release, details: dict | None = None) -> "Group":
        """Wrap cgroup directories made by someone else (a systemd scope) as an iolab group.

        ``dirs`` maps logical controllers to ``(version, directory)`` (see
        :func:`dirs_of_pid`); every directory must exist and be named ``name``.
        ``release(timeout)`` is called by :meth:`remove` instead of ``rmdir``:
        it must make the directories go away (or raise :class:`IolabError`);
        :meth:`remove` then checks that they are gone. ``backend`` and
        ``details`` are recorded by :meth:`describe`.
        """
        checked: dict[str, tuple[str, Path]] = {}
        for c, (version, d) in dirs.items():
            d = Path(d)
            if d.name != name:
                raise IolabError(f"the {c} cgroup is {d}, not a group named {name}", context=backend,
                                 hint="the controller is not enabled for it")
            if not d.is_dir():
                raise IolabError(f"the {c} cgroup {d} does not exist", context=backend)
            checked[_logical(c)] = (version, d)
        group = cls(name, checked)
        group.backend = backend
        group.details = dict(details or {})
        group._release = release
        log.info("adopted cgroup %s from %s (%s)", name, backend,
                 ", ".join(f"{c}: {v} {d}" for c, (v, d) in checked.items()))
        return group

    @property
    def adopted(self) -> bool:
        return self._release is not None

    def _make(self, version: str, base: Path, controllers: list[str]) -> Path:
        parents = [base]
        if not self.fake:
            own = own_cgroup("unified" if version == "v2" else controllers[0])
            if own and own != "/":
                parents.append(base / own.lstrip("/"))
        last_error = None
        for parent in parents:
            path = parent / self.name
            try:
                if version == "v2":
                    cgroup_v2.enable(parent, controllers, fake=self.fake)
                path.mkdir()
            except IolabError as exc:
                last_error = exc
                continue
            except OSError as exc:
                if self.fake and exc.errno == errno.ENOENT:
                    parent.mkdir(parents=True, exist_ok=True)
                    path.mkdir()
                else:
                    last_error = IolabError(f"cannot create cgroup: {exc.strerror}", context=str(path))
                    continue
            if parent != base:
                log.info("cgroup root %s not writable, using our own cgroup %s", base, parent)
            # record the directory at once so a failure below still removes it
            for c in controllers:
                self.dirs[c] = (version, path)
            if version == "v2" and not self.fake:
                cgroup_v2.check_enabled(path, controllers)
            return path
        raise last_error or IolabError("cannot create cgroup", context=str(base))


    # ---- paths
    def path(self, controller: str) -> Path:
        c = _logical(controller)
        if c not in self.dirs:
            raise IolabError(f"this cgroup was created without the {c} controller", context=self.name)
        return self.dirs[c][1]

    def version(self, controller: str) -> str:
        return self.dirs[_logical(controller)][0]

    def _file(self, controller: str, name: str) -> Path:
        return self.path(controller) / name


    def _hierarchy(self, controller: str):
        """The module (cgroup_v1 or cgroup_v2) with the semantics of ``controller``'s hierarchy."""
        return _HIERARCHIES[self.version(controller)]

    # ---- memory
    def set_memory_limit(self, nbytes: int) -> None:
        """Hard limit on memory incl. page cache; swap cannot be used to dodge it."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise IolabError(f"memory limit must be positive, got {nbytes}", context=self.name)
        self.notes += self._hierarchy("memory").set_memory_limit(self.path("memory"), nbytes, fake=self.fake)
        self.memory_limit = nbytes
        log.info("cgroup %s: memory limit %d bytes", self.name, nbytes)

    def memory_limit_in_force(self) -> dict:
        """What the kernel shows now: ``limit`` and ``swap`` (bytes; None = unlimited or no file).

        v2: ``memory.max`` and ``memory.swap.max``; v1: ``memory.limit_in_bytes``
        and ``memory.memsw.limit_in_bytes`` (memory + swap). ``files`` names them
        and ``swap_file`` says whether the swap file exists (no swap accounting).
        """
        limit_file, swap_file = self._hierarchy("memory").memory_limit_files(self.path("memory"))

        def value(path):
            got = _read_int(path)
            return None if got is None or got >= UNLIMITED_V1 else got
        return {"limit": value(limit_file), "swap": value(swap_file) if swap_file.exists() else None,
                "swap_file": swap_file.exists(), "files": [str(limit_file), str(swap_file)]}

    def memory_current(self) -> int | None:
        return self._hierarchy("memory").memory_current(self.path("memory"))

    def _peak_tracker(self):
        if self._peak is None:
            self._peak = self._hierarchy("memory").Peak(self.path("memory"), fake=self.fake)
        return self._peak

    def memory_peak(self) -> int | None:
        """Peak memory (incl. page cache) since creation or the last :meth:`reset_peak`."""
        return self._peak_tracker().read()

    def reset_peak(self) -> bool:
        """Restart peak tracking; False where the kernel offers no way (peak since creation)."""
        return self._peak_tracker().reset()

    def memory_stat(self) -> dict[str, int]:
        return _read_keyed(self._file("memory", "memory.stat"))

    def page_cache(self) -> int | None:
        """File pages charged to the group (v2 ``file``, v1 ``total_cache``/``cache``)."""
        return self._hierarchy("memory").page_cache(self.memory_stat())

    def oom_events(self) -> dict[str, int]:
        """OOM-related counters: ``oom_kill`` always (0 if unknown), plus what the kernel shows."""
        return self._hierarchy("memory").oom_events(self.path("memory"))

    def oom_kills(self) -> int:
        return self.oom_events().get("oom_kill", 0)

    # ---- block throttling
    def throttle(self, throttle: Throttle | dict | str, *, read_bps=None, write_bps=None,
                 read_iops=None, write_iops=None) -> Throttle:
        """Limit the group's I/O to a block device ``MAJ:MIN`` (None = unlimited)."""
        if isinstance(throttle, str):
            throttle = Throttle(throttle, read_bps, write_bps, read_iops, write_iops)
        throttle = Throttle.coerce(throttle)
        self._hierarchy("io").throttle(self.path("io"), throttle, fake=self.fake)
        self.throttles = [t for t in self.throttles if t.device != throttle.device] + [throttle]
        log.info("cgroup %s: throttle %s", self.name, throttle.as_dict())
        return throttle

    def throttle_in_force(self, device: str) -> dict:
        """The limits the kernel shows now for ``device`` (``MAJ:MIN``): read_bps ... write_iops, None = none."""
        return self._hierarchy("io").throttle_in_force(self.path("io"), device)

    # ---- tasks
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a new task must be written to (one per hierarchy)."""
        return list(dict.fromkeys(d / "cgroup.procs" for _, d in self.dirs.values()))

    def add_pid(self, pid: int) -> None:
        for procs in self.procs_files():
            if self.fake:
                with open(procs, "a") as fh:
                    fh.write(f"{int(pid)}\n")
            else:
                _write(procs, int(pid))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for procs in self.procs_files():
            found.update(read_pids(procs))
        return sorted(found)

    def contains(self, pid: int) -> bool:
        """Whether ``pid`` is in this group in every hierarchy (read from /proc/PID/cgroup)."""
        text = _read(Path(f"/proc/{int(pid)}/cgroup")) or ""
        paths = {}
        for line in text.splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                paths[parts[1]] = parts[2]
        for c, (ver, d) in self.dirs.items():
            key = "" if ver == "v2" else CONTROLLERS[c][0]
            candidates = [p for k, p in paths.items() if (k == key if ver == "v2" else key in k.split(","))]
            if not candidates or not candidates[0].rstrip("/").endswith("/" + self.name):
                return False
        return True

    # ---- removal
    def remove(self, *, timeout: float = 5.0) -> None:
        """Move remaining tasks to the parent and remove the directories.

        Idempotent and tolerant of directories that are already gone.
        """
        if self.removed:
            return
        if self._peak is not None:
            self._peak.close()
            self._peak = None
        if self._release is not None:
            self._remove_adopted(timeout)
            return
        errors = []
        for _, d in list(dict.fromkeys(self.dirs.values())):
            if not d.exists():
                continue
            if self.fake:
                shutil.rmtree(d, ignore_errors=True)
                continue
            deadline = Deadline(timeout)
            while True:
                for pid in read_pids(d / "cgroup.procs"):
                    try:
                        _write(d.parent / "cgroup.procs", pid)
                        log.warning("moved task %d out of %s before removing it", pid, d)
                    except IolabError as exc:  # the task exited meanwhile
                        log.debug("%s", exc)
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or deadline.expired():
                        errors.append(f"{d}: {exc.strerror}")
                        break
                    time.sleep(0.05)
        self.removed = not errors
        if errors:
            raise IolabError("cannot remove cgroup: " + "; ".join(errors), context=self.name)
        if not self.fake:
            ownership.forget("cgroup", self.name)
        log.info("removed cgroup %s", self.name)

    def _remove_adopted(self, timeout: float) -> None:
        """Let the maker remove an adopted group, then check that its directories are gone."""
        self._release(timeout)
        left = [str(d) for _, d in dict.fromkeys(self.dirs.values()) if d.exists()]
        if left:
            raise IolabError(f"cgroup still there after {self.backend} was stopped: {', '.join(left)}",
                             context=self.name)
        self.removed = True
        log.info("%s removed cgroup %s", self.backend, self.name)

    def describe(self) -> dict:
        versions = sorted({v for v, _ in self.dirs.values()})
        return {"name": self.name, "version": "+".join(versions), "backend": self.backend,
                "paths": {c: str(d) for c, (_, d) in self.dirs.items()},
                "memory_limit": self.memory_limit,
                "throttles": [t.as_dict() for t in self.throttles],
                "notes": list(self.notes), **self.details}

    def __repr__(self) -> str:
        return f"Group({self.name!r}, {', '.join(f'{c}={d}' for c, (_, d) in self.dirs.items())})"


# --------------------------------------------------------------------------- leftovers

def remove_stale(*, layout: Layout | None = None) -> list[str]:
    """Remove iolab cgroups whose creating process is gone; returns what was removed.

    A systemd scope (``iolab-*.scope``) on a machine where systemd manages
    cgroups is stopped with ``systemctl stop`` (which also ends its stray
    tasks); other groups get their tasks moved to the parent and are removed.
    """
    removed = []
    for path in leftovers(layout=layout):
        p = Path(path)
        owner = owner_of(p.name)
        if Path(f"/proc/{owner}").exists():
            continue
        try:
            if p.name.endswith(SCOPE_SUFFIX) and systemd_managed():
                if p.exists():
                    stop_unit(p.name)
                    removed.append(path)
                continue
            Group(p.name, {"x": ("v1", p)}).remove()
            removed.append(path)
        except IolabError as exc:
            log.warning("%s", exc)
    return removed


def undo_stale(name: str, dirs: Iterable[str], *, dry_run: bool) -> str | None:
    """Remove an iolab group whose maker is gone (its tasks are killed first)."""
    present = [Path(d) for d in dirs if Path(d).is_dir() and Path(d).name == name]
    if not present:
        return None
    tasks = tasks_in(present)
    if dry_run:
        return f"would remove cgroup {', '.join(map(str, present))}" + (f" (and kill tasks {tasks})" if tasks else "")
    killed = kill_tasks(present)
    Group(name, {f"x{i}": ("v1", d) for i, d in enumerate(present)}).remove()
    return f"removed cgroup {', '.join(map(str, present))}" + (f" (killed tasks {killed})" if killed else "")
