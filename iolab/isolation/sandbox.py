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
    ``memory.memsw.limit_in_bytes``), never ``memory.high``. Page cache is
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
(``/run/lock/iolab-hugepages.lock``) and given back as the same decrement,
so concurrent iolab runs on one machine do not undo each other's pages; when
nobody else changed the pool, ``nr_hugepages`` is back at its previous value.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import math
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator

from iolab.isolation import cgroups, systemd_scope
from iolab.core import ownership
from iolab.isolation.cgroups import Group, Throttle
from iolab.core.errors import IolabError
from iolab.core.units import human_size, parse_size

log = logging.getLogger(__name__)

MODES = ("cgroup", "hugepages", "direct", "none")
DEFAULT_MEM_LIMIT = 512 * 1024**2

#: hugepages mode leaves this much beyond ``mem_limit`` and what is already in
#: use: max(HEADROOM_MIN, HEADROOM_MIN_FREE_FACTOR x vm.min_free_kbytes)
HEADROOM_MIN = 128 * 1024**2
HEADROOM_MIN_FREE_FACTOR = 4
#: a reservation short by more than max(pages, fraction) of what was asked is refused
SHORT_TOLERANCE_PAGES = 4
SHORT_TOLERANCE_FRACTION = 0.01

#: the droppable cache (Cached - Shmem) "fell" when it is at most half of what it
#: was, or below this floor (little was cached to begin with)
DROP_VERIFY_FLOOR = 256 * 1024**2

#: huge pages kept for fio's I/O buffers while throttles are in force (64 x 2 MiB:
#: e.g. 16 jobs x 4 pages for 1 MiB x QD8 each)
BUFFER_HUGEPAGES = 64

PROC = Path("/proc")

# huge pages this process added to the pool and has not given back yet
_outstanding_pages = 0


def outstanding_hugepages() -> int:
    """Huge pages this process reserved and has not released (0 after every sandbox closed)."""
    return _outstanding_pages


def _lock_dir() -> str:
    return "/run/lock" if os.access("/run/lock", os.W_OK) else tempfile.gettempdir()


def _holder_path(pid: int) -> str:
    return os.path.join(_lock_dir(), f"iolab-hugepages.{pid}")


def _mark_holder() -> None:
    """While this process holds pages, ``<lock dir>/iolab-hugepages.<pid>`` says how many.

    The same count goes to the ownership ledger (:mod:`iolab.core.ownership`, with
    the process start time), from which :mod:`iolab.engine.reaper` gives the pages
    of a process that died back to the pool. Called under the pool lock.
    """
    pid = os.getpid()
    path = _holder_path(pid)
    try:
        if _outstanding_pages > 0:
            ownership.record("hugepages", f"pid-{pid}", undo=f"nr_hugepages -= {_outstanding_pages}",
                             pages=_outstanding_pages, holder_file=path)
            with open(path, "w") as fh:
                fh.write(f"{_outstanding_pages}\n")
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            ownership.forget("hugepages", f"pid-{pid}")
    except OSError as exc:
        log.debug("huge page holder mark %s: %s", path, exc)


def _holder_files() -> dict[int, Path]:
    found = {}
    for path in Path(_lock_dir()).glob("iolab-hugepages.*"):
        suffix = path.name.rsplit(".", 1)[-1]
        if suffix.isdigit():
            found[int(suffix)] = path
    return found


def hugepage_holders() -> dict[int, int]:
    """Live iolab processes holding huge pages on this machine: ``{pid: pages}``.

    The mark of a process that died stays for :mod:`iolab.engine.reaper` (its pages
    are still in the pool, and the mark says how many).
    """
    holders = {}
    for pid, path in _holder_files().items():
        if not ownership.pid_alive(pid):
            continue
        with contextlib.suppress(OSError, ValueError):
            holders[pid] = int(path.read_text().strip() or 0)
    return holders


def stale_hugepage_marks() -> dict[int, int]:
    """``{pid: pages}`` from the holder marks of processes that are gone (crashed runs)."""
    stale = {}
    for pid, path in _holder_files().items():
        if ownership.pid_alive(pid):
            continue
        with contextlib.suppress(OSError, ValueError):
            stale[pid] = int(path.read_text().strip() or 0)
    return stale


def undo_stale_hugepages(pid: int, pages: int, *, dry_run: bool) -> str | None:
    """Give back the ``pages`` huge pages a dead iolab process ``pid`` added to the pool."""
    pool = HugePagePool()
    holder = Path(_holder_path(pid))
    if pages <= 0 or not pool.path.exists():
        with contextlib.suppress(FileNotFoundError):
            holder.unlink()
        return None
    if dry_run:
        return f"would give back {pages} huge pages of PID {pid} (nr_hugepages {pool.total()} -> " \
               f"{max(0, pool.total() - pages)})"
    with pool.locked():
        before = pool.total()
        after = pool.set_total(max(0, before - pages))
        with contextlib.suppress(FileNotFoundError):
            holder.unlink()
    if after != max(0, before - pages):
        raise IolabError(f"nr_hugepages is {after} after giving back {pages} of {before} huge pages of "
                         f"PID {pid} (pages still in use?)", context=str(pool.path))
    return f"gave back {pages} huge pages of PID {pid} (nr_hugepages {before} -> {after})"


