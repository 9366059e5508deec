"""Timed I/O loops in plain Python, for the tests fio cannot express faithfully.

This module is a **script** as much as a module: the engines run it inside the
sandbox (``sandbox.popen([python, "-I", "-S", directio.__file__, OP, SPEC])``)
so that its I/O is charged to the memory cgroup and throttled like fio's. It
therefore imports the standard library only: a process started this way holds
a few MiB besides the page cache it reads, where ``import iolab`` would bring
pandas into the memory-limited cgroup. It prints one JSON document (the raw
result, kept in the run directory) and exits 0, or prints ``{"error": ...}``
and exits 1.

Operations (``OPS``), each a function ``spec dict -> result dict``:

``gnome-transfer``
    GNOME Disks' transfer-rate test (gdu-benchmark-dialog.c): for n in
    0..N-1, ``offset = n * size / N`` rounded down to a page, an untimed 4 KiB
    read at the offset, then one **timed** ``read()`` of the sample size
    (10 MiB); with ``write`` the same bytes are written back at the same
    offset (after a page pre-read) and ``fsync``'d inside the timing: a
    non-destructive rewrite. The file is opened ``O_DIRECT | O_SYNC`` (+
    ``O_EXCL`` on a block device when writing), as udisks' OpenForBenchmark.
``gnome-access``
    The access-time test: page-sized reads at ``g_rand_double_range(rand, 0,
    size)`` page-aligned offsets, GLib's Mersenne Twister seeded with 42,
    reproduced bit for bit (:func:`glib_rand`), each one timed.
``hdparm-cached``
    ``hdparm -T``'s ``time_cache()``: read the first 2 MiB, flush (sync,
    fsync, ``BLKFLSBUF`` on a block device), sleep 1 s, then ``lseek(0)`` +
    ``read(2 MiB)`` until 2.0 s have passed; the time of as many bare
    ``lseek(0)`` calls is subtracted. With ``direct`` the reads are O_DIRECT
    ("O_DIRECT cached reads": the drive's own cache over the bus).
``bonnie-putc`` / ``bonnie-getc``
    Bonnie++ 1.9x per-character tests: one ``write(fd, &c, 1)`` / ``read(fd,
    &c, 1)`` system call per byte (1.03 used stdio ``putc``/``getc``),
    latency taken per chunk of bytes, the file closed (``fsync`` + ``close``,
    as bonnie++'s ``CFileOp::Close``) before the clock stops.
``bonnie-rewrite``
    Read a chunk, dirty one byte, ``lseek`` back one chunk, write it; over the
    whole file; closed (fsync) before the clock stops.
``bonnie-seeks``
    ``SeekProcCount`` forked processes share tickets from one pipe (a random
    chunk number each; 10 % marked for update); each seeks, reads the chunk
    and for an update dirties a byte of the *same* block and writes it back.
    Elapsed = first child's start to last child's stop (after its close);
    CPU = the children's CPU added up.

O_DIRECT buffers are anonymous ``mmap`` memory, aligned to 2 MiB and advised
``MADV_HUGEPAGE``: physically contiguous buffers keep one request one bio, so
an IOPS throttle on an emulated device counts I/Os as a real disk would (see
``iolab/devices/profiles/emulated.yaml``). The result reports how much of the buffer
the kernel backed with huge pages (``thp_bytes``).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import mmap
import os
import random
import resource
import select
import signal
import stat
import struct
import sys
import time

PAGE = mmap.PAGESIZE
HUGE_PAGE = 2 * 1024 * 1024
#: hdparm's TIMING_BUF_MB: 2 MiB per read.
HDPARM_BUF = 2 * 1024 * 1024
#: linux/fs.h BLKFLSBUF: flush the block device's buffer cache.
BLKFLSBUF = 0x1261
#: Bonnie++'s UpdateSeek: one seek in ten rewrites its block.
UPDATE_SEEK = 10
#: GLib's G_RAND_DOUBLE_TRANSFORM (1 / 2**32).
G_RAND_DOUBLE_TRANSFORM = 2.3283064365386962890625e-10
_END_TICKET = -(2**31)  # bonnie++'s END_SEEK_PROCESS (INT_MIN)
_TICKET = struct.Struct("=i")

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


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _is_block(fd: int) -> bool:
    return stat.S_ISBLK(os.fstat(fd).st_mode)


def size_of(fd: int) -> int:
    """Bytes in a file or block device (``lseek(SEEK_END)``, as BLKGETSIZE64)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    return size


