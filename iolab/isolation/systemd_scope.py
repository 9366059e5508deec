"""Cgroups made by systemd: a transient scope from ``systemd-run --scope``.

Where systemd manages cgroups it owns the tree (in v2 it may migrate or
remove groups made behind its back), so iolab asks it for the group::

    systemd-run --scope --unit=iolab-<pid>-<hex> --collect \\
        -p MemoryAccounting=yes -p MemoryMax=<bytes> -p MemorySwapMax=0 \\
        -p IOAccounting=yes -p 'IOReadBandwidthMax=/dev/block/7:0 <bps>' ... -- cat

and keeps the scope open with a placeholder process. The scope's cgroup
directories are then read from the placeholder's ``/proc/<pid>/cgroup`` and
adopted as an iolab :class:`~iolab.isolation.cgroups.Group`
(:meth:`~iolab.isolation.cgroups.Group.adopt`), so putting fio in, peak memory, page
cache, OOM kills and ``describe()`` work as for groups iolab makes itself.

Properties, by the cgroup version serving the controller:

* v2: ``MemoryMax=`` + ``MemorySwapMax=0``; ``IOReadBandwidthMax=``,
  ``IOWriteBandwidthMax=``, ``IOReadIOPSMax=``, ``IOWriteIOPSMax=``
  (``<device node> <value>``).
* v1 (systemd in legacy or hybrid mode): ``MemoryLimit=``;
  ``BlockIOReadBandwidth=``, ``BlockIOWriteBandwidth=``. systemd has no v1
  property for the memory+swap limit or for IOPS limits, so iolab writes
  ``memory.memsw.limit_in_bytes`` and ``blkio.throttle.*_iops_device`` of the
  scope itself (files systemd never writes) and says so in the group's notes.
* always ``MemoryAccounting=yes`` / ``IOAccounting=yes`` (v1
  ``BlockIOAccounting=yes``), so that systemd gives the scope its own group in
  the controller even when only a limit it cannot express is wanted.

``MemoryHigh`` is never used (it throttles the task and distorts latency).
Nothing is taken on trust: after the scope starts, the limits are read back
from the scope's cgroup files and a limit that is not in force is an
:class:`IolabError`.

The placeholder is ``cat`` reading a pipe that only iolab holds, started
without a shell and in its own session (a Ctrl-C at the terminal does not
reach it; iolab's clean-up stops it). When iolab exits -- even killed -- the
pipe closes, ``cat`` ends, and with ``--collect`` systemd removes the empty
scope. :meth:`Scope.stop` closes the pipe, waits until the cgroup is gone and,
if stray tasks keep it, runs ``systemctl stop <unit>``.

Which backend (:func:`choose_backend`): ``IOLAB_CGROUP_BACKEND`` =
``systemd`` (always; a failure is an error), ``cgroupfs`` (never), or
``auto``/unset: systemd where it manages cgroups. In ``auto`` a failing
``systemd-run`` falls back to writing cgroupfs directly, with a warning and
the reason recorded (see :mod:`iolab.isolation.sandbox`).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import signal
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

from iolab.isolation import cgroupfs, cgroups
from iolab.core import ownership, processes, procstat
from iolab.isolation.cgroups import Group, Throttle
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.isolation.systemctl import ENV, stop_unit, which as _which  # noqa: F401  (stop_unit: part of this module's interface)

log = logging.getLogger(__name__)

BACKENDS = ("auto", "systemd", "cgroupfs")

#: how long systemd-run may take to start the scope and exec the placeholder
START_TIMEOUT = 15.0
#: after the placeholder ended, how long to wait for systemd to collect the scope
#: before ``systemctl stop`` ends whatever still keeps it
STOP_GRACE = 2.0

PAGE = os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------- which backend

@dataclasses.dataclass(frozen=True)
class Choice:
    backend: str      # "systemd" or "cgroupfs"
    why: str
    forced: bool      # named in IOLAB_CGROUP_BACKEND: a failure must not fall back

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def choose_backend(environ=None) -> Choice:
    """The cgroup backend for this run: ``IOLAB_CGROUP_BACKEND``, else systemd where it manages cgroups."""
    environ = os.environ if environ is None else environ
    value = (environ.get(ENV) or "auto").strip().lower()
    if value not in BACKENDS:
        raise IolabError(f"unknown cgroup backend {value!r}", context=ENV, hint=f"use one of {', '.join(BACKENDS)}")
    if value != "auto":
        return Choice(value, f"{ENV}={value}", True)
    if cgroups.systemd_managed():
        return Choice("systemd", "systemd manages cgroups (/run/systemd/system exists)", False)
    return Choice("cgroupfs", "systemd does not manage cgroups here (no /run/systemd/system)", False)


# --------------------------------------------------------------------------- the command

def device_path(devnum: str) -> str:
    """A device node for ``MAJ:MIN`` that systemd's IO properties accept (they take paths)."""
    by_number = Path("/dev/block") / devnum
    if by_number.exists():
        return str(by_number)
    try:
        uevent = Path(f"/sys/dev/block/{devnum}/uevent").read_text()
    except OSError:
        raise IolabError(f"no block device {devnum}", context="systemd-run IO properties") from None
    for line in uevent.splitlines():
        key, _, value = line.partition("=")
        if key == "DEVNAME":
            node = Path("/dev") / value
            try:
                st = node.stat()
            except OSError:
                break
            if stat.S_ISBLK(st.st_mode) and f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" == devnum:
                return str(node)
            break
    raise IolabError(f"no device node for block device {devnum} (neither /dev/block/{devnum} nor /dev/<DEVNAME>)",
                     context="systemd-run IO properties")


