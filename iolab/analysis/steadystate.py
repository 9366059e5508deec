"""Steady state as SNIA's Solid State Storage Performance Test Specification (PTS) defines it.

A drive is measured in rounds (one figure per round: IOPS or bytes/s); the measurement
window is the last :data:`WINDOW` rounds. The drive is steady when, over the window,

* the data excursion, ``max - min``, is at most :data:`MAX_RANGE` (20%) of the window's mean, and
* the slope excursion of the least-squares line through the window, ``slope x (rounds - 1)``
  (how far the fitted line moves from the window's first round to its last), is at most
  :data:`MAX_SLOPE` (10%) of the mean.

:func:`steady_state` tries the windows in order and stops at the first that meets both: the
round at which steady state was reached is that window's last round (rounds count from 1).
Computation only: no device, no fio, no drawing.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from iolab.core.errors import IolabError

#: the measurement window: the last five rounds
WINDOW = 5
#: (max - min) of the window at most this share of its mean
MAX_RANGE = 0.20
#: the fitted line's excursion across the window at most this share of its mean
MAX_SLOPE = 0.10
#: a criterion met up to this rounding (a window at exactly 20% is steady, not lost to float error)
_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class SteadyState:
    """What :func:`steady_state` found for one series (figures of the window it judged)."""

    reached: bool
    round: int | None = None            # the round (from 1) whose window first met both criteria
    window: tuple[int, ...] = ()        # the rounds of the judged window (the steady one, else the last)
    mean: float | None = None           # the window's mean
    range_pct: float | None = None      # (max - min) as % of the mean
    slope_pct: float | None = None      # slope x (len - 1) as % of the mean (signed: negative falls)
    rounds: int = 0                     # how many rounds the series had
    why_not: str | None = None          # None when reached

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "window": list(self.window)}


def slope(values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` against 0, 1, 2, ... (per round)."""
    n = len(values)
    if n < 2:
        raise IolabError(f"a slope needs two values or more, got {n}", context="steady state")
    x_mean, y_mean = (n - 1) / 2, sum(values) / n
    return (sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values))
            / sum((i - x_mean) ** 2 for i in range(n)))


def judge_window(values: Sequence[float], *, max_range: float = MAX_RANGE,
                 max_slope: float = MAX_SLOPE) -> tuple[bool, float, float, float, str | None]:
    """One window: (steady, mean, range %, slope excursion %, why not)."""
    mean = sum(values) / len(values)
    if not mean > 0:
        return False, mean, math.nan, math.nan, f"the window's mean is {mean:g}: no figure to judge against"
    range_share = (max(values) - min(values)) / mean
    slope_share = slope(values) * (len(values) - 1) / mean
    reasons = []
    if range_share > max_range + _EPS:
        reasons.append(f"range {range_share:.1%} of the mean is over {max_range:.0%}")
    if abs(slope_share) > max_slope + _EPS:
        reasons.append(f"the fitted slope moves {slope_share:+.1%} of the mean across the window, over {max_slope:.0%}")
    return not reasons, mean, range_share * 100, slope_share * 100, "; ".join(reasons) or None


def steady_state(values: Sequence[float], *, window: int = WINDOW, max_range: float = MAX_RANGE,
                 max_slope: float = MAX_SLOPE) -> SteadyState:
    """The PTS verdict on per-round figures (round 1 first); see the module's text."""
    if window < 2:
        raise IolabError(f"a measurement window of {window} round(s): it needs two or more", context="steady state")
    figures = [float(v) for v in values]
    bad = [i + 1 for i, v in enumerate(figures) if not math.isfinite(v)]
    if bad:
        raise IolabError(f"round(s) {bad} have no figure (NaN or infinite)", context="steady state",
                         hint="a failed round cannot be judged; run again")
    n = len(figures)
    if n < window:
        return SteadyState(False, rounds=n, why_not=f"{n} round(s): the measurement window needs {window}")
    last = None
    for end in range(window, n + 1):
        ok, mean, range_pct, slope_pct, why = judge_window(figures[end - window:end], max_range=max_range,
                                                           max_slope=max_slope)
        last = SteadyState(ok, end if ok else None, tuple(range(end - window + 1, end + 1)), mean,
                           range_pct, slope_pct, n, None if ok else f"rounds {end - window + 1}-{end}: {why}")
        if ok:
            return last
    return last
