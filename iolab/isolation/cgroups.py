"""Control groups for cache isolation and device throttling, written through cgroupfs.

iolab needs two controllers: **memory** (a hard limit that also caps the page
cache charged to the group) and the **block** controller (``blkio`` in v1,
``io`` in v2) for the throttles of emulated devices. Machines come in three
shapes, all handled here:

* **v2** (unified): one directory, ``memory.max``, ``memory.swap.max``,
  ``io.max``; controllers must be enabled in the parent's
  ``cgroup.subtree_control``.
* **v1** (legacy): one hierarchy per controller (``/sys/fs/cgroup/memory``,
  ``/sys/fs/cgroup/blkio``): the group is one directory *per controller*
  with the same name; ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes``
  so the limit cannot be dodged through swap), ``blkio.throttle.*``.
* **hybrid**: v1 controllers plus a unified v2 mount that may hold some
  controllers (often none, or only ``hugetlb``). Each controller is taken from
  where it is really attached.

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

Semantics worth knowing:

* the memory limit is a hard limit (``memory.max``), never ``memory.high``
  (which throttles the task and distorts latency);
* page cache is charged to the group of the task that *first* reads a page:
  pages already cached by someone else are read for free, so drop caches
  before a test (see :mod:`iolab.isolation.sandbox`);
* v1 block throttling applies to the group's own tasks only (v1 is flat), and
  buffered writes are written back by kernel threads outside any group, so
  under v1 only reads and O_DIRECT/synchronous writes are throttled;
* a group can be pointed at a fake tree (``root=``, ``version=``) for tests:
  files are then written as plain files.
"""
from __future__ import annotations

import dataclasses
import errno
import logging
import os
import re
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Iterable

from iolab.core import ownership
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

PREFIX = "iolab-"
_NAME_RE = re.compile(r"^iolab-(\d+)-[0-9a-f]+(?:\.scope)?$")  # cgroupfs groups and systemd scopes
SCOPE_SUFFIX = ".scope"

#: logical controller names used by iolab -> (v1 name, v2 name)
CONTROLLERS = {"memory": ("memory", "memory"), "io": ("blkio", "io")}
_ALIASES = {"memory": "memory", "io": "io", "blkio": "io"}

UNLIMITED_V1 = 9223372036854771712  # PAGE_COUNTER_MAX * 4096 on 64-bit


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
        logical = _logical(controller)
        v1_name, v2_name = CONTROLLERS[logical]
        if v1_name in self.v1:
            return "v1", self.v1[v1_name]
        if self.v2 and v2_name in self.v2_controllers:
            return "v2", self.v2
        return None

    def describe(self) -> dict:
        return {"version": self.version, "v1": dict(self.v1), "v2": self.v2,
                "v2_controllers": sorted(self.v2_controllers)}


