"""Bonnie++ 1.9x's per-character, rewrite and random-seek tests, one system call as bonnie++ makes it."""
from __future__ import annotations

import ctypes
import json
import os
import random
import select
import signal
import struct
import time

if __package__:
    from .common import WorkerError, clock, close_synced, cpu_times, open_fd, size_of, timed_result
else:  # run as a directory by the engines (python -I -S .../directio): no package, stdlib only
    from common import WorkerError, clock, close_synced, cpu_times, open_fd, size_of, timed_result  # type: ignore

#: Bonnie++'s UpdateSeek: one seek in ten rewrites its block.
UPDATE_SEEK = 10
_END_TICKET = -(2**31)  # bonnie++'s END_SEEK_PROCESS (INT_MIN)
_TICKET = struct.Struct("=i")


def bonnie_putc(spec: dict) -> dict:
    path, nbytes, chunk = spec["path"], int(spec["bytes"]), int(spec["chunk"])
    try:
        os.unlink(path)                                # bonnie++ creates the file from scratch
    except FileNotFoundError:
        pass
    fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    one = [bytes([i & 0x7F]) for i in range(128)]       # the byte bonnie++ writes: i & 0x7f
    write, worst = os.write, 0.0
    cpu0, started = cpu_times(), clock()
    for _ in range(nbytes // chunk):
        t0 = clock()
        for i in range(chunk):
            if write(fd, one[i & 0x7F]) != 1:
                raise WorkerError("write() of one byte failed - disk full?")
        worst = max(worst, clock() - t0)
    close_synced(fd)
    return timed_result("bonnie-putc", nbytes // chunk * chunk, started, cpu0, worst)


def bonnie_getc(spec: dict) -> dict:
    path, nbytes, chunk = spec["path"], int(spec["bytes"]), int(spec["chunk"])
    fd = open_fd(path, os.O_RDWR)
    read, worst, seen = os.read, 0.0, 0
    cpu0, started = cpu_times(), clock()
    for _ in range(nbytes // chunk):
        t0 = clock()
        for _ in range(chunk):
            if len(read(fd, 1)) != 1:
                raise WorkerError("cannot read a byte: the file is shorter than the per-char size")
        seen += chunk
        worst = max(worst, clock() - t0)
    close_synced(fd)
    return timed_result("bonnie-getc", seen, started, cpu0, worst)


def bonnie_rewrite(spec: dict) -> dict:
    path, chunk = spec["path"], int(spec["chunk"])
    fd = open_fd(path, os.O_RDWR)
    chunks = size_of(fd) // chunk
    buf = bytearray(chunk)
    view = memoryview(buf)
    readv, write, lseek, worst, index = os.readv, os.write, os.lseek, 0.0, 0
    cpu0, started = cpu_times(), clock()
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
    close_synced(fd)
    return timed_result("bonnie-rewrite", chunks * chunk, started, cpu0, worst)


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
        cpu0, start = cpu_times(), time.monotonic()
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
        close_synced(fd)
        end, cpu1 = time.monotonic(), cpu_times()
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
        cpu0 = cpu_times()
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
        cpu1 = cpu_times()
        done = True
    finally:
        for fd in (ticket_r, ticket_w, ready_r, ready_w, report_r, report_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        # the children's ending, here and not by iolab.core.processes.end: this script imports the standard
        # library only (see the package), and forked children of our own need waitpid, not a poll of /proc
        for pid in children:
            try:
                if not done:  # interrupted or failed: the tickets left in the pipe would keep them seeking
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
