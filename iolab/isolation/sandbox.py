"""Cache isolation: "mem=512M without a reboot", and the evidence that it worked.

A run opens one sandbox::

    with open_sandbox("cgroup", mem_limit="512M", throttles=device.throttles) as box:
        for test in tests:
            box.prepare_test()                  # sync, drop caches (checked), reset peaks
            proc = box.popen(["fio", ...])      # fio starts inside the cgroups
            proc.wait()
            evidence = box.test_evidence()      # peak memory, page cache, OOM kills
        manifest["isolation"] = box.describe()

Modes (:data:`MODES`):

``cgroup``
    fio runs in a memory cgroup with a hard limit (v2 ``memory.max`` +
    ``memory.swap.max=0``; v1 ``memory.limit_in_bytes`` +
    ``memory.memsw.limit_in_bytes``), never ``memory.high``; with buffered tests the
    machine's dirty-page limits are scaled to the memory limit meanwhile
    (:mod:`iolab.isolation.dirtylimits`). Page cache is
    charged to the group that first reads a page, so :meth:`Sandbox.prepare_test`
    drops the caches first, and test files should be laid out by a process
    started with :meth:`Sandbox.popen`.
``hugepages``
    System-wide, closest to booting with ``mem=``: RAM beyond the limit is
    locked away as 2 MiB huge pages (``vm.nr_hugepages``), so the page cache
    cannot grow into it. The number of pages the kernel really reserved is
    checked, and the previous value is always restored. See
    :func:`hugepage_plan` for the safety margin.
``direct``
    Nothing to set up; the tests must use O_DIRECT (what CrystalDiskMark,
    KDiskMark and GNOME Disks do). Caches are still dropped before each test
    (as root), so file-system metadata starts cold as in the other modes.
``none``
    Deliberately cached: nothing is dropped or limited (to show the effect).

Who makes the cgroups (:func:`iolab.isolation.systemd_scope.choose_backend`): where
systemd manages cgroups, a transient scope from ``systemd-run --scope``
(:mod:`iolab.isolation.systemd_scope`), adopted as an iolab group after its limits are
read back; elsewhere, or with ``IOLAB_CGROUP_BACKEND=cgroupfs``, iolab writes
cgroupfs itself. ``IOLAB_CGROUP_BACKEND=systemd`` insists on the scope (a
failure of ``systemd-run`` is an error); without it a failing ``systemd-run``
falls back to cgroupfs with a warning. :meth:`Sandbox.describe` records the
backend (``cgroup_backend``, and the exact ``systemd_run`` command in the
group's record).

Fallback: when the requested mode cannot be had (not root, no memory cgroup,
no huge pages) the sandbox falls back to ``direct`` **only** if the caller
says its tests can run with O_DIRECT (``buffered=False`` or ``direct_ok=True``),
with a logged warning and the reason in :attr:`Sandbox.fallback` and
:meth:`Sandbox.describe`; otherwise it raises :class:`IolabError`.

Throttles (emulated devices) apply in every mode: fio is started in a block
cgroup carrying them. With throttles the sandbox also keeps a small pool of
huge pages (``buffer_hugepages``) for fio's I/O buffers (``iomem=mmaphuge``,
see :data:`iolab.devices.emulated.FIO_OPTIONS`): blk-throttle counts IOPS per bio
*after* the loop device splits a request, and an O_DIRECT request from
scattered 4 KiB pages is split every 128 segments (512 KiB), which would make
an HDD-like 150 IOPS limit cap 1 MiB streaming at 79 MB/s. Physically
contiguous buffers keep a 1 MiB request one I/O.

Huge page reservations are made as increments under a lock
(``hugepages.lock`` in the root-only ``/run/iolab``) and given back as the same decrement,
so concurrent iolab runs on one machine do not undo each other's pages; when
nobody else changed the pool, ``nr_hugepages`` is back at its previous value.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import subprocess
from typing import Iterable, Iterator

from iolab.isolation import cgroups, confine, dirtylimits, systemd_scope
from iolab.isolation.cgroups import Group, Throttle
from iolab.core import processes
from iolab.core.errors import IolabError
from iolab.core.units import human_size, parse_size
from iolab.isolation.cache import drop_caches, flag_cache_suspect, meminfo, vmstat  # noqa: F401 (flag_cache_suspect: callers import it from here)
from iolab.isolation.hugepages import (BUFFER_HUGEPAGES, SHORT_TOLERANCE_FRACTION, SHORT_TOLERANCE_PAGES,
                                       HugePagePool, hugepage_plan)

log = logging.getLogger(__name__)

MODES = ("cgroup", "hugepages", "direct", "none")
DEFAULT_MEM_LIMIT = 512 * 1024**2


# --------------------------------------------------------------------------- the sandbox

class Sandbox:
    """The isolation in force for one run; made by :func:`open_sandbox`."""

    def __init__(self, requested: str, *, mem_limit: int, throttles: list[Throttle], buffered: bool,
                 direct_ok: bool, hugepages_bytes: int | None, buffer_hugepages: int):
        self.requested = requested
        self.mode = requested
        self.fallback: str | None = None
        self.mem_limit = mem_limit
        self.throttles = throttles
        self.buffered = buffered
        self.direct_ok = direct_ok
        self.hugepages_bytes = hugepages_bytes
        self.buffer_hugepages = buffer_hugepages
        self.root = os.geteuid() == 0
        self.group: Group | None = None        # memory (and io) in cgroup mode
        self.io_group: Group | None = None     # the group carrying the throttles
        self.hugepages: dict | None = None          # the hugepages-mode reservation
        self.buffer_pages: dict | None = None       # pages kept for fio's I/O buffers
        self.layout: cgroups.Layout | None = None
        self.cgroup_backend: dict | None = None     # which backend made the groups, and any fallback
        self.dirty_limits: dict | None = None       # vm.dirty_* scaled to the memory limit (cgroup mode)
        self._pool = HugePagePool()
        self._children: list[subprocess.Popen] = []
        self._prepared: list[dict] = []
        self._oom_baseline = 0
        self._global_oom_baseline: int | None = None
        self._closed = False

    # ---- set-up
    def _start(self) -> None:
        if self.throttles:
            if not self.root:
                raise IolabError("device throttles (emulated devices) need root", context="isolation")
        with contextlib.suppress(IolabError):
            self.layout = cgroups.detect()
        if self.mode == "cgroup":
            self._start_cgroup()
        elif self.mode == "hugepages":
            self._start_hugepages()
        if self.throttles and self.io_group is None:
            self.io_group = self._new_group(["io"])
            if not self.io_group.adopted:
                for throttle in self.throttles:
                    self.io_group.throttle(throttle)
        if self.throttles and self.buffer_hugepages:
            self._reserve_buffer_pages()
        log.info("isolation %s in force%s", self.mode, f" (fallback: {self.fallback})" if self.fallback else "")

    def _fall_back(self, reason: str) -> None:
        if not self.direct_ok:
            raise IolabError(
                f"cannot isolate the page cache with {self.requested!r}: {reason}",
                context="isolation",
                hint="run as root, or choose --isolation direct for O_DIRECT tests "
                     "(iolab never downgrades buffered tests silently)")
        log.warning("isolation %s not available (%s): falling back to direct (O_DIRECT) I/O",
                    self.requested, reason)
        self.mode = "direct"
        self.fallback = reason

    def _start_cgroup(self) -> None:
        if not self.root:
            self._fall_back("not root: a memory cgroup and dropping caches need root")
            return
        controllers = ["memory"] + (["io"] if self.throttles else [])
        try:
            group = self._new_group(controllers, mem_limit=self.mem_limit)
        except IolabError as exc:
            self._fall_back(f"cannot make the cgroup: {exc}")
            return
        self.group = group
        if self.throttles:
            self.io_group = group
        if not group.adopted:  # a systemd scope comes with its limits, already read back
            group.set_memory_limit(self.mem_limit)
            for throttle in self.throttles:
                group.throttle(throttle)
        if self.buffered:  # the dirty limits a mem= boot would have (restored on close, in the ledger)
            self.dirty_limits = dirtylimits.hold(self.mem_limit)

    def _new_group(self, controllers: list[str], *, mem_limit: int | None = None) -> Group:
        """A group from the chosen backend: a systemd scope (limits applied and read back) or cgroupfs (bare)."""
        choice = systemd_scope.choose_backend()
        record = {**choice.as_dict(), "fallback": None}
        self.cgroup_backend = record
        if choice.backend == "systemd":
            try:
                scope = systemd_scope.Scope(controllers, memory_limit=mem_limit,
                                            throttles=self.throttles if "io" in controllers else (),
                                            layout=self.layout)
                return scope.start()
            except IolabError as exc:
                if choice.forced:
                    raise
                record.update(backend="cgroupfs", fallback=f"systemd-run failed: {exc}")
                log.warning("cannot make the cgroup through systemd-run (%s): writing cgroupfs directly", exc)
        return Group.create(controllers, layout=self.layout)

    def _start_hugepages(self) -> None:
        if not self.root:
            self._fall_back("not root: reserving huge pages needs root")
            return
        pool = self._pool
        if not pool.path.exists():
            self._fall_back("this kernel has no huge pages (no /proc/sys/vm/nr_hugepages)")
            return
        first_drop = drop_caches()  # the page cache out of the way, so the pages can be had
        page = pool.page_size
        if self.hugepages_bytes is not None:
            plan = {"reserve_bytes": self.hugepages_bytes, "pages": self.hugepages_bytes // page,
                    "page_size": page, "explicit": True}
        else:
            plan = hugepage_plan(self.mem_limit, page_size=page)
        asked = int(plan["pages"])
        # recorded before the write so that cleanup gives pages back even after Ctrl-C mid-way
        self.hugepages = {"asked_pages": asked, "page_size": page, "plan": plan, "reserved_pages": 0,
                          "released": None, "drop_caches_before": first_drop}
        try:
            before, after = pool.add(asked)
        except BaseException:
            self.hugepages["reserved_pages"] = getattr(pool, "last_added", 0)
            raise
        got = max(0, after - before)
        self.hugepages.update(previous=before, reserved_pages=got, reserved_bytes=got * page,
                              nr_hugepages=after, mem_available_after=meminfo().get("MemAvailable"))
        tolerance = max(SHORT_TOLERANCE_PAGES, math.ceil(asked * SHORT_TOLERANCE_FRACTION))
        self.hugepages["tolerance_pages"] = tolerance
        log.info("huge pages: asked %d, reserved %d (%s); nr_hugepages %d -> %d", asked, got,
                 human_size(got * page), before, after)
        if asked - got > tolerance:
            reason = (f"the kernel reserved only {got} of {asked} huge pages "
                      f"({human_size(got * page)} of {human_size(asked * page)}): not enough free memory")
            self.hugepages["refused"] = reason
            self._release(self.hugepages)
            self._fall_back(reason)
        elif asked == 0:
            self.hugepages["note"] = "nothing to reserve: the memory left is already within mem_limit"

    def _reserve_buffer_pages(self) -> None:
        """Huge pages for fio's I/O buffers (``iomem=mmaphuge``) on throttled devices."""
        if not self._pool.path.exists():
            log.warning("no huge pages on this kernel: large O_DIRECT requests on emulated devices "
                        "are split at 512 KiB and count as several I/Os")
            return
        self.buffer_pages = {"asked_pages": self.buffer_hugepages, "reserved_pages": 0, "released": None,
                             "purpose": "fio I/O buffers (iomem=mmaphuge) on throttled devices"}
        try:
            before, after = self._pool.add(self.buffer_hugepages)
        except BaseException:
            self.buffer_pages["reserved_pages"] = getattr(self._pool, "last_added", 0)
            raise
        got = max(0, after - before)
        self.buffer_pages.update(reserved_pages=got, nr_hugepages=after)
        if got < self.buffer_hugepages:
            log.warning("only %d of %d huge pages for fio's buffers: jobs with iomem=mmaphuge may fail",
                        got, self.buffer_hugepages)

    def _release(self, record: dict | None) -> None:
        """Give back what a reservation got, and check the pool shrank by that much."""
        if not record or record.get("released") is not None:
            return
        pages = record.get("reserved_pages") or 0
        before, after = self._pool.release(pages)
        record["released"] = pages
        record["nr_hugepages_after"] = after
        if after != max(0, before - pages):
            raise IolabError(f"nr_hugepages is {after} after giving back {pages} of {before} "
                             f"(pages still in use?)", context=str(self._pool.path))
        log.info("huge pages given back: %d (nr_hugepages %d -> %d)", pages, before, after)

    # ---- per test
    def prepare_test(self) -> dict:
        """Before each test: ``sync``, drop caches (checked), reset peak counters.

        Returns the record (also kept for :meth:`describe`). In ``none`` mode
        nothing is done, and that is recorded.
        """
        if self.mode == "none":
            record = {"drop_caches": False, "note": "isolation none: caches deliberately kept"}
        else:
            record = {"drop_caches": True, **drop_caches()}
            if not record["written"] and self.mode in ("cgroup", "hugepages"):
                raise IolabError(f"cannot drop caches: {record.get('error')}", context="isolation",
                                 hint="the test files would be read from the page cache")
        if self.group is not None:
            record["peak_reset"] = self.group.reset_peak()
            self._oom_baseline = self.group.oom_kills()
        self._global_oom_baseline = vmstat("oom_kill")
        self._prepared.append(record)
        return record

    def popen(self, argv: list[str], *, confinement=None, **kwargs) -> subprocess.Popen:
        """Start ``argv`` (a list; never a shell) inside the sandbox's cgroups.

        The child writes its own pid into the memory cgroup (``cgroup`` mode)
        and the throttled block cgroup (when there are throttles) before it
        execs, so not one page or I/O escapes; placement is checked afterwards.
        With a ``confinement`` (:class:`iolab.isolation.confine.Confinement`)
        ``argv`` runs under bubblewrap, which enters the cgroups and passes them on.
        """
        if isinstance(argv, (str, bytes)) or kwargs.get("shell"):
            raise IolabError("popen takes an argument list and never runs a shell", context="isolation")
        argv = [str(a) for a in argv]
        popen_class = subprocess.Popen
        if confinement is not None:
            argv = confinement.wrap(argv)
            popen_class = confine.ConfinedProcess
            kwargs.update(confine.popen_kwargs())
        groups = []
        if self.mode == "cgroup" and self.group is not None:
            groups.append(self.group)
        if self.io_group is not None and self.io_group not in groups:
            groups.append(self.io_group)
        procs = list(dict.fromkeys(p for g in groups for p in g.procs_files()))
        paths = [os.fsencode(str(p)) for p in procs]
        user_preexec = kwargs.pop("preexec_fn", None)

        def enter_cgroups():  # runs in the child between fork and exec: no logging here
            pid = str(os.getpid()).encode()
            for path in paths:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            if user_preexec is not None:
                user_preexec()

        try:
            proc = popen_class(argv, preexec_fn=enter_cgroups if (paths or user_preexec) else None, **kwargs)
        except subprocess.SubprocessError as exc:
            raise IolabError(f"could not start the process inside {', '.join(map(str, procs))}: {exc}",
                             context=argv[0]) from None
        except OSError as exc:
            raise IolabError(f"cannot start: {exc.strerror}", context=argv[0]) from None
        self._children.append(proc)
        # check the side effect (a child that already exited has nothing left to check)
        for group in groups:
            if proc.poll() is None and not group.contains(proc.pid) and proc.poll() is None:
                processes.end(proc, first=[])
                raise IolabError(f"the process did not land in cgroup {group.name}", context=argv[0])
        log.debug("started %s (pid %d) in %s", argv[0], proc.pid, [g.name for g in groups])
        return proc

    def test_evidence(self) -> dict:
        """After a test: peak memory and page cache of the cgroup, and OOM kills."""
        evidence = {"mode": self.mode, "cg_peak_bytes": None, "cg_cache_bytes": None,
                    "cg_limit_bytes": None, "oom_killed": False, "oom_reason": None}
        if self._prepared:
            last = self._prepared[-1]
            evidence["drop_caches_verified"] = last.get("verified") if last.get("drop_caches") else None
        if self.group is not None:
            kills = self.group.oom_kills() - self._oom_baseline
            evidence.update(cg_peak_bytes=self.group.memory_peak(), cg_cache_bytes=self.group.page_cache(),
                            cg_limit_bytes=self.mem_limit, cg_oom_kills=kills)
            if kills > 0:
                evidence["oom_killed"] = True
                evidence["oom_reason"] = (
                    f"the OOM killer killed {kills} task(s) in memory cgroup {self.group.name} "
                    f"(limit {human_size(self.mem_limit)}): the test needs more memory than the limit")
        else:
            now = vmstat("oom_kill")
            killed = [p for p in self._children if p.returncode == -signal.SIGKILL]
            if now is not None and self._global_oom_baseline is not None and now > self._global_oom_baseline \
                    and killed:
                evidence["oom_killed"] = True
                evidence["oom_reason"] = (f"a process was killed by SIGKILL while the kernel's OOM killer "
                                          f"ran {now - self._global_oom_baseline} time(s) (mode {self.mode})")
        return evidence

    flag_cache_suspect = staticmethod(flag_cache_suspect)

    def describe(self) -> dict:
        """Provenance for the run manifest: what was asked, what was in force, and the checks.

        The huge-page records are the sandbox's own dicts: they gain ``released``
        (pages given back) and ``nr_hugepages_after`` when the sandbox closes, so
        keep the returned mapping and save it again after the ``with`` block.
        """
        drops = [r for r in self._prepared if r.get("drop_caches")]
        info = {
            "mode": self.mode,
            "requested": self.requested,
            "fallback": self.fallback,
            "mem_limit": self.mem_limit,
            "buffered": self.buffered,
            "direct_ok": self.direct_ok,
            "root": self.root,
            "cgroup_layout": self.layout.version if self.layout else None,
            "systemd_managed": cgroups.systemd_managed(),
            "cgroup_backend": dict(self.cgroup_backend) if self.cgroup_backend else None,
            "cgroup": self.group.describe() if self.group else None,
            "io_cgroup": self.io_group.describe() if self.io_group else None,
            "throttles": [t.as_dict() for t in self.throttles],
            # the live records, not copies: a manifest saved after the sandbox closed
            # (the run's final status) shows how many pages were ``released``
            "hugepages": self.hugepages,
            "buffer_hugepages": self.buffer_pages,
            "dirty_limits": self.dirty_limits,  # live too: gains ``restored`` when the sandbox closes
            "drop_caches": {
                "tests": len(self._prepared),
                "dropped": len(drops),
                "all_verified": all(r.get("verified") for r in drops) if drops else None,
                "last": self._prepared[-1] if self._prepared else None,
            },
        }
        return info

    # ---- tear-down
    def _close(self, *, quiet: bool) -> None:
        if self._closed:
            return
        self._closed = True
        errors: list[str] = []
        for proc in self._children:
            if proc.poll() is None:
                log.warning("stopping %s (pid %d) still running at sandbox exit", proc.args[0], proc.pid)
                processes.end(proc, grace=3)
        for group in dict.fromkeys(g for g in (self.group, self.io_group) if g is not None):
            try:
                group.remove()
            except IolabError as exc:
                errors.append(str(exc))
        for record in (self.buffer_pages, self.hugepages):
            try:
                self._release(record)
            except IolabError as exc:
                errors.append(str(exc))
        try:
            dirtylimits.release(self.dirty_limits)
        except IolabError as exc:
            errors.append(str(exc))
        if errors:
            message = "; ".join(errors)
            if quiet:
                log.error("isolation cleanup: %s", message)
            else:
                raise IolabError(message, context="isolation cleanup")


