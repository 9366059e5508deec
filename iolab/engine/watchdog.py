"""How long one fio process may run before iolab stops it (a per-test watchdog).

A test that hangs (fio in D state under a tiny memory limit, a device that
stopped answering, a stopped process) must not hold a run forever. The limit
is computed from the job itself::

    limit = ramp_time + I/O time + layout estimate + margin

where the I/O time is ``runtime`` when the job has one (it caps the job, time
based or not), else the bytes it moves at the slowest bandwidth iolab assumes
(:data:`FLOOR_BPS`, or an emulated device's lower throttle), and the layout
estimate is the test files written at that same bandwidth. Jobs in one file
are summed, as if fio ran them one after another (conservative: never early).
When the limit passes, the runner stops fio (SIGINT, then SIGKILL after a
grace period) and records :meth:`Limit.reason` as the test's error.
"""
from __future__ import annotations

import dataclasses
import re

from iolab.engine.fio.parse import parse_fio_size

#: The slowest a device is assumed to move data (bytes/s) when nothing better is known.
FLOOR_BPS = 10e6
#: Seconds added to every limit (process start-up, fsync at the end, a busy machine).
MARGIN_S = 60.0

_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*$", re.IGNORECASE)
_TIME_FACTORS = {"us": 1e-6, "ms": 1e-3, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400}


def fio_seconds(value) -> float:
    """A fio time option (``30``, ``"30s"``, ``"2m"``; bare numbers are seconds) in seconds; 0 if unset."""
    if value in (None, ""):
        return 0.0
    match = _TIME.match(str(value))
    if not match:
        return 0.0  # fio --parse-only accepted it; an odd spelling only shortens our estimate's I/O part
    unit = match.group(2).lower() if match.group(2) else None
    return float(match.group(1)) * _TIME_FACTORS[unit]


@dataclasses.dataclass(frozen=True)
class Limit:
    """A watchdog limit and the parts it was made of (recorded in the error when it fires)."""

    ramp_s: float
    io_s: float
    layout_s: float
    margin_s: float

    @property
    def seconds(self) -> float:
        return self.ramp_s + self.io_s + self.layout_s + self.margin_s

    def reason(self, how: str) -> str:
        return (f"watchdog: fio still ran after {self.seconds:.0f} s (ramp {self.ramp_s:.0f} s + I/O "
                f"{self.io_s:.0f} s + layout {self.layout_s:.0f} s + margin {self.margin_s:.0f} s); {how}")

    def __add__(self, other: "Limit") -> "Limit":
        return Limit(self.ramp_s + other.ramp_s, self.io_s + other.io_s,
                     self.layout_s + other.layout_s, max(self.margin_s, other.margin_s))


def _int(value) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        return 1


def job_limit(options: dict, *, default_size: int, floor_bps: float = FLOOR_BPS,
              margin_s: float = MARGIN_S) -> Limit:
    """The limit of one fio job given its effective options (``[global]`` merged in)."""
    numjobs = max(1, _int(options.get("numjobs")))
    size = parse_fio_size(options.get("size")) or default_size or 0  # "50%" and the like: the target's size
    if options.get("io_size") or options.get("io_limit"):
        moved = parse_fio_size(options.get("io_size") or options.get("io_limit")) or size
    else:
        moved = size * max(1, _int(options.get("loops")))
    runtime = fio_seconds(options.get("runtime"))
    io_s = runtime if runtime else numjobs * moved / floor_bps
    layout_s = numjobs * size / floor_bps
    return Limit(fio_seconds(options.get("ramp_time")), io_s, layout_s, margin_s)


def jobfile_limit(text: str, *, default_size: int, floor_bps: float = FLOOR_BPS,
                  margin_s: float = MARGIN_S) -> Limit:
    """The limit of a whole fio job file: every job, ``[global]`` merged in, summed.

    The jobs are read the way fio reads them (:func:`iolab.engine.jobfile.access.jobs`, from fio's own view of
    the file), so ``$ncpus``, ``[globalX]`` and values cut at ``;`` count as they do for fio.
    """
    from iolab.engine.jobfile import access as jobaccess
    total = Limit(0.0, 0.0, 0.0, margin_s)
    for job in jobaccess.jobs(text, "job file"):
        total = total + job_limit(job.options, default_size=default_size, floor_bps=floor_bps, margin_s=margin_s)
    return total
