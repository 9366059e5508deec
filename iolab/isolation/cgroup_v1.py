"""cgroup v1 (legacy) semantics of an iolab group: one directory per controller.

* memory: ``memory.limit_in_bytes`` plus ``memory.memsw.limit_in_bytes`` (memory +
  swap) so the limit cannot be dodged through swap; peak in
  ``memory.max_usage_in_bytes`` (reset by writing 0);
* block: ``blkio.throttle.{read,write}_{bps,iops}_device``. v1 throttling applies
  to the group's own tasks only (v1 is flat), and buffered writes are written
  back by kernel threads outside any group, so under v1 only reads and
  O_DIRECT/synchronous writes are throttled.

Every function here has its twin in :mod:`iolab.isolation.cgroup_v2`;
:class:`iolab.isolation.cgroups.Group` picks the module by the version serving
the controller.
"""
from __future__ import annotations

from pathlib import Path

from iolab.core.errors import IolabError
from iolab.isolation.cgroupfs import read, read_int, read_keyed, write

UNLIMITED = 9223372036854771712  # PAGE_COUNTER_MAX * 4096 on 64-bit
THROTTLE_FIELDS = ("read_bps", "write_bps", "read_iops", "write_iops")


def set_memory_limit(d: Path, nbytes: int, *, fake: bool) -> list[str]:
    """Hard limit (memory + swap); returns notes on what could not be limited."""
    notes = []
    limit, memsw = d / "memory.limit_in_bytes", d / "memory.memsw.limit_in_bytes"
    has_memsw = memsw.exists()
    current = read_int(limit) if limit.exists() else None
    # memsw must always be >= limit: raise memsw first when growing
    if has_memsw and current is not None and nbytes > current:
        write(memsw, nbytes, fake=fake)
        write(limit, nbytes, fake=fake)
    else:
        write(limit, nbytes, fake=fake)
        if has_memsw:
            write(memsw, nbytes, fake=fake)
    if not has_memsw:
        notes.append("memory.memsw.limit_in_bytes absent (no swap accounting): swap not limited")
    if not fake:
        got = read_int(limit)
        if got is None or got > nbytes:
            raise IolabError(f"the kernel did not take the memory limit {nbytes} (reads {got})",
                             context=str(limit))
    return notes


def memory_limit_files(d: Path) -> tuple[Path, Path]:
    """The limit file and the memory+swap limit file."""
    return d / "memory.limit_in_bytes", d / "memory.memsw.limit_in_bytes"


def memory_current(d: Path) -> int | None:
    return read_int(d / "memory.usage_in_bytes")


class Peak:
    """Peak memory usage as the kernel keeps it (``memory.max_usage_in_bytes``)."""

    def __init__(self, d: Path, *, fake: bool):
        self.d, self.fake = d, fake

    def read(self) -> int | None:
        return read_int(self.d / "memory.max_usage_in_bytes")

    def reset(self) -> bool:
        if self.fake:
            return False
        write(self.d / "memory.max_usage_in_bytes", 0)
        memsw_peak = self.d / "memory.memsw.max_usage_in_bytes"
        if memsw_peak.exists():
            write(memsw_peak, 0)
        return True

    def close(self) -> None:
        pass


def page_cache(stat: dict[str, int]) -> int | None:
    """File pages charged to the group, from ``memory.stat``."""
    return stat.get("total_cache", stat.get("cache"))


def oom_events(d: Path) -> dict[str, int]:
    control = read_keyed(d / "memory.oom_control")
    out = {"oom_kill": control.get("oom_kill", 0), "under_oom": control.get("under_oom", 0)}
    failcnt = read_int(d / "memory.failcnt")
    if failcnt is not None:
        # failcnt counts every charge that hit the limit (page cache reclaim too): context only
        out["failcnt"] = failcnt
    return out


def _shown(path: Path) -> dict[str, int]:
    """``MAJ:MIN -> value`` of a ``blkio.throttle.*_device`` file."""
    return {ln.split()[0]: int(ln.split()[1]) for ln in (read(path) or "").splitlines()
            if len(ln.split()) == 2 and ln.split()[1].isdigit()}


def throttle(d: Path, limits, *, fake: bool) -> None:
    """Write the four ``blkio.throttle`` files for one device (0 = unlimited) and check them."""
    for field in THROTTLE_FIELDS:
        value = getattr(limits, field)
        path = d / f"blkio.throttle.{field}_device"
        line = f"{limits.device} {int(value) if value is not None else 0}"
        if fake:
            kept = [ln for ln in (read(path) or "").splitlines() if ln.split()[:1] != [limits.device]]
            if value is not None:
                kept.append(line)
            write(path, "".join(f"{ln}\n" for ln in kept), fake=True)
            continue
        write(path, line)
        shown = _shown(path).get(limits.device)
        if value is not None and shown != int(value):
            raise IolabError(f"the kernel shows {shown} after writing {line!r}", context=str(path))


def throttle_in_force(d: Path, device: str) -> dict:
    return {field: _shown(d / f"blkio.throttle.{field}_device").get(device) or None
            for field in THROTTLE_FIELDS}