# --------------------------------------------------------------------------- helpers

def flag_cache_suspect(fio_read_bytes: float, device_read_bytes: float, threshold: float = 0.5) -> bool:
    """True when the device served much less than fio read (``< threshold`` of it).

    Then the page cache (or some other cache above the device) answered the
    reads and the result measures memory, not storage.
    """
    try:
        fio_read_bytes = float(fio_read_bytes or 0)
        device_read_bytes = float(device_read_bytes or 0)
    except (TypeError, ValueError):
        return False
    if fio_read_bytes <= 0:
        return False
    return device_read_bytes < threshold * fio_read_bytes


def meminfo(proc: Path = PROC) -> dict[str, int]:
    """/proc/meminfo in bytes (``HugePages_*`` counts stay counts)."""
    out: dict[str, int] = {}
    for line in (proc / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        value = int(parts[0])
        out[key] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def _vmstat(key: str, proc: Path = PROC) -> int | None:
    try:
        for line in (proc / "vmstat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except OSError:
        pass
    return None


def _droppable(info: dict[str, int]) -> int:
    # Shmem (tmpfs, shared memory) is in Cached but cannot be dropped
    return max(0, info.get("Cached", 0) - info.get("Shmem", 0))


def drop_caches(*, proc: Path = PROC) -> dict:
    """``sync``, then write ``3`` to ``/proc/sys/vm/drop_caches`` and check it.

    The check: the kernel counts every page-cache drop in ``/proc/vmstat``
    (``drop_pagecache``); the count must have gone up. The droppable cache
    (Cached - Shmem) before and after is recorded too: it falls unless other
    processes are busy reading, which is worth a warning but is not a failure.
    Returns the record for the manifest; a refused write is recorded
    (``written: False``), not raised.
    """
    os.sync()
    before = meminfo(proc)
    count_before = _vmstat("drop_pagecache", proc)
    record = {"written": False, "cached_before": before.get("Cached"),
              "droppable_before": _droppable(before)}
    started = time.monotonic()
    try:
        fd = os.open(proc / "sys/vm/drop_caches", os.O_WRONLY)
        try:
            if os.write(fd, b"3") != 1:
                raise OSError(errno.EIO, "short write")
        finally:
            os.close(fd)
        record["written"] = True
    except OSError as exc:
        record["error"] = exc.strerror or str(exc)
    after = meminfo(proc)
    count_after = _vmstat("drop_pagecache", proc)
    record.update(cached_after=after.get("Cached"), droppable_after=_droppable(after),
                  seconds=round(time.monotonic() - started, 3))
    record["cache_fell"] = record["droppable_after"] <= max(record["droppable_before"] * 0.5, DROP_VERIFY_FLOOR)
    if count_before is not None and count_after is not None:
        record["kernel_drops"] = count_after - count_before
        record["verified"] = record["written"] and record["kernel_drops"] >= 1
    else:  # kernels without the counter: judge by the cache itself
        record["kernel_drops"] = None
        record["verified"] = record["written"] and record["cache_fell"]
    if not record["written"]:
        record["reason"] = f"write to /proc/sys/vm/drop_caches refused: {record['error']}"
    elif not record["verified"]:
        record["reason"] = "the kernel did not count a page-cache drop"
        log.warning("drop_caches: %s", record["reason"])
    elif not record["cache_fell"]:
        record["note"] = (f"page cache only fell from {human_size(record['droppable_before'])} to "
                          f"{human_size(record['droppable_after'])} (other processes reading, or files in use)")
        # the kernel counted the drop: what stays is mapped or busy, recorded but no alarm
        log.info("drop_caches: %s", record["note"])
    log.info("dropped caches: %s -> %s droppable", human_size(record["droppable_before"]),
             human_size(record["droppable_after"]))
    return record


class HugePagePool:
    """The default-size huge page pool, ``/proc/sys/vm/nr_hugepages``."""

    def __init__(self, proc: Path = PROC):
        self.proc = Path(proc)
        self.path = self.proc / "sys/vm/nr_hugepages"

    @property
    def page_size(self) -> int:
        return meminfo(self.proc).get("Hugepagesize", 2 * 1024**2)

    def total(self) -> int:
        return int(self.path.read_text().strip())

    def set_total(self, pages: int) -> int:
        """Ask the kernel for ``pages`` in the pool; returns what it really holds afterwards."""
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.write(fd, str(int(pages)).encode())
            finally:
                os.close(fd)
        except OSError as exc:
            raise IolabError(f"cannot write {pages}: {exc.strerror}", context=str(self.path)) from None
        return self.total()

    @contextlib.contextmanager
    def locked(self, timeout: float = 60.0):
        """Serialise read-modify-write of the pool between iolab processes."""
        fd = os.open(os.path.join(_lock_dir(), "iolab-hugepages.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise IolabError("another iolab process keeps the huge page pool locked",
                                         context=str(self.path)) from None
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)

    def add(self, pages: int) -> tuple[int, int]:
        """Grow the pool by ``pages``; returns ``(before, after)`` (after may be short)."""
        global _outstanding_pages
        with self.locked():
            before = self.total()
            if not pages:
                return before, before
            try:
                after = self.set_total(before + int(pages))
            except BaseException:
                after = self.total()  # a Ctrl-C mid-allocation: count what we got
                _outstanding_pages += max(0, after - before)
                self.last_added = max(0, after - before)
                _mark_holder()
                raise
            _outstanding_pages += max(0, after - before)
            _mark_holder()
            return before, after

    def release(self, pages: int) -> tuple[int, int]:
        """Shrink the pool by ``pages`` (what :meth:`add` got); returns ``(before, after)``."""
        global _outstanding_pages
        with self.locked():
            before = self.total()
            if not pages:
                return before, before
            held = _outstanding_pages
            # marked first: killed between the mark and the write, the pages leak (a reaper
            # gives back too few) rather than a reaper later taking pages another run holds
            _outstanding_pages = max(0, held - int(pages))
            _mark_holder()
            try:
                after = self.set_total(max(0, before - int(pages)))
            finally:
                _outstanding_pages = held - min(int(pages), max(0, before - self.total()))
                _mark_holder()
            return before, after


def hugepage_plan(mem_limit: int, *, info: dict | None = None, min_free_kbytes: int | None = None,
                  page_size: int | None = None) -> dict:
    """How many huge pages leave the page cache about ``mem_limit`` of room.

    ``reserve = MemTotal - mem_limit - margin`` with
    ``margin = in_use + headroom``:

    * ``in_use = MemTotal - MemAvailable`` (read after dropping caches): the
      kernel and running processes, which the page cache could not use anyway;
    * ``headroom = max(128 MiB, 4 x vm.min_free_kbytes)``: the kernel's free
      memory watermarks (min/low/high ~ 1-1.5 x min_free_kbytes are never
      available to the page cache) plus slack for fio's own buffers and
      allocations made while the test runs, so nothing is OOM-killed.

    This equals ``MemAvailable - mem_limit - headroom``: like booting with
    ``mem=`` sized so that ``mem_limit`` stays free for the test.
    """
    info = info or meminfo()
    if min_free_kbytes is None:
        try:
            min_free_kbytes = int((PROC / "sys/vm/min_free_kbytes").read_text())
        except OSError:
            min_free_kbytes = 0
    page_size = page_size or info.get("Hugepagesize", 2 * 1024**2)
    total, available = info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))
    in_use = max(0, total - available)
    headroom = max(HEADROOM_MIN, HEADROOM_MIN_FREE_FACTOR * min_free_kbytes * 1024)
    reserve = total - mem_limit - in_use - headroom
    pages = max(0, reserve // page_size)
    return {"mem_total": total, "mem_available": available, "in_use": in_use, "headroom": headroom,
            "margin": in_use + headroom, "reserve_bytes": pages * page_size, "pages": pages,
            "page_size": page_size}


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
        self._global_oom_baseline = _vmstat("oom_kill")
        self._prepared.append(record)
        return record

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` (a list; never a shell) inside the sandbox's cgroups.

        The child writes its own pid into the memory cgroup (``cgroup`` mode)
        and the throttled block cgroup (when there are throttles) before it
        execs, so not one page or I/O escapes; placement is checked afterwards.
        """
        if isinstance(argv, (str, bytes)) or kwargs.get("shell"):
            raise IolabError("popen takes an argument list and never runs a shell", context="isolation")
        argv = [str(a) for a in argv]
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
            proc = subprocess.Popen(argv, preexec_fn=enter_cgroups if (paths or user_preexec) else None,
                                    **kwargs)
        except subprocess.SubprocessError as exc:
            raise IolabError(f"could not start the process inside {', '.join(map(str, procs))}: {exc}",
                             context=argv[0]) from None
        except OSError as exc:
            raise IolabError(f"cannot start: {exc.strerror}", context=argv[0]) from None
        self._children.append(proc)
        # check the side effect (a child that already exited has nothing left to check)
        for group in groups:
            if proc.poll() is None and not group.contains(proc.pid) and proc.poll() is None:
                proc.kill()
                proc.wait()
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
            now = _vmstat("oom_kill")
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
                proc.terminate()
                try:
                    proc.wait(3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
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
