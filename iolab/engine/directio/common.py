"""What every timed loop of the direct-I/O worker shares: aligned buffers, opening, flushing,
CPU time, the result record and the worker's one error type (standard library only)."""
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import resource
import stat
import time

PAGE = mmap.PAGESIZE
HUGE_PAGE = 2 * 1024 * 1024
#: linux/fs.h BLKFLSBUF: flush the block device's buffer cache.
BLKFLSBUF = 0x1261

clock = time.perf_counter


class WorkerError(Exception):
    """A failure the worker reports as ``{"error": ...}``."""


# --------------------------------------------------------------------------- buffers

class AlignedBuffer:
    """An anonymous mapping of ``size`` bytes, 2 MiB aligned, huge pages advised, pre-faulted."""

    def __init__(self, size: int, *, huge: bool = True):
        self.size = size
        pad = HUGE_PAGE if huge else 0
        self._map = mmap.mmap(-1, size + pad, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        anchor = ctypes.c_char.from_buffer(self._map)
        address = ctypes.addressof(anchor)
        del anchor  # a live ctypes view would keep the mapping from closing
        self.offset = (-address) % (HUGE_PAGE if huge else PAGE)
        self.address = address + self.offset
        if huge and hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                self._map.madvise(mmap.MADV_HUGEPAGE)
            except OSError:
                pass  # THP disabled: scattered pages, still page aligned
        self.view = memoryview(self._map)[self.offset:self.offset + size]
        self._parts: list[memoryview] = []
        for i in range(0, size, PAGE):  # fault every page in now, not inside a timed read
            self.view[i] = 0

    def thp_bytes(self) -> int | None:
        """Bytes of this mapping backed by transparent huge pages (from /proc/self/smaps)."""
        start = self.address - self.offset
        try:
            with open("/proc/self/smaps") as fh:
                inside = False
                for line in fh:
                    head = line.split(" ", 1)[0]
                    if "-" in head and ":" not in head:
                        lo, hi = (int(x, 16) for x in head.split("-"))
                        inside = lo <= start < hi
                    elif inside and line.startswith("AnonHugePages:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def part(self, nbytes: int) -> memoryview:
        """The first ``nbytes`` of the buffer (same alignment)."""
        view = self.view[:nbytes]
        self._parts.append(view)
        return view

    def close(self) -> None:
        for view in self._parts:
            view.release()
        self.view.release()
        self._map.close()


def cpu_times() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def is_block(fd: int) -> bool:
    return stat.S_ISBLK(os.fstat(fd).st_mode)


def size_of(fd: int) -> int:
    """Bytes in a file or block device (``lseek(SEEK_END)``, as BLKGETSIZE64)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    return size


def open_fd(path: str, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EINVAL and flags & os.O_DIRECT:
            raise WorkerError(f"{path}: the file system does not support O_DIRECT") from None
        if exc.errno == errno.EBUSY:
            raise WorkerError(f"{path}: in use (mounted or opened exclusively): refusing to write") from None
        raise WorkerError(f"{path}: cannot open: {exc.strerror}") from None


def read_once(fd: int, view: memoryview, offset: int | None = None) -> int:
    """One read of ``len(view)`` bytes (a short read is returned, not retried)."""
    if offset is None:
        return os.readv(fd, [view])
    return os.preadv(fd, [view], offset)


def flush_caches(fd: int) -> None:
    """hdparm's flush_buffer_cache(): sync, fsync, fdatasync, BLKFLSBUF on a block device (where the
    worker has no capability for it, confined, ``posix_fadvise(DONTNEED)``: the same clean pages go)."""
    os.sync()
    for call in (os.fsync, os.fdatasync):
        try:
            call(fd)
        except OSError:
            pass  # a read-only descriptor of a device: nothing to flush
    os.sync()
    if is_block(fd):
        try:
            fcntl.ioctl(fd, BLKFLSBUF)
        except PermissionError:
            # confined (iolab.isolation.confine: no CAP_SYS_ADMIN): after the syncs every cached page of
            # the device is clean, and DONTNEED drops clean pages of the device's mapping as BLKFLSBUF does
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            raise WorkerError(f"BLKFLSBUF failed: {exc.strerror}") from None
    os.sync()


def timed_result(op: str, nbytes: int, started: float, cpu0, latencies_max: float, **extra) -> dict:
    elapsed = clock() - started
    cpu1 = cpu_times()
    return {"op": op, "bytes": nbytes, "elapsed_s": elapsed, "usr_s": cpu1[0] - cpu0[0],
            "sys_s": cpu1[1] - cpu0[1], "lat_max_s": latencies_max, **extra}


def close_synced(fd: int) -> None:
    """bonnie++'s CFileOp::Close(): fsync, then close (inside the timed region)."""
    os.fsync(fd)
    os.close(fd)