def _logical(controller: str) -> str:
    try:
        return _ALIASES[controller]
    except KeyError:
        raise IolabError(f"unknown controller {controller!r}", hint="use memory or io (blkio)") from None


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def detect(mountinfo: str | os.PathLike = "/proc/self/mountinfo") -> Layout:
    """Read the cgroup mounts of this machine (v1, v2 or hybrid)."""
    v1: dict[str, str] = {}
    v2 = None
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError as exc:
        raise IolabError(f"cannot read mount table: {exc.strerror}", context=str(mountinfo)) from None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, mountpoint = rfields[0], _unescape(fields[4])
        if fstype == "cgroup2" and v2 is None:
            v2 = mountpoint
        elif fstype == "cgroup":
            for option in rfields[2].split(","):
                if option in ("memory", "blkio", "cpu", "cpuacct", "cpuset", "pids", "devices",
                              "freezer", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma", "misc"):
                    v1.setdefault(option, mountpoint)
    v2_controllers: frozenset = frozenset()
    if v2:
        try:
            v2_controllers = frozenset((Path(v2) / "cgroup.controllers").read_text().split())
        except OSError:
            pass
    version = "hybrid" if v1 and v2 else "v1" if v1 else "v2" if v2 else "none"
    return Layout(version, v1, v2, v2_controllers)


def systemd_managed() -> bool:
    """True where systemd is PID 1 and manages cgroups (``systemd-run --scope`` works).

    :mod:`iolab.isolation.systemd_scope` then makes iolab's groups as transient scopes.
    """
    return os.path.isdir("/run/systemd/system")


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
    for c in dict.fromkeys(_logical(c) for c in controllers):
        found = layout.locate(c)
        if found is None:
            raise IolabError(f"no {c} controller on this machine (cgroup {layout.version})", context="cgroups")
        version, mount = found
        rel = own_cgroup("unified" if version == "v2" else c, proc_cgroup)
        if rel is None:
            raise IolabError(f"no {version} {c} line", context=str(proc_cgroup))
        out[c] = (version, Path(mount) / rel.lstrip("/"))
    return out


def own_cgroup(controller: str, proc_cgroup: str | os.PathLike = "/proc/self/cgroup") -> str | None:
    """Our cgroup path (``/a/b``) in the hierarchy serving ``controller`` (``unified`` for v2)."""
    wanted = None if controller == "unified" else CONTROLLERS[_logical(controller)][0]
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
        def v(x):
            return "max" if x is None else str(int(x))
        return (f"{self.device} rbps={v(self.read_bps)} wbps={v(self.write_bps)} "
                f"riops={v(self.read_iops)} wiops={v(self.write_iops)}")


# --------------------------------------------------------------------------- file helpers

def _write(path: Path, value, *, fake: bool = False) -> None:
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


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ENODEV, errno.ENOENT):
            return None
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None or not text.strip():
        return None
    text = text.strip()
    return None if text == "max" else int(text)


