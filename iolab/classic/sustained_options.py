"""The ``sustained-write`` recipe's ``options``, checked, and the size of its write after the idle pause.

The write after the idle pause (the ``recovery`` test) must last long enough for its rate to be the
drive's: a fixed 64 MiB took 0.1 s on the ``sata-ssd`` profile and measured 594 MB/s against its
500 MB/s ceiling (the kernel's throttle lets a first slice through before it holds). So it is sized
from the sustained write's measured burst rate: ``recovery_s`` seconds at that rate, bounded

* below by :data:`MIN_BYTES` (a slow drive's write still spans several throttle slices),
* above by ``cache_share`` of the bytes the drive took before its cliff, when it had one (a write
  longer than the emptied cache would measure the cliff again, not the recovery), which wins over
  the floor,
* and by the amount the sustained write moved (a file target is never grown by it).

:func:`recovery_size` returns the bytes and why (a code), recorded in the manifest. Nothing here runs
anything.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Annotated

from pydantic import Field

from iolab.core import schema
from iolab.core.schema import Schema, Seconds

MiB = 1024**2
#: the recovery write is at least this long (unless the cache before the cliff is smaller)
MIN_BYTES = 16 * MiB
#: what it writes when no burst rate was measured (the sustained write failed or logged nothing)
FALLBACK_BYTES = 64 * MiB
#: its size is a whole number of these (the recipe's 128 KiB blocks)
ALIGN = 128 * 1024


class SustainedOptions(Schema):
    """A sustained-write recipe's ``options``."""
    recovery_s: Seconds = Field(3.0, description="seconds the write after the idle pause lasts at the measured "
                                                 "burst rate")
    cache_share: Annotated[float, schema.check(lambda v: 0 < v <= 1, "must be a fraction above 0 and at most 1, "
                                                                      "got {value!r}")] = Field(
        0.8, description="the write after the idle pause moves at most this share of the bytes before the cliff")


def parse_options(recipe) -> SustainedOptions:
    """The recipe's options checked; errors name the file and the field."""
    return schema.validate(SustainedOptions, recipe.options or {}, recipe.source or recipe.name, at="options")


@dataclasses.dataclass(frozen=True)
class RecoverySize:
    """The recovery write's ``bytes`` and ``why``: ``burst`` (seconds at the burst rate), ``floor``
    (:data:`MIN_BYTES`), ``cache`` (the share of the bytes before the cliff), ``amount`` (the sustained
    write's amount) or ``no_burst`` (nothing measured: :data:`FALLBACK_BYTES`)."""

    bytes: int
    why: str
    burst_bps: float | None
    cliff_bytes: float | None
    seconds: float

    def record(self) -> dict:
        return {"bytes": self.bytes, "why": self.why, "seconds_at_burst": self.seconds,
                "burst_mbps": None if self.burst_bps is None else round(self.burst_bps / 1e6, 3),
                "cliff_bytes": None if self.cliff_bytes is None else int(self.cliff_bytes)}


def recovery_size(burst_bps, cliff_bytes, amount: int, options: SustainedOptions) -> RecoverySize:
    """How much the write after the idle pause moves (see the module's text)."""
    measured = burst_bps is not None and math.isfinite(burst_bps) and burst_bps > 0
    if measured:
        planned, why = burst_bps * options.recovery_s, "burst"
        if planned < MIN_BYTES:
            planned, why = MIN_BYTES, "floor"
    else:
        planned, why, burst_bps = FALLBACK_BYTES, "no_burst", None
    if cliff_bytes and planned > options.cache_share * cliff_bytes:
        planned, why = options.cache_share * cliff_bytes, "cache"
    if planned >= amount:
        planned, why = amount, "amount"
    size = int(planned) // ALIGN * ALIGN or int(planned)  # whole blocks; under one block as it is
    return RecoverySize(bytes=max(1, size), why=why, burst_bps=burst_bps, cliff_bytes=cliff_bytes or None,
                        seconds=options.recovery_s)
