"""Timed I/O loops in plain Python, for the tests fio cannot express faithfully.

This package is a **script** as much as a package: the engines run its directory inside
the sandbox (``sandbox.popen(directio.command(OP, SPEC))``, i.e. ``python -I -S
.../iolab/engine/directio OP SPEC``, which runs ``__main__.py`` with its modules top-level)
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

import json
import os
import sys

from iolab.engine.directio.bonnie_ops import bonnie_getc, bonnie_putc, bonnie_rewrite, bonnie_seeks  # noqa: F401
from iolab.engine.directio.common import HUGE_PAGE, PAGE, AlignedBuffer, WorkerError, size_of  # noqa: F401
from iolab.engine.directio.timed_reads import (access_offsets, g_rand_double, g_rand_double_range,  # noqa: F401
                                               glib_rand, gnome_access, gnome_transfer, hdparm_cached,
                                               transfer_offsets)
from iolab.engine.directio.worker import OPS, main  # noqa: F401


def command(op: str, spec: dict, python: str | None = None) -> list[str]:
    """The argv that runs ``op`` with ``spec`` in a fresh interpreter (no site, no iolab import)."""
    if op not in OPS:
        raise ValueError(f"unknown directio operation {op!r}")
    return [python or sys.executable, "-I", "-S", os.path.dirname(os.path.abspath(__file__)), op,
            json.dumps(spec, sort_keys=True)]
