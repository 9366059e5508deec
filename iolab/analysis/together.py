"""Figures of parts measured at the same time, added up: targets of one ``--simultaneous`` pass, hosts of one
fleet run. One rule for both.

The parts started together but need not end together (a time-based job ends at its runtime, a size-based one
when its bytes are done, a slow host later than a fast one). The total's rate is the I/O the parts did over the
time they took together, the longest part's runtime: ``sum(rate x own runtime) / max runtime``. Adding the
rates instead would count a part that stopped early as if it had run the whole time. Without a positive runtime
for every part, the rates are added as they are. The mean latency is weighted by each part's I/O count
(IOPS x runtime), as one job over all of them would have averaged it. (fio's parser applies the same rule to
one step's jobs from their exact byte and I/O counts: :func:`iolab.engine.fio.parse` ``_rates``.)
"""
from __future__ import annotations

import math

import pandas as pd


def _numbers(values) -> pd.Series:
    """``values`` as numbers (callers pass their columns as they are: None, "", or text become NaN here)."""
    return pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce")


def _timed(runtimes: pd.Series) -> bool:
    return bool(len(runtimes) and runtimes.notna().all() and (runtimes > 0).all())


def total_rate(rates, runtimes) -> float:
    """The parts' rate together: their I/O over the longest runtime (module docstring); NaN without any rate."""
    rate, runtime = _numbers(rates), _numbers(runtimes)
    if not _timed(runtime):
        return float(rate.sum(min_count=1))
    return float((rate * runtime.values).sum(min_count=1) / runtime.max())


def mean_latency(latencies, iops, runtimes) -> float:
    """The mean latency over every I/O of the parts: each part's mean weighted by its I/O count; NaN without I/O."""
    lat, rate, runtime = _numbers(latencies), _numbers(iops), _numbers(runtimes)
    ios = rate * (runtime.values if _timed(runtime) else 1)
    counted = lat.notna() & ios.notna() & (ios > 0)
    if not counted.any():
        return math.nan
    return float((lat[counted] * ios[counted]).sum() / ios[counted].sum())
