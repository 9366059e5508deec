"""cgroup v2 (unified) semantics of an iolab group: one directory for every controller.

* controllers must be enabled in the parent's ``cgroup.subtree_control``;
* memory: ``memory.max`` (a hard limit, never ``memory.high``, which throttles the
  task and distorts latency) and ``memory.swap.max`` = 0; peak from
  ``memory.peak`` (resettable per file descriptor since Linux 6.12), else
  sampled from ``memory.current``;
* block: one ``io.max`` line per device.

Every function here has its twin in :mod:`iolab.isolation.cgroup_v1`.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.isolation.cgroupfs import CONTROLLERS, read, read_int, read_keyed, write

_IO_MAX_KEYS = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}


def enable(parent: Path, controllers: list[str], *, fake: bool) -> None:
    """Enable the controllers for the children of ``parent``."""
    names = [CONTROLLERS[c][1] for c in controllers]
    control = parent / "cgroup.subtree_control"
    enabled = (read(control) or "").split()
    missing = [n for n in names if n not in enabled]
    if not missing:
        return
    if fake:
        write(control, " ".join(enabled + missing) + "\n", fake=True)
        return
    write(control, " ".join(f"+{n}" for n in missing))


def check_enabled(path: Path, controllers: list[str]) -> None:
    """Raise unless every controller is available in the new group ``path``."""
    available = (read(path / "cgroup.controllers") or "").split()
    for c in controllers:
        if CONTROLLERS[c][1] not in available:
            raise IolabError(f"the {CONTROLLERS[c][1]} controller is not enabled for the new group",
                             context=str(path))


def set_memory_limit(d: Path, nbytes: int, *, fake: bool) -> list[str]:
    """Hard limit, no swap; returns notes on what could not be limited."""
    write(d / "memory.max", nbytes, fake=fake)
    swap = d / "memory.swap.max"
    if fake or swap.exists():
        write(swap, 0, fake=fake)
        return []
    return ["memory.swap.max absent (no swap accounting): swap not limited"]


def memory_limit_files(d: Path) -> tuple[Path, Path]:
    """The limit file and the swap limit file."""
    return d / "memory.max", d / "memory.swap.max"


def memory_current(d: Path) -> int | None:
    return read_int(d / "memory.current")


class _Sampler:
    """Peak of ``memory.current`` sampled in a thread (kernels without a resettable ``memory.peak``)."""

    def __init__(self, path: Path, interval: float = 0.02):
        self.path, self.interval = path, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iolab-peak-sampler", daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.is_set():
            value = read_int(self.path)
            if value is not None and value > self.peak:
                self.peak = value
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=1)


class Peak:
    """Peak memory since creation or the last :meth:`reset`: ``memory.peak`` read through the
    file descriptor that reset it, else a sampler thread, else the peak since creation."""

    def __init__(self, d: Path, *, fake: bool):
        self.d, self.fake = d, fake
        self._fd: int | None = None
        self._sampler: _Sampler | None = None

    def read(self) -> int | None:
        if self._fd is not None:
            text = os.pread(self._fd, 64, 0).decode().strip()
            return int(text) if text.isdigit() else None
        if self._sampler is not None:
            return max(self._sampler.peak, memory_current(self.d) or 0)
        return read_int(self.d / "memory.peak")

    def _open_resettable(self) -> bool:
        # Linux >= 6.12: a write resets the peak for reads through the same fd
        try:
            fd = os.open(self.d / "memory.peak", os.O_RDWR)
        except OSError:
            return False
        try:
            os.write(fd, b"reset\n")
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def reset(self) -> bool:
        if self.fake:
            return False
        if self._fd is not None:
            os.write(self._fd, b"reset\n")
            return True
        if (self.d / "memory.peak").exists() and self._open_resettable():
            return True
        # no resettable memory.peak: sample memory.current from now on
        if self._sampler is not None:
            self._sampler.stop()
        self._sampler = _Sampler(self.d / "memory.current")
        return True

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def page_cache(stat: dict[str, int]) -> int | None:
    """File pages charged to the group, from ``memory.stat``."""
    return stat.get("file")


def oom_events(d: Path) -> dict[str, int]:
    events = read_keyed(d / "memory.events")
    return {"oom_kill": events.get("oom_kill", 0), "oom": events.get("oom", 0),
            "max": events.get("max", 0), "oom_group_kill": events.get("oom_group_kill", 0)}


def io_max_line(limits) -> str:
    """The ``io.max`` line of a throttle (``max`` = unlimited)."""
    def v(x):
        return "max" if x is None else str(int(x))
    return (f"{limits.device} rbps={v(limits.read_bps)} wbps={v(limits.write_bps)} "
            f"riops={v(limits.read_iops)} wiops={v(limits.write_iops)}")


def throttle(d: Path, limits, *, fake: bool) -> None:
    """Write the device's ``io.max`` line and check that the kernel shows it."""
    write(d / "io.max", io_max_line(limits), fake=fake)
    if fake:
        return
    current = read(d / "io.max") or ""
    if any(getattr(limits, f) is not None for f in _IO_MAX_KEYS.values()) \
            and not any(line.startswith(limits.device + " ") for line in current.splitlines()):
        raise IolabError(f"io.max does not show the limits for {limits.device}", context=str(d / "io.max"))


def throttle_in_force(d: Path, device: str) -> dict:
    out = dict.fromkeys(_IO_MAX_KEYS.values())
    for line in (read(d / "io.max") or "").splitlines():
        fields = line.split()
        if fields[:1] != [device]:
            continue
        for field in fields[1:]:
            key, _, value = field.partition("=")
            if key in _IO_MAX_KEYS and value.isdigit():
                out[_IO_MAX_KEYS[key]] = int(value)
    return out