def _read_keyed(path: Path) -> dict[str, int]:
    """``key value`` lines (memory.stat, memory.events, memory.oom_control)."""
    out: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _is_cgroupfs(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies on a cgroup/cgroup2 mount (False for a fake tree)."""
    path = os.path.realpath(path)
    best, fstype = "", None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mnt = _unescape(fields[4])
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, fstype = mnt, right.split()[0]
    return fstype in ("cgroup", "cgroup2")


# --------------------------------------------------------------------------- the group

class _PeakSampler:
    """Peak of ``memory.current`` sampled in a thread (v2 kernels without ``memory.peak``)."""

    def __init__(self, path: Path, interval: float = 0.02):
        self.path, self.interval = path, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iolab-peak-sampler", daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.is_set():
            value = _read_int(self.path)
            if value is not None and value > self.peak:
                self.peak = value
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=1)


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
        self._peak_fd: int | None = None
        self._sampler: _PeakSampler | None = None
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
            fake = not _is_cgroupfs(root)
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
                    self._enable_v2(parent, controllers)
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
                available = (_read(path / "cgroup.controllers") or "").split()
                for c in controllers:
                    if CONTROLLERS[c][1] not in available:
                        raise IolabError(f"the {CONTROLLERS[c][1]} controller is not enabled for the new group",
                                         context=str(path))
            return path
        raise last_error or IolabError("cannot create cgroup", context=str(base))

    def _enable_v2(self, parent: Path, controllers: list[str]) -> None:
        names = [CONTROLLERS[c][1] for c in controllers]
        control = parent / "cgroup.subtree_control"
        enabled = (_read(control) or "").split()
        missing = [n for n in names if n not in enabled]
        if not missing:
            return
        if self.fake:
            _write(control, " ".join(enabled + missing) + "\n", fake=True)
            return
        _write(control, " ".join(f"+{n}" for n in missing))

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

    # ---- memory
    def set_memory_limit(self, nbytes: int) -> None:
        """Hard limit on memory incl. page cache; swap cannot be used to dodge it."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise IolabError(f"memory limit must be positive, got {nbytes}", context=self.name)
        if self.version("memory") == "v2":
            _write(self._file("memory", "memory.max"), nbytes, fake=self.fake)
            swap = self._file("memory", "memory.swap.max")
            if self.fake or swap.exists():
                _write(swap, 0, fake=self.fake)
            else:
                self.notes.append("memory.swap.max absent (no swap accounting): swap not limited")
        else:
            limit = self._file("memory", "memory.limit_in_bytes")
            memsw = self._file("memory", "memory.memsw.limit_in_bytes")
            has_memsw = memsw.exists()
            current = _read_int(limit) if limit.exists() else None
            # memsw must always be >= limit: raise memsw first when growing
            if has_memsw and current is not None and nbytes > current:
                _write(memsw, nbytes, fake=self.fake)
                _write(limit, nbytes, fake=self.fake)
            else:
                _write(limit, nbytes, fake=self.fake)
                if has_memsw:
                    _write(memsw, nbytes, fake=self.fake)
            if not has_memsw:
                self.notes.append("memory.memsw.limit_in_bytes absent (no swap accounting): swap not limited")
            if not self.fake:
                got = _read_int(limit)
                if got is None or got > nbytes:
                    raise IolabError(f"the kernel did not take the memory limit {nbytes} (reads {got})",
                                     context=str(limit))
        self.memory_limit = nbytes
        log.info("cgroup %s: memory limit %d bytes", self.name, nbytes)

    def memory_limit_in_force(self) -> dict:
        """What the kernel shows now: ``limit`` and ``swap`` (bytes; None = unlimited or no file).

        v2: ``memory.max`` and ``memory.swap.max``; v1: ``memory.limit_in_bytes``
        and ``memory.memsw.limit_in_bytes`` (memory + swap). ``files`` names them
        and ``swap_file`` says whether the swap file exists (no swap accounting).
        """
        if self.version("memory") == "v2":
            limit_file, swap_file = self._file("memory", "memory.max"), self._file("memory", "memory.swap.max")
        else:
            limit_file = self._file("memory", "memory.limit_in_bytes")
            swap_file = self._file("memory", "memory.memsw.limit_in_bytes")
        def value(path):
            got = _read_int(path)
            return None if got is None or got >= UNLIMITED_V1 else got
        return {"limit": value(limit_file), "swap": value(swap_file) if swap_file.exists() else None,
                "swap_file": swap_file.exists(), "files": [str(limit_file), str(swap_file)]}

    def memory_current(self) -> int | None:
        name = "memory.current" if self.version("memory") == "v2" else "memory.usage_in_bytes"
        return _read_int(self._file("memory", name))

    def memory_peak(self) -> int | None:
        """Peak memory (incl. page cache) since creation or the last :meth:`reset_peak`."""
        if self.version("memory") == "v1":
            return _read_int(self._file("memory", "memory.max_usage_in_bytes"))
        if self._peak_fd is not None:
            text = os.pread(self._peak_fd, 64, 0).decode().strip()
            return int(text) if text.isdigit() else None
        if self._sampler is not None:
            current = self.memory_current() or 0
            return max(self._sampler.peak, current)
        return _read_int(self._file("memory", "memory.peak"))

    def reset_peak(self) -> bool:
        """Restart peak tracking; False where the kernel offers no way (peak since creation)."""
        if self.version("memory") == "v1":
            if self.fake:
                return False
            _write(self._file("memory", "memory.max_usage_in_bytes"), 0)
            memsw_peak = self._file("memory", "memory.memsw.max_usage_in_bytes")
            if memsw_peak.exists():
                _write(memsw_peak, 0)
            return True
        if self.fake:
            return False
        peak = self._file("memory", "memory.peak")
        if peak.exists() and self._peak_fd is None:
            # Linux >= 6.12: a write resets the peak for reads through the same fd
            try:
                fd = os.open(peak, os.O_RDWR)
            except OSError:
                fd = None
            if fd is not None:
                try:
                    os.write(fd, b"reset\n")
                    self._peak_fd = fd
                    return True
                except OSError:
                    os.close(fd)
        elif self._peak_fd is not None:
            os.write(self._peak_fd, b"reset\n")
            return True
        # no resettable memory.peak: sample memory.current from now on
        if self._sampler is not None:
            self._sampler.stop()
        self._sampler = _PeakSampler(self._file("memory", "memory.current"))
        return True

    def memory_stat(self) -> dict[str, int]:
        return _read_keyed(self._file("memory", "memory.stat"))

    def page_cache(self) -> int | None:
        """File pages charged to the group (v2 ``file``, v1 ``total_cache``/``cache``)."""
        stat = self.memory_stat()
        if self.version("memory") == "v2":
            return stat.get("file")
        return stat.get("total_cache", stat.get("cache"))

    def oom_events(self) -> dict[str, int]:
        """OOM-related counters: ``oom_kill`` always (0 if unknown), plus what the kernel shows."""
        if self.version("memory") == "v2":
            events = _read_keyed(self._file("memory", "memory.events"))
            return {"oom_kill": events.get("oom_kill", 0), "oom": events.get("oom", 0),
                    "max": events.get("max", 0), "oom_group_kill": events.get("oom_group_kill", 0)}
        control = _read_keyed(self._file("memory", "memory.oom_control"))
        out = {"oom_kill": control.get("oom_kill", 0), "under_oom": control.get("under_oom", 0)}
        failcnt = _read_int(self._file("memory", "memory.failcnt"))
        if failcnt is not None:
            # failcnt counts every charge that hit the limit (page cache reclaim too): context only
            out["failcnt"] = failcnt
        return out

    def oom_kills(self) -> int:
        return self.oom_events().get("oom_kill", 0)

    # ---- block throttling
    def throttle(self, throttle: Throttle | dict | str, *, read_bps=None, write_bps=None,
                 read_iops=None, write_iops=None) -> Throttle:
        """Limit the group's I/O to a block device ``MAJ:MIN`` (None = unlimited)."""
        if isinstance(throttle, str):
            throttle = Throttle(throttle, read_bps, write_bps, read_iops, write_iops)
        throttle = Throttle.coerce(throttle)
        if self.version("io") == "v2":
            _write(self._file("io", "io.max"), throttle.io_max_line(), fake=self.fake)
            if not self.fake:
                current = _read(self._file("io", "io.max")) or ""
                if any(v is not None for v in (throttle.read_bps, throttle.write_bps,
                                               throttle.read_iops, throttle.write_iops)) \
                        and not any(line.startswith(throttle.device + " ") for line in current.splitlines()):
                    raise IolabError(f"io.max does not show the limits for {throttle.device}",
                                     context=str(self._file("io", "io.max")))
        else:
            files = {"blkio.throttle.read_bps_device": throttle.read_bps,
                     "blkio.throttle.write_bps_device": throttle.write_bps,
                     "blkio.throttle.read_iops_device": throttle.read_iops,
                     "blkio.throttle.write_iops_device": throttle.write_iops}
            for fname, value in files.items():
                path = self._file("io", fname)
                line = f"{throttle.device} {int(value) if value is not None else 0}"
                if self.fake:
                    kept = [ln for ln in (_read(path) or "").splitlines()
                            if ln.split()[:1] != [throttle.device]]
                    if value is not None:
                        kept.append(line)
                    _write(path, "".join(f"{ln}\n" for ln in kept), fake=True)
                    continue
                _write(path, line)
                shown = {ln.split()[0]: int(ln.split()[1]) for ln in (_read(path) or "").splitlines()
                         if len(ln.split()) == 2}
                if value is not None and shown.get(throttle.device) != int(value):
                    raise IolabError(f"the kernel shows {shown.get(throttle.device)} after writing {line!r}",
                                     context=str(path))
        self.throttles = [t for t in self.throttles if t.device != throttle.device] + [throttle]
        log.info("cgroup %s: throttle %s", self.name, throttle.as_dict())
        return throttle

    def throttle_in_force(self, device: str) -> dict:
        """The limits the kernel shows now for ``device`` (``MAJ:MIN``): read_bps ... write_iops, None = none."""
        if self.version("io") == "v2":
            out = dict.fromkeys(("read_bps", "write_bps", "read_iops", "write_iops"))
            keys = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}
            for line in (_read(self._file("io", "io.max")) or "").splitlines():
                fields = line.split()
                if fields[:1] != [device]:
                    continue
                for field in fields[1:]:
                    key, _, value = field.partition("=")
                    if key in keys and value.isdigit():
                        out[keys[key]] = int(value)
            return out
        out = {}
        for field in ("read_bps", "write_bps", "read_iops", "write_iops"):
            out[field] = None
            path = self._file("io", f"blkio.throttle.{field}_device")
            for line in (_read(path) or "").splitlines():
                fields = line.split()
                if len(fields) == 2 and fields[0] == device and fields[1].isdigit():
                    out[field] = int(fields[1]) or None
        return out

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
            found.update(int(x) for x in (_read(procs) or "").split() if x.isdigit())
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
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None
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
            deadline = time.monotonic() + timeout
            while True:
                for pid in [int(x) for x in (_read(d / "cgroup.procs") or "").split() if x.isdigit()]:
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
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
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


