"""The one rule for comparing two results, for both directions (higher or lower is better).

Every sentence of a report that compares numbers goes through these functions,
so that "18% below", "2.3x", "tie", "close" and "worse" mean the same thing
everywhere:

* **Factor** (:func:`advantage`): how many times ``a`` is better than ``b``;
  ``a / b`` when higher is better, ``b / a`` when lower is better. > 1 means
  ``a`` is better, < 1 worse.
* **Percentage** (:func:`pct_difference`): the difference stated relative to
  the value compared *with* (``b``): ``|a - b| / |b|``. 0.258 ms against
  0.305 ms is 15% below (not 18%); 6 s against 7 s is 14% below; 120 MB/s
  against 100 MB/s is 20% above.
* **Tie** (:func:`tie`): both results have >= 2 repetitions and their 95%
  confidence intervals overlap, or they differ by at most ``tolerance``
  (relative to the larger value).
* **Verdict** (:func:`verdict`): a factor is ``"tie"`` within the tolerance,
  ``"better"`` above it, ``"worse"`` below its inverse; :func:`bucket` names
  the size of a difference (``close`` within ``close`` of 1 either way).
* **Rank** (:func:`ranks`): best first; tied results share the better rank.
"""
from __future__ import annotations

import math

import pandas as pd

#: Results differing by at most this fraction (of the larger one) are a tie.
TIE_TOLERANCE = 0.03
#: Factors within this fraction of 1 (either way) are "on par" / "close".
PAR = 0.10


def advantage(a: float, b: float, higher: bool) -> float:
    """How many times ``a`` is better than ``b`` (> 1: ``a`` is better)."""
    if higher:
        return a / b if b else math.inf
    return b / a if a else math.inf


def pct_difference(a: float, b: float) -> float:
    """``|a - b|`` as a fraction of ``|b|`` (the value ``a`` is compared with)."""
    if not b:
        return math.inf
    return abs(a - b) / abs(b)


def within(a: float, b: float, tolerance: float = TIE_TOLERANCE) -> bool:
    """True when ``a`` and ``b`` differ by at most ``tolerance`` of the larger one."""
    top = max(abs(a), abs(b))
    return bool(top) and abs(a - b) / top <= tolerance or a == b


def tie(a, b, tolerance: float = TIE_TOLERANCE) -> str | None:
    """``"ci"`` when both have >= 2 repetitions and overlapping 95% CIs, ``"pct"``
    when within ``tolerance``, else None. ``a``/``b`` are mappings with
    ``value`` and optionally ``n``, ``ci_low``, ``ci_high``."""
    if (a.get("n", 1) or 0) >= 2 and (b.get("n", 1) or 0) >= 2:
        bounds = (a.get("ci_low"), a.get("ci_high"), b.get("ci_low"), b.get("ci_high"))
        if not any(v is None or pd.isna(v) for v in bounds):
            lo_a, hi_a, lo_b, hi_b = bounds
            if lo_a <= hi_b and lo_b <= hi_a:
                return "ci"
    if within(a["value"], b["value"], tolerance):
        return "pct"
    return None


def verdict(factor: float, tolerance: float = TIE_TOLERANCE) -> str:
    """``"tie"``, ``"better"`` or ``"worse"`` for a factor from :func:`advantage`."""
    if factor >= 1 / (1 - tolerance) - 1e-12:
        return "better"
    if factor <= 1 - tolerance + 1e-12:
        return "worse"
    return "tie"


def close(factor: float, par: float = PAR) -> bool:
    """True when a factor is within ``par`` of 1 either way (1.1x better or worse)."""
    return 1 / (1 + par) - 1e-12 <= factor <= 1 + par + 1e-12


def ranks(values: pd.Series, higher: bool, tolerance: float = TIE_TOLERANCE) -> pd.Series:
    """Rank 1 = best; a value tied (within ``tolerance``) with the one ranked
    before it shares that rank ("1, 1, 3")."""
    order = values.sort_values(ascending=not higher, kind="stable")
    out, rank, previous = {}, 0, None
    for position, (key, value) in enumerate(order.items(), start=1):
        if previous is None or not within(value, previous, tolerance):
            rank = position
        out[key] = rank
        previous = value
    return pd.Series(out).reindex(values.index)
