"""The write cliff of an emulated consumer SSD: the kernel's throttle changed as the device fills.

A profile with a ``cliff:`` (``iolab/devices/profiles/emulated.yaml``) writes at its
``write_bps`` (the burst: an SLC cache) until ``after`` bytes have been written, then
at the cliff's ``write_bps`` (the flash behind it), and gets the burst back once the
device has been idle for ``recover_idle_s`` seconds (the cache emptied).

:class:`CliffWatch` is a small thread owned by the emulated device (started and stopped
with it). It reads the device's own counter, the sectors written in
``/sys/block/<dev>/stat``, every :data:`POLL_S`, and when the bytes written since the
last recovery pass ``after`` it rewrites the throttle of every block cgroup of this
process that carries one for the device (v1 ``blkio.throttle.write_bps_device``, v2
``io.max``): what fio is held to changes in the kernel, mid-write, as on a drive. Idle
for ``recover_idle_s`` (no sector written), it writes the burst rate back. Each change
is kept as an event (when, bytes written, the groups changed) for the manifest.

The counter sees bytes once the throttle let them through, so the cliff lands within one
poll of the declared amount (at 100 MB/s, 10 ms: 1 MB).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.core.units import parse_size
from iolab.isolation import cgroup_v1, cgroup_v2
from iolab.isolation.cgroupfs import leftovers

log = logging.getLogger(__name__)

#: how often the device's write counter is read (seconds)
POLL_S = 0.01
CLIFF_KEYS = {"after", "write_bps", "recover_idle_s"}


@dataclasses.dataclass(frozen=True)
class CliffSpec:
    """A declared write cliff: ``write_bps`` after ``after_bytes``, the burst back after ``recover_idle_s`` idle."""

    after_bytes: int
    write_bps: int
    recover_idle_s: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse_cliff(spec, context: str) -> CliffSpec | None:
    """A profile's ``cliff:`` mapping (None when absent); errors name ``context`` and the field."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise IolabError("must be a mapping with after, write_bps and recover_idle_s", context=context)
    unknown, missing = set(spec) - CLIFF_KEYS, CLIFF_KEYS - set(spec)
    if unknown or missing:
        raise IolabError(f"unknown field(s) {', '.join(sorted(unknown))}" if unknown
                         else f"missing field(s) {', '.join(sorted(missing))}", context=context)
    after = parse_size(spec["after"], context=f"{context}.after")
    rate, idle = spec["write_bps"], spec["recover_idle_s"]
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise IolabError(f"must be a positive whole number of bytes/s, got {rate!r}", context=f"{context}.write_bps")
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or idle <= 0:
        raise IolabError(f"must be a positive number of seconds, got {idle!r}", context=f"{context}.recover_idle_s")
    if after <= 0:
        raise IolabError("must be more than 0 bytes", context=f"{context}.after")
    return CliffSpec(after_bytes=after, write_bps=rate, recover_idle_s=float(idle))


def written_sectors(device: str) -> int:
    """Sectors (512 bytes) written to ``device`` (``/dev/loopN``) since it was made: field 7 of its stat."""
    path = Path("/sys/block") / Path(os.path.realpath(device)).name / "stat"
    try:
        return int(path.read_text().split()[6])
    except (OSError, IndexError, ValueError) as exc:
        raise IolabError(f"cannot read the written sectors: {exc}", context=str(path)) from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def groups_throttling(devnum: str, *, owner: int | None = None) -> list[tuple[Path, object]]:
    """This process's block cgroups carrying a throttle for ``devnum``, with their hierarchy's module."""
    found = []
    for path in leftovers(owner=os.getpid() if owner is None else owner):
        d = Path(path)
        hierarchy = cgroup_v2 if (d / "io.max").exists() else cgroup_v1 if (
            d / "blkio.throttle.write_bps_device").exists() else None
        if hierarchy is None:
            continue
        with_limits = hierarchy.throttle_in_force(d, devnum)
        if any(v is not None for v in with_limits.values()):
            found.append((d, hierarchy))
    return found


class CliffWatch:
    """The thread that moves an emulated device's write ceiling (see the module's text)."""

    def __init__(self, device: str, throttle, cliff: CliffSpec, *, poll_s: float = POLL_S):
        self.device, self.burst, self.cliff, self.poll_s = device, throttle, cliff, poll_s
        self.state = "burst"
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def throttle(self):
        """The throttle in force now: the burst one, or with the cliff's write rate."""
        with self._lock:
            if self.state == "cliff":
                return dataclasses.replace(self.burst, write_bps=self.cliff.write_bps)
            return self.burst

    def start(self) -> "CliffWatch":
        self._baseline = written_sectors(self.device)
        self._thread = threading.Thread(target=self._watch, name=f"cliffwatch {self.device}", daemon=True)
        self._thread.start()
        log.info("cliff watch on %s: %d B/s after %d bytes, burst back after %.1f s idle", self.device,
                 self.cliff.write_bps, self.cliff.after_bytes, self.cliff.recover_idle_s)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _watch(self) -> None:
        last, last_change = self._baseline, time.monotonic()
        while not self._stop.wait(self.poll_s):
            try:
                sectors = written_sectors(self.device)
            except IolabError as exc:  # the device went away under us: nothing left to throttle
                log.warning("cliff watch stops: %s", exc)
                return
            now = time.monotonic()
            if sectors != last:
                last, last_change = sectors, now
            written = (sectors - self._baseline) * 512
            if self.state == "burst" and written >= self.cliff.after_bytes:
                self._change("cliff", written)
            elif now - last_change >= self.cliff.recover_idle_s and sectors != self._baseline:
                # idle long enough: the cache is empty again, whatever was written so far
                self._baseline = sectors
                if self.state == "cliff":
                    self._change("burst", written)

    def _change(self, state: str, written: int) -> None:
        with self._lock:
            self.state = state
        throttle = self.throttle
        changed = []
        for d, hierarchy in groups_throttling(throttle.device):
            try:
                hierarchy.throttle(d, throttle, fake=False)
                changed.append(str(d))
            except IolabError as exc:  # a group removed meanwhile
                log.info("cliff watch: %s", exc)
        event = {"event": "cliff" if state == "cliff" else "recovered", "at": _now(),
                 "written_bytes": written, "write_bps": throttle.write_bps, "groups": changed}
        self.events.append(event)
        log.info("cliff watch %s: %s after %d bytes, write ceiling %d B/s (%d group(s))",
                 self.device, event["event"], written, throttle.write_bps, len(changed))

    def describe(self) -> dict:
        return {"declared": self.cliff.as_dict(), "burst_write_bps": self.burst.write_bps,
                "state": self.state, "poll_s": self.poll_s, "events": list(self.events)}