@contextlib.contextmanager
def open_sandbox(mode: str | None = "cgroup", *, mem_limit: int | str = DEFAULT_MEM_LIMIT,
                 throttles: Iterable[Throttle | dict] = (), buffered: bool = True,
                 direct_ok: bool | None = None, hugepages_bytes: int | str | None = None,
                 buffer_hugepages: int | None = None) -> Iterator[Sandbox]:
    """Set up cache isolation ``mode`` for a run; everything is undone on exit.

    ``mem_limit``: bytes or a size (``"512M"``). ``throttles``: block device
    limits (:class:`iolab.isolation.cgroups.Throttle` or dicts), applied in every mode.
    ``buffered``: the tests use the page cache (then a fallback to ``direct``
    needs ``direct_ok=True``; with ``buffered=False`` it is allowed).
    ``hugepages_bytes``: reserve exactly this much in ``hugepages`` mode
    instead of :func:`hugepage_plan` (tests, careful users).
    ``buffer_hugepages``: huge pages kept for fio's I/O buffers while
    throttles are in force (default :data:`BUFFER_HUGEPAGES` with throttles,
    0 without): jobs on emulated devices use ``iomem=mmaphuge``.

    Clean-up (children still running are stopped, cgroups removed, huge pages
    given back) runs on normal exit, exceptions and Ctrl-C.
    """
    if mode is None:
        mode = "cgroup" if buffered else "direct"
    if mode not in MODES:
        raise IolabError(f"unknown isolation mode {mode!r}", context="isolation",
                         hint=f"choose one of {', '.join(MODES)}")
    limit = parse_size(DEFAULT_MEM_LIMIT if mem_limit is None else mem_limit, context="mem_limit")
    throttles = [Throttle.coerce(t) for t in throttles]
    sandbox = Sandbox(
        mode, mem_limit=limit, throttles=throttles, buffered=bool(buffered),
        direct_ok=(not buffered) if direct_ok is None else bool(direct_ok),
        hugepages_bytes=parse_size(hugepages_bytes, context="hugepages_bytes") if hugepages_bytes else None,
        buffer_hugepages=(BUFFER_HUGEPAGES if throttles else 0) if buffer_hugepages is None
        else int(buffer_hugepages))
    try:
        sandbox._start()
        yield sandbox
    except BaseException:
        sandbox._close(quiet=True)
        raise
    sandbox._close(quiet=False)
