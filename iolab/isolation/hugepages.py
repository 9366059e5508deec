"""Huge-page reservations: RAM locked away from the page cache (the ``hugepages`` mode,
closest to booting with ``mem=``) and the small pool of huge pages for fio's buffers.

Reservations are made as increments under a lock (``/run/lock/iolab-hugepages.lock``)
and given back as the same decrement, so concurrent iolab runs on one machine do
not undo each other's pages; a process holding pages marks how many
(``iolab-hugepages.<pid>`` and the ownership ledger) so that
:mod:`iolab.engine.reaper` can give back the pages of one that died.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path

from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.isolation.cache import PROC, meminfo

log = logging.getLogger(__name__)


#: hugepages mode leaves this much beyond ``mem_limit`` and what is already in
#: use: max(HEADROOM_MIN, HEADROOM_MIN_FREE_FACTOR x vm.min_free_kbytes)
HEADROOM_MIN = 128 * 1024**2
HEADROOM_MIN_FREE_FACTOR = 4
#: a reservation short by more than max(pages, fraction) of what was asked is refused
SHORT_TOLERANCE_PAGES = 4
SHORT_TOLERANCE_FRACTION = 0.01

#: huge pages kept for fio's I/O buffers while throttles are in force (64 x 2 MiB:
#: e.g. 16 jobs x 4 pages for 1 MiB x QD8 each)
BUFFER_HUGEPAGES = 64

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

    @contextlib.contextmanager
    def _changing(self):
        """The pool locked for a change, with its size before it."""
        with self.locked():
            yield self.total()

    def add(self, pages: int) -> tuple[int, int]:
        """Grow the pool by ``pages``; returns ``(before, after)`` (after may be short)."""
        global _outstanding_pages
        with self._changing() as before:
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
        with self._changing() as before:
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
