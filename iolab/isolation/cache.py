"""Verified cache drops and the memory counters they are judged by.

:func:`drop_caches` syncs, drops the page cache and checks that the kernel
counted the drop (``drop_pagecache`` in ``/proc/vmstat``); :func:`meminfo`
reads ``/proc/meminfo`` in bytes; :func:`flag_cache_suspect` tells a result
that the page cache served from one the device served.
"""
from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

from iolab.core.units import human_size

log = logging.getLogger(__name__)

PROC = Path("/proc")

#: the droppable cache (Cached - Shmem) "fell" when it is at most half of what it
#: was, or below this floor (little was cached to begin with)
DROP_VERIFY_FLOOR = 256 * 1024**2


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


def vmstat(key: str, proc: Path = PROC) -> int | None:
    """One counter of ``/proc/vmstat`` (None when the kernel has no such counter)."""
    try:
        for line in (proc / "vmstat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except OSError:
        pass
    return None


def droppable(info: dict[str, int]) -> int:
    """The page cache that drop_caches can drop."""
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
    count_before = vmstat("drop_pagecache", proc)
    record = {"written": False, "cached_before": before.get("Cached"),
              "droppable_before": droppable(before)}
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
    count_after = vmstat("drop_pagecache", proc)
    record.update(cached_after=after.get("Cached"), droppable_after=droppable(after),
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
