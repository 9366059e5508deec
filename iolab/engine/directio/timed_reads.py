"""GNOME Disks' transfer-rate and access-time tests and ``hdparm -T``'s cached reads, as the
originals time them (GLib's random stream reproduced bit for bit)."""
from __future__ import annotations

import os
import random
import time

if __package__:
    from .common import (PAGE, AlignedBuffer, WorkerError, clock, cpu_times, flush_caches, is_block, open_fd,
                          read_once, size_of)
else:  # run as a directory by the engines (python -I -S .../directio): no package, stdlib only
    from common import (PAGE, AlignedBuffer, WorkerError, clock, cpu_times, flush_caches,  # type: ignore
                        is_block, open_fd, read_once, size_of)

#: hdparm's TIMING_BUF_MB: 2 MiB per read.
HDPARM_BUF = 2 * 1024 * 1024
#: GLib's G_RAND_DOUBLE_TRANSFORM (1 / 2**32).
G_RAND_DOUBLE_TRANSFORM = 2.3283064365386962890625e-10


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
    fd = open_fd(spec["path"], flags)
    try:
        if write and is_block(fd):  # udisks adds O_EXCL when the benchmark may write
            os.close(fd)
            fd = open_fd(spec["path"], flags | os.O_EXCL)
        size = size_of(fd)
        sample_size = int(spec["sample_size"])
        buf = AlignedBuffer(sample_size)
        page_view = buf.part(PAGE)
        rows = []
        for n, offset in enumerate(transfer_offsets(size, int(spec["samples"]), sample_size)):
            read_once(fd, page_view, offset)          # position the head, untimed
            start = clock()
            got = read_once(fd, buf.view, offset)
            read_s = clock() - start
            row = {"n": n, "offset": offset, "read_bytes": got, "read_s": read_s}
            if write:
                if got != sample_size:
                    raise WorkerError(f"short read at {offset}: {got} bytes; not writing back")
                read_once(fd, page_view, offset)      # GNOME Disks pre-reads a page (the same bytes)
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
    fd = open_fd(spec["path"], os.O_RDONLY | os.O_DIRECT | (os.O_SYNC if spec.get("sync", True) else 0))
    try:
        size = size_of(fd)
        buf = AlignedBuffer(PAGE, huge=False)
        rows = []
        for n, offset in enumerate(access_offsets(size, int(spec["samples"]), int(spec.get("seed", 42)))):
            start = clock()
            got = read_once(fd, buf.view, offset)
            rows.append({"n": n, "offset": offset, "bytes": got, "seconds": clock() - start})
        buf.close()
    finally:
        os.close(fd)
    return {"op": "gnome-access", "size": size, "seed": int(spec.get("seed", 42)), "samples": rows}


# --------------------------------------------------------------------------- hdparm

def hdparm_cached(spec: dict) -> dict:
    direct = bool(spec.get("direct"))
    seconds = float(spec.get("seconds", 2.0))
    fd = open_fd(spec["path"], os.O_RDONLY | os.O_NONBLOCK | (os.O_DIRECT if direct else 0))
    try:
        buf = AlignedBuffer(HDPARM_BUF, huge=direct)
        if spec.get("settle"):
            time.sleep(float(spec["settle"]))          # prepare_timing_buf(): "let I/O settle"
        os.lseek(fd, 0, os.SEEK_SET)
        if read_once(fd, buf.view) != HDPARM_BUF:
            raise WorkerError("the file or device is smaller than hdparm's 2 MiB buffer")
        flush_caches(fd)
        time.sleep(1)
        cpu0, started = cpu_times(), clock()
        iterations = 0
        while True:
            iterations += 1
            os.lseek(fd, 0, os.SEEK_SET)
            if read_once(fd, buf.view) != HDPARM_BUF:
                raise WorkerError("short read while timing cached reads")
            for i in range(0, HDPARM_BUF, 512 * 64):   # touch the buffer, as hdparm does (sampled)
                buf.view[i] &= 1
            elapsed = clock() - started
            if elapsed >= seconds:
                break
        cpu1 = cpu_times()
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
