"""Huge-page reservations: RAM locked away from the page cache (the ``hugepages`` mode,
closest to booting with ``mem=``) and the small pool of huge pages for fio's buffers.

Reservations are made as increments under a lock (``hugepages.lock`` in the root-only
``/run/iolab``, :mod:`iolab.core.statedir`) and given back as the same decrement, so
concurrent iolab runs on one machine do not undo each other's pages; a process holding
pages records how many in the ownership ledger so that :mod:`iolab.engine.reaper` can give
back the pages of one that died (after checking the count against the pool).
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from iolab.core import ownership, statedir
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
#: the pool's lock file in the state directory
LOCK_NAME = "hugepages.lock"

# huge pages this process added to the pool and has not given back yet
_outstanding_pages = 0


def outstanding_hugepages() -> int:
    """Huge pages this process reserved and has not released (0 after every sandbox closed)."""
    return _outstanding_pages


def _mark_holder() -> None:
    """While this process holds pages, its ledger record (:mod:`iolab.core.ownership`, kind
    ``hugepages``, id ``pid-<pid>``) says how many.

    From it :mod:`iolab.engine.reaper` gives the pages of a process that died back to the pool.
    Called under the pool lock.
    """
    pid = os.getpid()
    if _outstanding_pages > 0:
        ownership.record("hugepages", f"pid-{pid}", undo=f"nr_hugepages -= {_outstanding_pages}",
                         pages=_outstanding_pages)
    else:
        ownership.forget("hugepages", f"pid-{pid}")


def hugepage_holders() -> dict[int, int]:
    """Live iolab processes holding huge pages on this machine: ``{pid: pages}`` (from the ledger;
    owners in another PID namespace count as live)."""
    found = {}
    for rec in ownership.records("hugepages"):
        pages = rec.details.get("pages")
        if rec.id != f"pid-{rec.owner.pid}" or not isinstance(pages, int) or isinstance(pages, bool):
            continue
        if rec.owner.alive():
            found[rec.owner.pid] = pages
    return found


def _check_claim(pid: int, pages, pool: "HugePagePool") -> int:
    """``pages`` if a dead process ``pid`` can really have added that many to the pool as it is now."""
    if not isinstance(pages, int) or isinstance(pages, bool) or pages <= 0:
        raise IolabError(f"the record claims {pages!r} huge pages of PID {pid}: not a positive count, "
                         f"not trusted", context="huge page ledger")
    total = pool.total()
    held = sum(n for holder, n in hugepage_holders().items() if holder != pid)
    if pages > total - held:
        raise IolabError(f"the record claims {pages} huge pages of PID {pid}, but the pool holds {total} "
                         f"of which live iolab runs hold {held}: not trusted, nothing given back",
                         context="huge page ledger")
    return pages


def undo_stale_hugepages(pid: int, pages: int, *, dry_run: bool) -> str | None:
    """Give back the ``pages`` huge pages a dead iolab process ``pid`` added to the pool.

    The count comes from a record: it is checked against the pool (no more than it holds
    beyond what live runs hold) before anything is given back.
    """
    pool = HugePagePool()
    if not pool.path.exists():
        return None
    if dry_run:
        pages = _check_claim(pid, pages, pool)
        return f"would give back {pages} huge pages of PID {pid} (nr_hugepages {pool.total()} -> " \
               f"{max(0, pool.total() - pages)})"
    with pool.locked():
        pages = _check_claim(pid, pages, pool)
        before = pool.total()
        after = pool.set_total(max(0, before - pages))
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
        """Serialise read-modify-write of the pool between iolab processes (a lock file in the
        root-only state directory, :mod:`iolab.core.statedir`)."""
        with statedir.opened(statedir.base()) as fd, \
                statedir.lock(fd, LOCK_NAME, timeout=timeout, what=f"the huge page pool ({self.path})"):
            yield

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
