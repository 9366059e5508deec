"""The write cliff: where a sustained write's rate falls and settles, from a per-second series.

A consumer SSD writes into a fast cache (SLC, DRAM) until it is full, then at the
rate its flash really sustains; after some idle time the cache is emptied and the
burst rate comes back. :func:`find_cliff` reads that from fio's per-second
bandwidth log (``write_bw_log`` + ``log_avg_msec=1000``: each sample the mean rate
over the second before its timestamp) and :func:`recovery` judges a second, short
write made after an idle pause.

The cliff is a two-level step fitted to the series: every split into "before"
and "after" with one transition sample between them is tried, the one with the
least absolute error wins (its levels are the medians of each side, so a slow first
sample or a stray one does not move them). The transition sample mixes both rates;
the share of it spent at the burst rate, ``(r_t - after) / (burst - after)``, places
the cliff inside that second, so the bytes before it are known far more finely than
the one-second sampling (exact for a clean step). A fall of less than
:data:`MIN_DROP` of the burst rate, or an "after" level that does not settle
(coefficient of variation over :data:`MAX_SETTLED_COV`), is no cliff.

Computation only; the numbers are decimal bytes per second, as everywhere in iolab.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Sequence

from iolab.analysis.fiolog import FIO_LOG_UNIT, read_log
from iolab.core.errors import IolabError

#: the rate must fall by at least this share of the burst rate to be a cliff
MIN_DROP = 0.2
#: the samples after the cliff must vary less than this (std/mean) to have settled
MAX_SETTLED_COV = 0.15
#: a recovery write at or above this share of the way back from the "after" rate to the burst rate recovered
RECOVERED_SHARE = 0.8


@dataclasses.dataclass(frozen=True)
class Cliff:
    """What :func:`find_cliff` found (``found`` False: the rate held; only ``burst_bps`` is then set)."""

    found: bool
    burst_bps: float                 # the rate before the cliff (bytes/s)
    after_bps: float | None = None   # the settled rate after it
    cliff_bytes: float | None = None  # bytes written before the rate fell
    cliff_s: float | None = None     # seconds from the start of the write to the cliff
    samples: int = 0
    after_cov: float | None = None   # how settled the "after" level is (std/mean)

    @property
    def drop(self) -> float | None:
        """The share of the burst rate lost at the cliff (0.8: the rate fell to a fifth)."""
        return None if self.after_bps is None else 1 - self.after_bps / self.burst_bps

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "drop": self.drop}


def _intervals(times_s: Sequence[float]) -> list[float]:
    """Length of each sample's interval: from the previous timestamp (the first from 0)."""
    previous, lengths = 0.0, []
    for t in times_s:
        if t <= previous and lengths:
            raise IolabError(f"timestamps must increase, got {t} after {previous}", context="cliff series")
        lengths.append(max(t - previous, 1e-9))
        previous = t
    return lengths


def _spread(values: Sequence[float]) -> float:
    """Sum of absolute deviations from the median (a robust fit's error)."""
    if not values:
        return 0.0
    middle = statistics.median(values)
    return sum(abs(v - middle) for v in values)


def _best_split(rates: Sequence[float]) -> int:
    """Index of the transition sample of the best two-level fit (before: rates[:t], after: rates[t+1:]).

    The error is each side's absolute deviation from its median plus how far the transition
    sample lies outside the two levels (a mix of both rates lies between them), so a sample
    at the burst rate is not left out of the "before" side for free.
    """
    best, best_cost = 1, None
    for t in range(1, len(rates) - 1):
        high, low = statistics.median(rates[:t]), statistics.median(rates[t + 1:])
        outside = max(0.0, rates[t] - max(high, low), min(high, low) - rates[t])
        cost = _spread(rates[:t]) + _spread(rates[t + 1:]) + outside
        if best_cost is None or cost < best_cost:
            best, best_cost = t, cost
    return best