def scope_properties(memory_version: str | None, io_version: str | None, *, memory_limit: int | None,
                     throttles: Iterable[Throttle] = (), device_path=device_path) -> list[str]:
    """The ``KEY=VALUE`` properties for the scope (each goes after a ``-p``).

    ``memory_version``/``io_version``: ``"v1"`` or ``"v2"`` for the hierarchy
    serving the controller, None when the scope does not need it.
    """
    props: list[str] = []
    if memory_version is not None:
        props.append("MemoryAccounting=yes")
        if memory_limit is not None:
            if memory_version == "v2":
                props += [f"MemoryMax={int(memory_limit)}", "MemorySwapMax=0"]
            else:
                props.append(f"MemoryLimit={int(memory_limit)}")
    if io_version is not None:
        props.append("IOAccounting=yes" if io_version == "v2" else "BlockIOAccounting=yes")
        for t in throttles:
            node = device_path(t.device)
            if io_version == "v2":
                fields = {"IOReadBandwidthMax": t.read_bps, "IOWriteBandwidthMax": t.write_bps,
                          "IOReadIOPSMax": t.read_iops, "IOWriteIOPSMax": t.write_iops}
            else:  # systemd has no v1 IOPS property: iolab writes those files itself
                fields = {"BlockIOReadBandwidth": t.read_bps, "BlockIOWriteBandwidth": t.write_bps}
            props += [f"{key}={node} {int(value)}" for key, value in fields.items() if value is not None]
    return props


# --------------------------------------------------------------------------- the scope

