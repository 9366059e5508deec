"""Steady state as SNIA's Solid State Storage Performance Test Specification (PTS) defines it.

A drive is measured in rounds (one figure per round: IOPS or bytes/s); the measurement
window is the last :data:`WINDOW` rounds. The drive is steady when, over the window,

* the data excursion, ``max - min``, is at most :data:`MAX_RANGE` (20%) of the window's mean, and
* the slope excursion of the least-squares line through the window, ``slope x (rounds - 1)``
  (how far the fitted line moves from the window's first round to its last), is at most
  :data:`MAX_SLOPE` (10%) of the mean.

:func:`steady_state` tries the windows in order and stops at the first that meets both: the
round at which steady state was reached is that window's last round (rounds count from 1).

Why a series is not steady is said in :class:`Reason` codes with their figures (``range first=21
last=25 pct=23.4 max=20``), never in words: :func:`encode` writes them into a results column and
:func:`decode` reads them back, for the report to word in the reader's language.
Computation only: no device, no fio, no drawing.
"""
from __future__ import annotations

import dataclasses
import math
import re
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


#: a reason's code and its figures: ``code key=value key=value``; reasons joined by ``; ``
_REASON = re.compile(r"^([a-z][a-z_]*)((?: [a-z][a-z_]*=[A-Za-z0-9._/+-]+)*)$")


@dataclasses.dataclass(frozen=True)
class Reason:
    """Why (or how) something happened, as a code and the figures that say it."""

    code: str
    figures: dict = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        return " ".join([self.code] + [f"{k}={_token(v)}" for k, v in self.figures.items()])


def _token(value) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.6g}"
    return str(value)


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def encode(reasons: Sequence[Reason]) -> str | None:
    """``reasons`` as one column's text (None for none)."""
    return "; ".join(str(r) for r in reasons) or None


def decode(text) -> list[Reason] | None:
    """The reasons :func:`encode` wrote; None when ``text`` is not in that form (an older run's words)."""
    if not isinstance(text, str) or not text.strip():
        return None
    reasons = []
    for part in text.split("; "):
        match = _REASON.match(part.strip())
        if not match:
            return None
        figures = dict(item.split("=", 1) for item in match.group(2).split())
        reasons.append(Reason(match.group(1), {k: _value(v) for k, v in figures.items()}))
    return reasons


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
    reasons: tuple[Reason, ...] = ()    # why not steady (empty when reached)

    @property
    def why_not(self) -> str | None:
        """The reasons, encoded (:func:`encode`); None when reached."""
        return encode(self.reasons)

    def as_dict(self) -> dict:
        found = dataclasses.asdict(self)
        del found["reasons"]
        return {**found, "window": list(self.window), "why_not": self.why_not}


def slope(values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` against 0, 1, 2, ... (per round)."""
    n = len(values)
    if n < 2:
        raise IolabError(f"a slope needs two values or more, got {n}", context="steady state")
    x_mean, y_mean = (n - 1) / 2, sum(values) / n
    return (sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values))
            / sum((i - x_mean) ** 2 for i in range(n)))


def judge_window(values: Sequence[float], *, max_range: float = MAX_RANGE, max_slope: float = MAX_SLOPE,
                 first: int = 1) -> tuple[bool, float, float, float, tuple[Reason, ...]]:
    """One window (its first round ``first``): (steady, mean, range %, slope excursion %, why not)."""
    mean = sum(values) / len(values)
    where = {"first": first, "last": first + len(values) - 1}
    if not mean > 0:
        return False, mean, math.nan, math.nan, (Reason("no_mean", {**where, "mean": mean}),)
    range_share = (max(values) - min(values)) / mean
    slope_share = slope(values) * (len(values) - 1) / mean
    reasons = []
    if range_share > max_range + _EPS:
        reasons.append(Reason("range", {**where, "pct": round(range_share * 100, 1), "max": round(max_range * 100)}))
    if abs(slope_share) > max_slope + _EPS:
        reasons.append(Reason("slope", {**where, "pct": round(slope_share * 100, 1), "max": round(max_slope * 100)}))
    return not reasons, mean, range_share * 100, slope_share * 100, tuple(reasons)


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
        return SteadyState(False, rounds=n, reasons=(Reason("few_rounds", {"rounds": n, "window": window}),))
    last = None
    for end in range(window, n + 1):
        ok, mean, range_pct, slope_pct, why = judge_window(figures[end - window:end], max_range=max_range,
                                                           max_slope=max_slope, first=end - window + 1)
        last = SteadyState(ok, end if ok else None, tuple(range(end - window + 1, end + 1)), mean,
                           range_pct, slope_pct, n, why)
        if ok:
            return last
    return last
