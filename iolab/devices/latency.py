"""Latency-true emulated devices: which emulation runs, and the dm-delay layer that gives it.

blk-throttle (``io.max``, ``blkio.throttle.*``) holds a device to a bandwidth and
an IOPS *ceiling*, in time slices: at 150 IOPS most 4 KiB reads finish in
microseconds and about one in a hundred waits ~100 ms. The mean is a disk's,
the percentiles are not, and queue depth changes nothing. A profile that
declares ``read_delay_ms`` (the ``hdd``: a seek plus half a rotation) gets,
where the kernel has it, a **dm-delay** device stacked on its throttled loop
device: every read waits the delay before it reaches the loop device, so a
QD1 random read takes milliseconds every time (p50 and p99 both near the
delay) and the IOPS at QD1 are ~1/delay, while at QD32 the reads overlap and
the throttle's ceilings still bind -- a disk's shape (QD1 below the ceiling,
latency growing with the queue at depth). The throttle moves to the dm device,
the one fio uses; so do the file system and the mount.

Why dm-delay and not null_blk (``completion_nsec``, ``mbps``, ``memory_backed``),
which the lab kernel also has: null_blk keeps its data in RAM (the device
costs its size in kernel memory, outside every cgroup, next to the memory
limits iolab sets for cache isolation), is one module-wide configfs tree, and
charges the same completion time to a 1 MiB and a 4 KiB request. dm-delay keeps
the scratch file on disk, the loop device's direct I/O, the ledger and reaper
paths iolab already has, and the throttle profile as the bandwidth/IOPS ground
truth; it adds only the per-I/O service time.

Known limits (in the profile's notes too): the delay is the same for every read,
sequential or random (a disk streams sequential reads without seeking: at QD1
small sequential reads are slower than a disk's; at depth the ceilings are
reached); the delay is rounded up to the kernel's timer tick (dm-delay up to
Linux 6.8 uses jiffies: 4 ms at HZ=250), so the configured delay is a lower
bound; writes use ``write_delay_ms`` (0 for the ``hdd``: a disk's write cache
absorbs them, the throttle paces them) and cache flushes ``flush_delay_ms``
(8 ms for the ``hdd``: a flush -- what fsync and every journal commit end with,
REQ_PREFLUSH -- waits until the cache is on the platter, a seek plus rotation),
dm-delay's third class. So fsync-bound work (a database's commits, sql-bench's
``create``) is paced by the flushes, as on a disk, not by the write throttle
alone. Where the kernel's dm-delay has no flush class (asked before the device is
made: its version in ``dmsetup targets`` and the kernel's release, see
:mod:`iolab.devices.dmdelay`) the device keeps the read and write classes, a
flush waits the write delay, and ``reason`` says so. A FUA write without a
preflush is a write.

Where dm-delay is missing (no device-mapper, no ``dm_delay`` module, no
``dmsetup``) the device is the throttled loop device alone, exactly as before,
and the data says so: ``emulation`` in the target's ``emulated`` provenance.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import platform

from iolab.devices import dmdelay

log = logging.getLogger(__name__)

DM_DELAY = "dm-delay"
THROTTLE = "blk-throttle"


@dataclasses.dataclass(frozen=True)
class Emulation:
    """Which emulation an emulated device runs, and why."""

    kind: str                      # dm-delay | blk-throttle
    reason: str                    # why this one (what was missing, for the fallback)
    read_delay_ms: int | None = None
    write_delay_ms: int | None = None
    flush_delay_ms: int | None = None  # None: no flush class (a flush waits write_delay_ms)
    dm_device: str | None = None   # /dev/mapper/iolab-delay-... (dm-delay only)
    lower_device: str | None = None  # the loop device under it

    @property
    def latency_true(self) -> bool:
        return self.kind == DM_DELAY

    def describe(self) -> dict:
        return {"kind": self.kind, "latency_true": self.latency_true, "reason": self.reason,
                "read_delay_ms": self.read_delay_ms, "write_delay_ms": self.write_delay_ms,
                "flush_delay_ms": self.flush_delay_ms, "dm_device": self.dm_device, "lower_device": self.lower_device}


def choose(profile, *, unavailable=dmdelay.unavailable) -> Emulation:
    """The emulation ``profile`` gets on this machine (``unavailable``: why dm-delay cannot run, or None)."""
    delays = {f: getattr(profile, f, None) for f in ("read_delay_ms", "write_delay_ms", "flush_delay_ms")}
    if not any(delays.values()):
        return Emulation(THROTTLE, f"profile {profile.name} declares no per-I/O delay")
    missing = unavailable()
    if missing:
        log.info("emulated %s: dm-delay unavailable (%s): blk-throttle limits only, latency is the throttle's",
                 profile.name, missing)
        return Emulation(THROTTLE, f"dm-delay unavailable: {missing}")
    flush = delays["flush_delay_ms"]
    return Emulation(DM_DELAY, f"profile {profile.name} declares a per-I/O delay and the kernel has dm-delay",
                     read_delay_ms=int(delays["read_delay_ms"] or 0), write_delay_ms=int(delays["write_delay_ms"] or 0),
                     flush_delay_ms=None if flush is None else int(flush))


def stack(emulation: Emulation, lower: str, undo: contextlib.ExitStack, **details) -> Emulation:
    """Put the dm-delay device of ``emulation`` over ``lower`` (removed by ``undo``); the throttle-only
    emulation is returned as it is. Whether the flush class is used is the kernel's word, asked before the
    device is made (:func:`iolab.devices.dmdelay.flush_class_missing`): a kernel without it gets the read
    and write classes, and the returned emulation says so (``flush_delay_ms`` None, ``reason``). A refused
    ``dmsetup create`` is raised as it is: it is never taken for a missing flush class."""
    if not emulation.latency_true:
        return emulation
    if emulation.flush_delay_ms is not None:
        missing = dmdelay.flush_class_missing(dmdelay.delay_version(), platform.release())
        if missing:
            log.warning("dm-delay over %s without a flush class (%s): flushes wait the write delay, %d ms, "
                        "not %d ms", lower, missing, emulation.write_delay_ms, emulation.flush_delay_ms)
            emulation = dataclasses.replace(
                emulation, flush_delay_ms=None,
                reason=f"{emulation.reason}; its dm-delay has no flush class ({missing}): a cache flush waits "
                       f"the write delay ({emulation.write_delay_ms} ms), not {emulation.flush_delay_ms} ms")
    device = dmdelay.create(lower, read_ms=emulation.read_delay_ms, write_ms=emulation.write_delay_ms,
                            flush_ms=emulation.flush_delay_ms, **details)
    undo.callback(dmdelay.remove, device.rsplit("/", 1)[-1])
    return dataclasses.replace(emulation, dm_device=device, lower_device=lower)


def emulation_flag(emulated, directions) -> str:
    """What an emulated device's latencies are: ``emulated_delay`` when every direction measured is
    delayed per I/O in the kernel (dm-delay: milliseconds per read, so percentiles are a fixed seek
    time plus queueing), else ``emulated_latency`` (the throttle's time slices, not a disk's)."""
    emulation = getattr(emulated, "emulation", None)
    if emulation is None or not emulation.latency_true:
        return "emulated_latency"
    delays = {"read": emulation.read_delay_ms, "write": emulation.write_delay_ms}
    measured = {d for d in directions if isinstance(d, str) and d}
    return "emulated_delay" if measured and all(delays.get(d) for d in measured) else "emulated_latency"
