"""What the commentary modules share: the summary frame they read (columns checked and defaulted, its
tests one by one), which way a metric is better (:mod:`iolab.analysis.metrics`), the thresholds (:class:`Rules`), and how values read in prose."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from iolab.report import i18n, verdicts
from iolab.core.errors import IolabError
from iolab.analysis.stats import HIGH_VARIANCE_COV
from iolab.analysis.metrics import higher_is_better  # noqa: F401  (the commentary modules import it from here)

#: Test names whose figures are read from memory, not the device (hdparm -T: "cached reads").
MEMORY_TESTS = ("-T", "cached reads", "cached_reads")

#: Flags the engine writes (``flags`` column, ';'-joined) that the prose explains.
KNOWN_FLAGS = ("cache_suspect", "cache_inflated", "cpu_bound", "high_variance", "too_short",
               "small_file", "oom_killed", "error")


@dataclass(frozen=True)
class Rules:
    """Thresholds of the commentary (defaults as in the module docstring)."""
    tolerance: float = verdicts.TIE_TOLERANCE  # a tie when values differ by at most this fraction
    par: float = verdicts.PAR  # "on par" with the baseline within this fraction
    inflated: float = 10.0    # cached / isolated >= this: inflated by the page cache
    helped: float = 2.0       # cached / isolated >= this: probably helped by the cache
    max_cov: float = HIGH_VARIANCE_COV  # a CoV above this is a caveat (the stored flag's threshold)
    severe_cov: float = 0.20  # ... above this, the variation is called large
    pct_below: float = 1.2    # leads below this factor are stated in percent
    max_listed: int = 8       # more systems than this: name the first few, summarise the rest
    top: int = 3              # ... naming this many


def checked_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``summary`` (system, test, value ...) with the columns the commentary reads, defaulted where
    missing; an :class:`IolabError` naming the columns it cannot do without."""
    missing = {"system", "test", "value"} - set(summary.columns)
    if missing:
        raise IolabError("summary lacks columns " + ", ".join(sorted(missing)), context="commentary")
    frame = summary.copy()
    for column, default in (("direction", ""), ("metric", ""), ("unit", ""), ("n", 1), ("flags", ""),
                            ("ci_low", math.nan), ("ci_high", math.nan), ("cov", math.nan),
                            ("unmeasurable", False), ("cache_isolated", True)):
        if column not in frame.columns:
            frame[column] = default
    frame["direction"] = frame["direction"].fillna("").astype(str)
    frame["flags"] = frame["flags"].fillna("").astype(str)
    frame["cache_isolated"] = frame["cache_isolated"].map(lambda v: True if pd.isna(v) else bool(v))
    frame["unmeasurable"] = frame["unmeasurable"].fillna(False).astype(bool)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    return frame


def groups_by_test(frame: pd.DataFrame):
    """``(test, direction, rows)`` per test of a checked summary, in order of appearance."""
    keys = ["test", "direction"]
    order = frame[keys].drop_duplicates()
    for test, direction in order.itertuples(index=False):
        yield test, direction, frame[(frame["test"] == test) & (frame["direction"] == direction)]


#: Units of time: a metric in one of them is a duration (latency, elapsed seconds), said short or long in Japanese.
TIME_UNITS = ("ns", "us", "µs", "ms", "s", "min")


def is_time(unit) -> bool:
    """True when ``unit`` is a unit of time (``ms``, ``µs``, ``s``...)."""
    return isinstance(unit, str) and unit.strip() in TIME_UNITS


def prose_value(value: float, unit: str, lang: str, *, published: bool) -> str:
    """A value and its unit in a sentence: as the article printed it (``published``) or rounded as measured."""
    number = i18n.as_published(value) if published else i18n.number(value)
    unit = i18n.unit(unit, lang) if unit else ""
    return i18n.with_unit(number, unit)