def _open(path: str, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EINVAL and flags & os.O_DIRECT:
            raise WorkerError(f"{path}: the file system does not support O_DIRECT") from None
        if exc.errno == errno.EBUSY:
            raise WorkerError(f"{path}: in use (mounted or opened exclusively): refusing to write") from None
        raise WorkerError(f"{path}: cannot open: {exc.strerror}") from None


def _read_full(fd: int, view: memoryview, offset: int | None = None) -> int:
    """One read of ``len(view)`` bytes (a short read is returned, not retried)."""
    if offset is None:
        return os.readv(fd, [view])
    return os.preadv(fd, [view], offset)


def _flush(fd: int) -> None:
    """hdparm's flush_buffer_cache(): sync, fsync, fdatasync, BLKFLSBUF on a block device."""
    os.sync()
    for call in (os.fsync, os.fdatasync):
        try:
            call(fd)
        except OSError:
            pass  # a read-only descriptor of a device: nothing to flush
    os.sync()
    if _is_block(fd):
        try:
            fcntl.ioctl(fd, BLKFLSBUF)
        except OSError as exc:
            raise WorkerError(f"BLKFLSBUF failed: {exc.strerror}") from None
    os.sync()


# --------------------------------------------------------------------------- GNOME Disks

def glib_rand(seed: int) -> random.Random:
    """A :class:`random.Random` producing exactly GLib's ``g_rand_new_with_seed(seed)`` stream.

    GLib (>= 2.2) seeds its MT19937 with the reference ``init_genrand``;
    Python seeds the same generator differently, so the state is set by hand.
    ``getrandbits(32)`` is then ``g_rand_int()``.
    """
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, tuple(mt) + (624,), None))
    return rng


def g_rand_double(rng: random.Random) -> float:
    """GLib's ``g_rand_double``: two 32-bit draws for 52 bits after the point."""
    while True:
        value = rng.getrandbits(32) * G_RAND_DOUBLE_TRANSFORM
        value = (value + rng.getrandbits(32)) * G_RAND_DOUBLE_TRANSFORM
        if value < 1.0:
            return value


def g_rand_double_range(rng: random.Random, begin: float, end: float) -> float:
    value = g_rand_double(rng)
    return value * end - (value - 1) * begin


def access_offsets(size: int, count: int, seed: int = 42, page: int = PAGE) -> list[int]:
    """GNOME Disks' access-time offsets: uniform over the device, page aligned."""
    rng = glib_rand(seed)
    offsets = []
    for _ in range(count):
        offset = int(g_rand_double_range(rng, 0.0, float(size)))
        offsets.append(offset - offset % page)
    return offsets


def transfer_offsets(size: int, samples: int, sample_size: int, page: int = PAGE) -> list[int]:
    """GNOME Disks' sample offsets ``n * size / samples`` rounded down to a page.

    On a device smaller than ``samples x sample_size`` the last samples would
    run past the end; they start early enough to fit instead.
    """
    last = (size - sample_size) // page * page
    if last < 0:
        raise WorkerError(f"the device ({size} bytes) is smaller than one sample ({sample_size} bytes)")
    out = []
    for n in range(samples):
        offset = n * size // samples
        out.append(min(offset - offset % page, last))
    return out


def gnome_transfer(spec: dict) -> dict:
    write = bool(spec.get("write"))
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_DIRECT | (os.O_SYNC if spec.get("sync", True) else 0)
    fd = _open(spec["path"], flags)
    try:
        if write and _is_block(fd):  # udisks adds O_EXCL when the benchmark may write
            os.close(fd)
            fd = _open(spec["path"], flags | os.O_EXCL)
        size = size_of(fd)
        sample_size = int(spec["sample_size"])
        buf = AlignedBuffer(sample_size)
        page_view = buf.part(PAGE)
        rows = []
        for n, offset in enumerate(transfer_offsets(size, int(spec["samples"]), sample_size)):
            _read_full(fd, page_view, offset)          # position the head, untimed
            start = clock()
            got = _read_full(fd, buf.view, offset)
            read_s = clock() - start
            row = {"n": n, "offset": offset, "read_bytes": got, "read_s": read_s}
            if write:
                if got != sample_size:
                    raise WorkerError(f"short read at {offset}: {got} bytes; not writing back")
                _read_full(fd, page_view, offset)      # GNOME Disks pre-reads a page (the same bytes)
                start = clock()
                put = os.pwritev(fd, [buf.view], offset)
                os.fsync(fd)
                row.update(write_bytes=put, write_s=clock() - start)
            rows.append(row)
        thp = buf.thp_bytes()
        buf.close()
    finally:
        os.close(fd)
    return {"op": "gnome-transfer", "size": size, "sample_size": sample_size, "thp_bytes": thp,
            "samples": rows}