def find_cliff(times_s: Sequence[float], rates_bps: Sequence[float], *, min_drop: float = MIN_DROP,
               max_settled_cov: float = MAX_SETTLED_COV) -> Cliff:
    """The cliff in a per-second series: ``times_s`` end each sample, ``rates_bps`` its mean rate.

    Needs at least three samples (one before the cliff, the second it falls in, one after).
    """
    times, rates = [float(t) for t in times_s], [float(r) for r in rates_bps]
    if len(times) != len(rates):
        raise IolabError(f"{len(times)} timestamps but {len(rates)} rates", context="cliff series")
    if len(rates) < 3:
        raise IolabError(f"{len(rates)} samples: a cliff needs at least 3 (before, during, after)",
                         context="cliff series", hint="write longer, or more than the drive's cache")
    if any(r < 0 for r in rates):
        raise IolabError("a rate is negative", context="cliff series")
    lengths = _intervals(times)
    t = _best_split(rates)
    burst, after = statistics.median(rates[:t]), statistics.median(rates[t + 1:])
    tail = rates[t + 1:]
    cov = statistics.pstdev(tail) / after if after > 0 and len(tail) > 1 else 0.0
    if burst <= 0 or after > burst * (1 - min_drop) or cov > max_settled_cov:
        return Cliff(found=False, burst_bps=statistics.median(rates), samples=len(rates))
    share = min(1.0, max(0.0, (rates[t] - after) / (burst - after)))
    before_bytes = sum(r * dt for r, dt in zip(rates[:t], lengths[:t]))
    cliff_s = times[t] - lengths[t] + share * lengths[t]
    return Cliff(found=True, burst_bps=burst, after_bps=after, samples=len(rates), after_cov=cov,
                 cliff_bytes=before_bytes + share * lengths[t] * burst, cliff_s=cliff_s)


def recovery(cliff: Cliff, recovered_bps: float, *, share: float = RECOVERED_SHARE) -> dict:
    """How far a write after an idle pause came back: ``recovered`` when it reached ``share`` of the
    way from the "after" rate to the burst rate; ``fraction`` 1.0 is the full burst rate back."""
    if not cliff.found:
        return {"recovery_bps": recovered_bps, "fraction": None, "recovered": None}
    fraction = (recovered_bps - cliff.after_bps) / (cliff.burst_bps - cliff.after_bps)
    return {"recovery_bps": recovered_bps, "fraction": fraction, "recovered": fraction >= share}


def parse_bw_log(text: str, *, unit: int = FIO_LOG_UNIT) -> tuple[list[float], list[float]]:
    """fio's bandwidth log (:func:`iolab.analysis.fiolog.read_log`; values in KiB/s) -> seconds, bytes/s."""
    frame = read_log(text, context="bandwidth log")
    return frame["t_s"].tolist(), (frame["value"] * unit).tolist()


#: the columns :func:`cliff_columns` adds to a sustained-write row (rates in MB/s, 10^6 B/s)
CLIFF_COLUMNS = ("cliff_found", "burst_mbps", "cliff_bytes", "cliff_s", "after_mbps", "cliff_drop",
                 "recovery_mbps", "recovery_fraction", "recovered", "cliff_samples")


def cliff_columns(cliff: Cliff, recovered_bps: float | None = None) -> dict:
    """One row's worth of a cliff finding (and the recovery write's rate, when there was one)."""
    back = recovery(cliff, recovered_bps) if recovered_bps is not None else {}

    def mbps(value):
        return None if value is None else round(value / 1e6, 3)
    return {"cliff_found": cliff.found, "burst_mbps": mbps(cliff.burst_bps),
            "cliff_bytes": None if cliff.cliff_bytes is None else int(cliff.cliff_bytes),
            "cliff_s": None if cliff.cliff_s is None else round(cliff.cliff_s, 3),
            "after_mbps": mbps(cliff.after_bps), "cliff_drop": None if cliff.drop is None else round(cliff.drop, 4),
            "recovery_mbps": mbps(back.get("recovery_bps")),
            "recovery_fraction": None if back.get("fraction") is None else round(back["fraction"], 4),
            "recovered": back.get("recovered"), "cliff_samples": cliff.samples}


def series_text(values) -> str:
    """A per-second series as one CSV-friendly cell (``"1;2.5;3"``): the row keeps its shape for reports."""
    return ";".join(f"{float(v):g}" for v in values)


def series_values(text) -> list[float]:
    """The numbers of a :func:`series_text` cell (empty for a missing one)."""
    if text is None or (isinstance(text, float) and text != text) or not str(text).strip():
        return []
    try:
        return [float(v) for v in str(text).split(";")]
    except ValueError:
        raise IolabError(f"not a series of numbers: {str(text)[:60]!r}", context="cliff series") from None