class Scope:
    """One transient ``iolab-<pid>-<hex>.scope`` held open by a placeholder process.

    :meth:`start` returns the adopted :class:`~iolab.isolation.cgroups.Group` with the
    limits read back; ``group.remove()`` (or :meth:`stop`) ends the scope and
    waits until its cgroup is gone.
    """

    def __init__(self, controllers: Iterable[str], *, memory_limit: int | None = None,
                 throttles: Iterable[Throttle] = (), layout: cgroups.Layout | None = None,
                 name: str | None = None):
        self.controllers = list(dict.fromkeys(cgroupfs.logical(c) for c in controllers))
        if not self.controllers:
            raise IolabError("a scope needs at least one controller", context="systemd-run")
        self.memory_limit = None if memory_limit is None else int(memory_limit)
        if self.memory_limit is not None and "memory" not in self.controllers:
            raise IolabError("a memory limit needs the memory controller", context="systemd-run")
        self.throttles = [Throttle.coerce(t) for t in throttles]
        if self.throttles and "io" not in self.controllers:
            raise IolabError("throttles need the io controller", context="systemd-run")
        self.layout = layout or cgroups.detect()
        self.versions: dict[str, str] = {}
        for c in self.controllers:
            found = self.layout.locate(c)
            if found is None:
                raise IolabError(f"no {c} controller on this machine (cgroup {self.layout.version})",
                                 context="systemd-run")
            self.versions[c] = found[0]
        base = name or f"{cgroups.PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.unit = base if base.endswith(cgroups.SCOPE_SUFFIX) else base + cgroups.SCOPE_SUFFIX
        self.properties = scope_properties(self.versions.get("memory"), self.versions.get("io"),
                                           memory_limit=self.memory_limit, throttles=self.throttles)
        self.placeholder = [_which("cat")]
        self.argv = [_which("systemd-run"), "--scope", f"--unit={self.unit[:-len(cgroups.SCOPE_SUFFIX)]}",
                     "--collect"]
        for prop in self.properties:
            self.argv += ["-p", prop]
        self.argv += ["--", *self.placeholder]
        self.proc: subprocess.Popen | None = None
        self.group: Group | None = None
        self.dirs: dict = {}
        self.stopped_by: str | None = None
        self._stderr = None

    @property
    def backend(self) -> str:
        return f"systemd-run scope {self.unit}"

    # ---- start
    def start(self) -> Group:
        """Start the scope, adopt its cgroup and check the limits; undone on any failure (and Ctrl-C)."""
        log.info("starting %s: %s", self.unit, " ".join(self.argv))
        self._stderr = tempfile.TemporaryFile()
        ownership.record("scope", self.unit, undo=f"systemctl stop {self.unit}", dirs=[])
        try:
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                             stderr=self._stderr, close_fds=True, start_new_session=True)
            except OSError as exc:
                raise IolabError(f"cannot start: {exc.strerror}", context=self.argv[0]) from None
            self._wait_for_placeholder()
            self.dirs = cgroups.dirs_of_pid(self.proc.pid, self.controllers, layout=self.layout)
            self.group = Group.adopt(self.unit, self.dirs, backend=self.backend, release=self.stop,
                                     details={"systemd_run": list(self.argv), "unit": self.unit,
                                              "placeholder": list(self.placeholder),
                                              "placeholder_pid": self.proc.pid})
            ownership.record("scope", self.unit, undo=f"systemctl stop {self.unit}",
                             dirs=[str(d) for _, d in dict.fromkeys(self.dirs.values()) if d.name == self.unit],
                             placeholder_pid=self.proc.pid)
            self._check_limits(self.group)
        except BaseException:
            try:
                self.stop()
            except IolabError as exc:
                log.error("%s", exc)
            raise
        return self.group

    def _output(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def _wait_for_placeholder(self) -> None:
        """Until systemd-run has put itself in the scope and exec'd the placeholder."""
        def started() -> bool:
            if self.proc.poll() is not None:
                last = ([ln for ln in self._output().splitlines() if ln.strip()] or ["no output"])[-1]
                raise IolabError(f"systemd-run exited with {self.proc.returncode}: {last}", context=self.unit,
                                 hint=f"set {ENV}=cgroupfs to write cgroupfs directly")
            return procstat.argv_of(self.proc.pid) == [str(a) for a in self.placeholder]
        wait_until(started, START_TIMEOUT, interval=0.01, what="systemd-run to start the scope", context=self.unit)

    def _check_limits(self, group: Group) -> None:
        """Read back what systemd was asked for; do what it cannot (v1 swap and IOPS)."""
        read_back: dict = {}
        if self.memory_limit is not None:
            nbytes = self.memory_limit
            shown = group.memory_limit_in_force()
            read_back["memory"] = {k: shown[k] for k in ("limit", "swap")}
            limit_file, swap_file = shown["files"]
            # the kernel keeps whole pages
            if shown["limit"] is None or not nbytes - PAGE < shown["limit"] <= nbytes:
                raise IolabError(f"systemd-run was asked for a memory limit of {nbytes} but {limit_file} "
                                 f"shows {shown['limit'] if shown['limit'] is not None else 'no limit'}: "
                                 "the limit is not in force", context=self.unit)
            if self.versions["memory"] == "v2":
                if not shown["swap_file"]:
                    group.notes.append("memory.swap.max absent (no swap accounting): swap not limited")
                elif shown["swap"] != 0:
                    raise IolabError(f"systemd-run was asked for MemorySwapMax=0 but {swap_file} shows "
                                     f"{shown['swap'] if shown['swap'] is not None else 'max'}", context=self.unit)
            elif shown["swap_file"]:
                cgroupfs.write(Path(swap_file), nbytes)
                got = cgroupfs.read_int(Path(swap_file))
                if got is None or got > nbytes:
                    raise IolabError(f"the kernel did not take the memory+swap limit {nbytes} (reads {got})",
                                     context=swap_file)
                read_back["memory"]["swap"] = got
                group.notes.append("memory.memsw.limit_in_bytes written by iolab: systemd has no "
                                   "cgroup-v1 property for the memory+swap limit")
            else:
                group.notes.append("memory.memsw.limit_in_bytes absent (no swap accounting): swap not limited")
            group.memory_limit = nbytes
        for t in self.throttles:
            asked = ({"read_bps": t.read_bps, "write_bps": t.write_bps, "read_iops": t.read_iops,
                      "write_iops": t.write_iops} if self.versions["io"] == "v2"
                     else {"read_bps": t.read_bps, "write_bps": t.write_bps})
            shown = group.throttle_in_force(t.device)
            wrong = {k: (v, shown[k]) for k, v in asked.items() if v is not None and shown[k] != int(v)}
            if wrong:
                raise IolabError(f"systemd-run was asked for {t.device} limits that the kernel does not show: "
                                 + ", ".join(f"{k} {v} (shows {s})" for k, (v, s) in wrong.items()),
                                 context=self.unit)
            if self.versions["io"] == "v1" and (t.read_iops is not None or t.write_iops is not None):
                for field in ("read_iops", "write_iops"):
                    value = getattr(t, field)
                    if value is None:
                        continue
                    path = group.path("io") / f"blkio.throttle.{field}_device"
                    cgroupfs.write(path, f"{t.device} {int(value)}")
                group.notes.append(f"IOPS limits for {t.device} written by iolab: systemd has no "
                                   "cgroup-v1 IOPS property")
                shown = group.throttle_in_force(t.device)
                wrong = {k: (getattr(t, k), shown[k]) for k in ("read_iops", "write_iops")
                         if getattr(t, k) is not None and shown[k] != int(getattr(t, k))}
                if wrong:
                    raise IolabError(f"the kernel does not show the IOPS limits for {t.device}: {wrong}",
                                     context=str(group.path("io")))
            read_back[t.device] = shown
            group.throttles.append(t)
        group.details["read_back"] = read_back
        log.info("scope %s: limits in force %s", self.unit, read_back)

    # ---- stop
    def _left(self) -> list[Path]:
        # only the scope's own directories (a controller systemd did not enable shows the parent's)
        return [d for _, d in dict.fromkeys(self.dirs.values()) if d.name == self.unit and d.exists()]

    def _wait_gone(self, seconds: float) -> bool:
        return wait_until(lambda: not self._left(), seconds, interval=0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """End the placeholder, wait until the scope's cgroup is gone (``systemctl stop`` if needed).

        Idempotent. Raises :class:`IolabError` when the cgroup stays.
        """
        proc = self.proc
        if proc is not None and proc.returncode is None:  # cat sees the end of its input and exits
            processes.end(proc, first=[("close stdin", proc.stdin.close) if proc.stdin else None, signal.SIGTERM],
                          grace=2)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if not self.dirs or self.stopped_by is not None and not self._left():
            ownership.forget("scope", self.unit)
            return
        if self._wait_gone(STOP_GRACE):
            self.stopped_by = "placeholder exit"
        else:
            busy = {str(d): (cgroupfs.read(d / "cgroup.procs") or "").split() for d in self._left()}
            log.warning("scope %s is still there %.1f s after its placeholder ended (tasks: %s): systemctl stop",
                        self.unit, STOP_GRACE, busy)
            stop_unit(self.unit, timeout=timeout)
            self.stopped_by = "systemctl stop"
            if not self._wait_gone(timeout):
                raise IolabError(f"the scope's cgroup is still there after systemctl stop: "
                                 f"{', '.join(map(str, self._left()))}", context=self.unit,
                                 hint=f"systemctl stop {self.unit}; systemctl status {self.unit}")
        if self.group is not None:
            self.group.details["stopped_by"] = self.stopped_by
        ownership.forget("scope", self.unit)
        log.info("scope %s gone (%s)", self.unit, self.stopped_by)


def undo_stale(unit: str, dirs: Iterable[str], *, dry_run: bool) -> str | None:
    """End a scope whose iolab process is gone: ``systemctl stop`` where systemd manages cgroups.

    Elsewhere (a scope left by a stand-in, or systemd gone meanwhile) its
    directories are removed like any stale iolab group.
    """
    present = [d for d in dirs if Path(d).is_dir()]
    if not present:
        return None
    if not cgroups.systemd_managed():
        return cgroups.undo_stale(unit, present, dry_run=dry_run)
    if dry_run:
        return f"would stop scope {unit} (systemctl stop)"
    stop_unit(unit)
    left = lambda: [d for d in present if Path(d).exists()]  # noqa: E731
    wait_until(lambda: not left(), STOP_GRACE + 10, context=unit,
               what=lambda: f"the scope to go after systemctl stop ({', '.join(left())})")
    return f"stopped scope {unit}"