def gnome_access(spec: dict) -> dict:
    fd = _open(spec["path"], os.O_RDONLY | os.O_DIRECT | (os.O_SYNC if spec.get("sync", True) else 0))
    try:
        size = size_of(fd)
        buf = AlignedBuffer(PAGE, huge=False)
        rows = []
        for n, offset in enumerate(access_offsets(size, int(spec["samples"]), int(spec.get("seed", 42)))):
            start = clock()
            got = _read_full(fd, buf.view, offset)
            rows.append({"n": n, "offset": offset, "bytes": got, "seconds": clock() - start})
        buf.close()
    finally:
        os.close(fd)
    return {"op": "gnome-access", "size": size, "seed": int(spec.get("seed", 42)), "samples": rows}


# --------------------------------------------------------------------------- hdparm

def hdparm_cached(spec: dict) -> dict:
    direct = bool(spec.get("direct"))
    seconds = float(spec.get("seconds", 2.0))
    fd = _open(spec["path"], os.O_RDONLY | os.O_NONBLOCK | (os.O_DIRECT if direct else 0))
    try:
        buf = AlignedBuffer(HDPARM_BUF, huge=direct)
        if spec.get("settle"):
            time.sleep(float(spec["settle"]))          # prepare_timing_buf(): "let I/O settle"
        os.lseek(fd, 0, os.SEEK_SET)
        if _read_full(fd, buf.view) != HDPARM_BUF:
            raise WorkerError("the file or device is smaller than hdparm's 2 MiB buffer")
        _flush(fd)
        time.sleep(1)
        cpu0, started = _cpu(), clock()
        iterations = 0
        while True:
            iterations += 1
            os.lseek(fd, 0, os.SEEK_SET)
            if _read_full(fd, buf.view) != HDPARM_BUF:
                raise WorkerError("short read while timing cached reads")
            for i in range(0, HDPARM_BUF, 512 * 64):   # touch the buffer, as hdparm does (sampled)
                buf.view[i] &= 1
            elapsed = clock() - started
            if elapsed >= seconds:
                break
        cpu1 = _cpu()
        start2 = clock()
        for _ in range(iterations):                    # remove the lseek() overhead
            os.lseek(fd, 0, os.SEEK_SET)
        overhead = clock() - start2
        thp = buf.thp_bytes() if direct else None
        buf.close()
    finally:
        os.close(fd)
    return {"op": "hdparm-cached", "direct": direct, "iterations": iterations,
            "bytes": iterations * HDPARM_BUF, "elapsed_s": elapsed - overhead, "loop_s": elapsed,
            "lseek_overhead_s": overhead, "usr_s": cpu1[0] - cpu0[0], "sys_s": cpu1[1] - cpu0[1],
            "thp_bytes": thp}


# --------------------------------------------------------------------------- Bonnie++

def _result(op: str, nbytes: int, started: float, cpu0, latencies_max: float, **extra) -> dict:
    elapsed = clock() - started
    cpu1 = _cpu()
    return {"op": op, "bytes": nbytes, "elapsed_s": elapsed, "usr_s": cpu1[0] - cpu0[0],
            "sys_s": cpu1[1] - cpu0[1], "lat_max_s": latencies_max, **extra}


def _close(fd: int) -> None:
    """bonnie++'s CFileOp::Close(): fsync, then close (inside the timed region)."""
    os.fsync(fd)
    os.close(fd)