def remove_stale(*, layout: Layout | None = None) -> list[str]:
    """Remove iolab cgroups whose creating process is gone; returns what was removed.

    A systemd scope (``iolab-*.scope``) on a machine where systemd manages
    cgroups is stopped with ``systemctl stop`` (which also ends its stray
    tasks); other groups get their tasks moved to the parent and are removed.
    """
    removed = []
    for path in leftovers(layout=layout):
        p = Path(path)
        owner = int(_NAME_RE.match(p.name).group(1))
        if Path(f"/proc/{owner}").exists():
            continue
        try:
            if p.name.endswith(SCOPE_SUFFIX) and systemd_managed():
                from iolab.isolation.systemd_scope import stop_unit  # the scope module builds on this one
                if p.exists():
                    stop_unit(p.name)
                    removed.append(path)
                continue
            Group(p.name, {"x": ("v1", p)}).remove()
            removed.append(path)
        except IolabError as exc:
            log.warning("%s", exc)
    return removed


def owner_of(name: str) -> int | None:
    """The PID in an iolab group or scope name (``iolab-<pid>-<hex>[.scope]``), else None."""
    match = _NAME_RE.match(name)
    return int(match.group(1)) if match else None


def tasks_in(dirs: Iterable[str | os.PathLike]) -> list[int]:
    """PIDs in the groups ``dirs`` (every hierarchy)."""
    found: set[int] = set()
    for d in dirs:
        found.update(int(x) for x in (_read(Path(d) / "cgroup.procs") or "").split() if x.isdigit())
    return sorted(found)


def kill_tasks(dirs: Iterable[str | os.PathLike], *, timeout: float = 10.0) -> list[int]:
    """SIGKILL every task in the groups ``dirs`` and wait until they are gone; returns the PIDs.

    For groups whose maker died: the fio (or postgres) it left keeps the
    device busy and the group populated. Raises :class:`IolabError` when a
    task outlives ``timeout`` (stuck in D state).
    """
    import signal
    dirs = [Path(d) for d in dirs]
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in tasks_in(dirs) if p != os.getpid()]
        if not left:
            return killed
        if time.monotonic() > deadline:
            raise IolabError(f"tasks {left} are still in the group {timeout:.0f} s after SIGKILL",
                             context=", ".join(map(str, dirs)), hint="a task in D state: look at /proc/PID/stack")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            if pid not in killed:
                killed.append(pid)
        time.sleep(0.05)


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