def bonnie_putc(spec: dict) -> dict:
    path, nbytes, chunk = spec["path"], int(spec["bytes"]), int(spec["chunk"])
    try:
        os.unlink(path)                                # bonnie++ creates the file from scratch
    except FileNotFoundError:
        pass
    fd = _open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    one = [bytes([i & 0x7F]) for i in range(128)]       # the byte bonnie++ writes: i & 0x7f
    write, worst = os.write, 0.0
    cpu0, started = _cpu(), clock()
    for _ in range(nbytes // chunk):
        t0 = clock()
        for i in range(chunk):
            if write(fd, one[i & 0x7F]) != 1:
                raise WorkerError("write() of one byte failed - disk full?")
        worst = max(worst, clock() - t0)
    _close(fd)
    return _result("bonnie-putc", nbytes // chunk * chunk, started, cpu0, worst)


def bonnie_getc(spec: dict) -> dict:
    path, nbytes, chunk = spec["path"], int(spec["bytes"]), int(spec["chunk"])
    fd = _open(path, os.O_RDWR)
    read, worst, seen = os.read, 0.0, 0
    cpu0, started = _cpu(), clock()
    for _ in range(nbytes // chunk):
        t0 = clock()
        for _ in range(chunk):
            if len(read(fd, 1)) != 1:
                raise WorkerError("cannot read a byte: the file is shorter than the per-char size")
        seen += chunk
        worst = max(worst, clock() - t0)
    _close(fd)
    return _result("bonnie-getc", seen, started, cpu0, worst)


def bonnie_rewrite(spec: dict) -> dict:
    path, chunk = spec["path"], int(spec["chunk"])
    fd = _open(path, os.O_RDWR)
    chunks = size_of(fd) // chunk
    buf = bytearray(chunk)
    view = memoryview(buf)
    readv, write, lseek, worst, index = os.readv, os.write, os.lseek, 0.0, 0
    cpu0, started = _cpu(), clock()
    for _ in range(chunks):
        t0 = clock()
        got = 0
        while got < chunk:
            n = readv(fd, [view[got:]])
            if n <= 0:
                raise WorkerError("short read while rewriting")
            got += n
        index %= chunk
        buf[index] = (buf[index] + 1) & 0xFF           # dirty one byte per chunk
        index += 1
        lseek(fd, -chunk, os.SEEK_CUR)
        if write(fd, buf) != chunk:
            raise WorkerError("short write while rewriting")
        worst = max(worst, clock() - t0)
    _close(fd)
    return _result("bonnie-rewrite", chunks * chunk, started, cpu0, worst)


def _seeker(path: str, chunk: int, total_chunks: int, sync: bool, tickets: int, ready: int, report: int) -> None:
    """One of bonnie++'s seek children (CFileOp::action); never returns."""
    status = 1
    try:
        _die_with_parent()
        fd = os.open(path, os.O_RDWR)
        buf = bytearray(chunk)
        view = memoryview(buf)
        os.write(ready, b"r")
        seeks = writes = 0
        worst = 0.0
        raw = os.read(tickets, 4)
        cpu0, start = _cpu(), time.monotonic()
        while len(raw) == 4:
            ticket = _TICKET.unpack(raw)[0]
            if ticket == _END_TICKET:
                break
            update = ticket < 0
            where = abs(ticket) % total_chunks
            t0 = clock()
            if os.preadv(fd, [view], where * chunk) != chunk:
                raise WorkerError("cannot read a full block in the seek test")
            if update:                                  # the same block, one byte dirtied
                buf[where % chunk] = (buf[where % chunk] - 1) & 0xFF
                os.pwrite(fd, buf, where * chunk)
                if sync:
                    os.fsync(fd)
                writes += 1
            worst = max(worst, clock() - t0)
            seeks += 1
            raw = os.read(tickets, 4)
        _close(fd)
        end, cpu1 = time.monotonic(), _cpu()
        line = json.dumps({"start": start, "end": end, "cpu_usr": cpu1[0] - cpu0[0], "cpu_sys": cpu1[1] - cpu0[1],
                           "seeks": seeks, "writes": writes, "lat_max_s": worst})
        os.write(report, (line + "\n").encode())
        status = 0
    except BaseException as exc:  # noqa: BLE001 - a child must never return into the parent's code
        try:
            os.write(report, (json.dumps({"error": str(exc) or type(exc).__name__}) + "\n").encode())
        except OSError:
            pass
    finally:
        os._exit(status)


def _die_with_parent() -> None:
    """Linux prctl(PR_SET_PDEATHSIG, SIGKILL): a seek child never outlives the worker."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the worker died before prctl took effect
        os._exit(1)


def bonnie_seeks(spec: dict) -> dict:
    path, chunk = spec["path"], int(spec["chunk"])
    seeks, procs = int(spec["seeks"]), int(spec["procs"])
    with open(path, "rb") as fh:
        total_chunks = os.fstat(fh.fileno()).st_size // chunk
    if total_chunks < 1:
        raise WorkerError("the file holds no whole chunk")
    rng = random.Random(int(spec["seed"]))
    tickets = []
    for _ in range(seeks):                             # bonnie++ 1.98+: r.getNum(), abs, every %10==0 updates
        number = rng.getrandbits(31)
        tickets.append(-number if number % UPDATE_SEEK == 0 and number else number)
    ticket_r, ticket_w = os.pipe()
    ready_r, ready_w = os.pipe()
    report_r, report_w = os.pipe()
    children, done = [], False
    try:
        for _ in range(procs):
            pid = os.fork()
            if pid == 0:
                os.close(ticket_w), os.close(ready_r), os.close(report_r)
                _seeker(path, chunk, total_chunks, bool(spec.get("sync")), ticket_r, ready_w, report_w)
            children.append(pid)
        os.close(ticket_r), os.close(ready_w), os.close(report_w)
        ticket_r = ready_w = report_w = -1
        got = b""
        while len(got) < procs:                        # bonnie++ sleeps 3 s; we wait for "ready"
            chunk_ready = os.read(ready_r, procs)
            if not chunk_ready:
                break
            got += chunk_ready
        data = b"".join(_TICKET.pack(t) for t in tickets) + _TICKET.pack(_END_TICKET) * procs
        cpu0 = _cpu()
        view = memoryview(data)
        while view:
            written = os.write(ticket_w, view)
            view = view[written:]
        reports, buffer = [], b""
        while len(reports) < procs:
            readable, _, _ = select.select([report_r], [], [], 600)
            if not readable:
                raise WorkerError("seek children stopped answering")
            piece = os.read(report_r, 65536)
            if not piece:
                break
            buffer += piece
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                reports.append(json.loads(line))
        cpu1 = _cpu()
        done = True
    finally:
        for fd in (ticket_r, ticket_w, ready_r, ready_w, report_r, report_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for pid in children:
            try:
                if not done:  # interrupted: the tickets left in the pipe would keep them seeking
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass
    errors = [r["error"] for r in reports if "error" in r]
    if errors or len(reports) < procs:
        raise WorkerError("seek child failed: " + ("; ".join(errors) or "no report"))
    first, last = min(r["start"] for r in reports), max(r["end"] for r in reports)
    return {"op": "bonnie-seeks", "seeks": sum(r["seeks"] for r in reports),
            "writes": sum(r["writes"] for r in reports), "procs": procs, "chunk": chunk,
            "elapsed_s": last - first, "usr_s": sum(r["cpu_usr"] for r in reports),
            "sys_s": sum(r["cpu_sys"] for r in reports), "parent_cpu_s": sum(cpu1) - sum(cpu0),
            "lat_max_s": max(r["lat_max_s"] for r in reports), "bytes": sum(r["seeks"] for r in reports) * chunk,
            "seed": int(spec["seed"])}


OPS = {
    "gnome-transfer": gnome_transfer,
    "gnome-access": gnome_access,
    "hdparm-cached": hdparm_cached,
    "bonnie-putc": bonnie_putc,
    "bonnie-getc": bonnie_getc,
    "bonnie-rewrite": bonnie_rewrite,
    "bonnie-seeks": bonnie_seeks,
}


def command(op: str, spec: dict, python: str | None = None) -> list[str]:
    """The argv that runs ``op`` with ``spec`` in a fresh interpreter (no site, no iolab import)."""
    if op not in OPS:
        raise ValueError(f"unknown directio operation {op!r}")
    return [python or sys.executable, "-I", "-S", os.path.abspath(__file__), op, json.dumps(spec, sort_keys=True)]


def _interrupt(signum, frame):
    """SIGTERM (the sandbox stopping us) unwinds like Ctrl-C: seek children are killed, files closed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in OPS:
        print(json.dumps({"error": f"usage: directio.py {{{'|'.join(OPS)}}} SPEC_JSON"}))
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = OPS[argv[0]](json.loads(argv[1]))
    except KeyboardInterrupt:
        print(json.dumps({"error": "interrupted"}))
        return 130
    except (WorkerError, OSError, ValueError, KeyError) as exc:
        print(json.dumps({"error": str(exc) or type(exc).__name__}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
