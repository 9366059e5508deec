"""Statistics over tidy results: summaries, the tools' own statistics, repeats, flags.

Computation only: every function takes a tidy DataFrame (one row per test x
repetition x direction, :data:`iolab.core.columns.RESULT_COLUMNS`) and returns a new
one; nothing here reads files, prints or draws.

Conventions
-----------
* ``cov`` is the coefficient of variation as a *fraction* (0.03 = 3 %), from the
  sample standard deviation (``ddof=1``) over the mean.
* Confidence intervals use Student's t with ``n - 1`` degrees of freedom; the
  quantile is computed here (:func:`t_quantile`), so SciPy is not needed.
* "Best" follows CrystalDiskMark: the maximum for throughput and IOPS, the
  minimum for latency, time and CPU (:func:`iolab.analysis.metrics.lower_is_better`).
* Rows marked ``valid == False`` or carrying a fio ``error`` are left out of
  every statistic (``drop_invalid=False`` keeps them); summaries say how many
  rows were excluded.
"""
from __future__ import annotations

import logging
import math
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from iolab.core.columns import EXTRA_COLUMNS
from iolab.core.errors import IolabError
from iolab.core.units import parse_size
from iolab.analysis.metrics import lower_is_better
from iolab.analysis.student_t import t_cdf, t_quantile  # noqa: F401  (public here: stats.t_quantile)

log = logging.getLogger(__name__)

#: Default grouping: one group per run x target x test x direction; its rows are
#: the repetitions of one measurement.
# numjobs: pgbench's client counts; tool: an equivalent and the original tool (bonnie++, hdparm) never pooled
DEFAULT_BY = ("run_id", "target", "test", "direction", "numjobs", "tool")
#: Default metrics of :func:`summarize`.
DEFAULT_METRICS = ("bw_mbps", "iops", "lat_mean_us", "lat_p99_us")
#: Columns carried into summaries when they are constant within a group.
DEFAULT_KEEP = ("host", "label", "recipe", "bs", "iodepth", "numjobs")

#: Statistics :func:`aggregate` knows, and the tool that uses each.
STATISTICS = {
    "best": "CrystalDiskMark: best of N passes (max MB/s and IOPS, min latency)",
    "mean": "KDiskMark (Default profile): arithmetic mean of N passes",
    "median": "median of N passes",
}

#: Flags :func:`flag_results` computes (it recomputes these and keeps any other flag).
FLAG_CPU_BOUND = "cpu_bound"
FLAG_TOO_SHORT = "too_short"
FLAG_HIGH_VARIANCE = "high_variance"
FLAG_SMALL_FILE = "small_file"
#: The one high_variance threshold (CoV as a fraction): the flag, the report's text and the README use it.
HIGH_VARIANCE_COV = 0.05
#: Set by the engine from the device counters; kept as it is.
FLAG_CACHE_SUSPECT = "cache_suspect"
OWN_FLAGS = (FLAG_CPU_BOUND, FLAG_TOO_SHORT, FLAG_HIGH_VARIANCE, FLAG_SMALL_FILE)


# --------------------------------------------------------------------------- #
# Spread of repetitions
# --------------------------------------------------------------------------- #
def confidence_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Student's t interval for the mean of ``values`` (NaN dropped).

    Fewer than two values give ``(nan, nan)``: one measurement has no spread.
    """
    x = _finite(values)
    n = len(x)
    if n < 2:
        return (math.nan, math.nan)
    mean = float(np.mean(x))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * float(np.std(x, ddof=1)) / math.sqrt(n)
    return (mean - half, mean + half)


def cov(values: Iterable[float]) -> float:
    """Coefficient of variation (sample std / |mean|) as a fraction; NaN if undefined."""
    x = _finite(values)
    if len(x) < 2:
        return math.nan
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1))
    if mean == 0:
        return 0.0 if std == 0 else math.nan
    return std / abs(mean)


def _finite(values: Iterable[float]) -> np.ndarray:
    x = np.asarray(pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce"), dtype=float)
    return x[np.isfinite(x)]


# --------------------------------------------------------------------------- #
# Grouping helpers
# --------------------------------------------------------------------------- #
def _resolve_by(results: pd.DataFrame, by: Sequence[str] | str, *, what: str) -> list[str]:
    """Grouping columns present in ``results``.

    An absent optional column (one of :data:`iolab.core.columns.EXTRA_COLUMNS`, e.g.
    ``target``, which a bare ``parse_output`` frame lacks) is skipped; any other
    absent column is a mistake and raises.
    """
    if isinstance(by, str):
        by = (by,)
    present, missing = [], []
    for column in by:
        if column in results.columns:
            present.append(column)
        elif column in EXTRA_COLUMNS or column == "numjobs":
            log.debug("%s: optional column %r absent, not grouping by it", what, column)
        else:
            missing.append(column)
    if missing:
        raise IolabError(
            f"no column {', '.join(map(repr, missing))} to group by", context=what,
            hint=f"columns are: {', '.join(map(str, results.columns))}",
        )
    return present


def _check_metrics(results: pd.DataFrame, metrics: Sequence[str] | str, *, what: str) -> list[str]:
    if isinstance(metrics, str):
        metrics = (metrics,)
    missing = [m for m in metrics if m not in results.columns]
    if missing:
        raise IolabError(f"no metric column {', '.join(map(repr, missing))}", context=what,
                         hint=f"columns are: {', '.join(map(str, results.columns))}")
    return list(metrics)


def _has_error(series: pd.Series) -> pd.Series:
    """True where fio reported an error (anything but empty, NaN, 0)."""
    text = series.astype("string").str.strip().fillna("")
    return ~text.isin(["", "0", "0.0", "None", "nan", "<NA>"])


def valid_rows(results: pd.DataFrame) -> pd.Series:
    """Boolean mask of rows fit for statistics: not ``valid == False``, no fio error."""
    mask = pd.Series(True, index=results.index)
    if "valid" in results.columns:
        valid = results["valid"]
        falsy = valid.map(lambda v: v is False or (isinstance(v, str) and v.strip().lower() in ("false", "0", "no"))
                          or (isinstance(v, (int, float, np.bool_)) and not pd.isna(v) and not bool(v)))
        mask &= ~falsy.astype(bool)
    if "error" in results.columns:
        mask &= ~_has_error(results["error"])
    return mask


def _groups(frame: pd.DataFrame, by: list[str]):
    """(key tuple, sub-frame) pairs; NaN keys are a group of their own."""
    if not by:
        yield (), frame
        return
    for key, sub in frame.groupby(by, dropna=False, sort=True):
        yield (key if isinstance(key, tuple) else (key,)), sub


def _warn_duplicate_reps(sub: pd.DataFrame, key: tuple, by: list[str], what: str) -> None:
    if "rep" not in sub.columns or sub["rep"].isna().all():
        return
    counts = sub["rep"].value_counts()
    if (counts > 1).any():
        hint = [c for c in ("job", "bs", "iodepth", "numjobs") if c in sub.columns and c not in by
                and sub[c].nunique(dropna=False) > 1]
        log.warning(
            "%s: group %s has %d rows for one repetition: different measurements are being "
            "pooled%s", what, dict(zip(by, key)), int(counts.max()),
            f" (add {', '.join(hint)} to by=)" if hint else "",
        )


def _kept(sub: pd.DataFrame, keep: Sequence[str], by: list[str]) -> dict:
    out = {}
    for column in keep:
        if column in sub.columns and column not in by:
            values = sub[column].dropna().unique()
            out[column] = values[0] if len(values) == 1 else None  # not constant: say nothing
    return out


def _prepare(results: pd.DataFrame, drop_invalid: bool, what: str) -> tuple[pd.DataFrame, pd.Series]:
    if not isinstance(results, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(results).__name__}", context=what)
    mask = valid_rows(results) if drop_invalid else pd.Series(True, index=results.index)
    if (~mask).any():
        log.info("%s: %d of %d rows excluded (valid=False or fio error)", what, int((~mask).sum()), len(results))
    return results, mask


# --------------------------------------------------------------------------- #
# Summaries
# --------------------------------------------------------------------------- #
def summarize(results: pd.DataFrame, by: Sequence[str] = DEFAULT_BY,
              metrics: Sequence[str] = DEFAULT_METRICS, *, confidence: float = 0.95,
              keep: Sequence[str] = DEFAULT_KEEP, drop_invalid: bool = True) -> pd.DataFrame:
    """Descriptive statistics per group and metric, tidy.

    Returns one row per group x metric with the ``by`` columns, ``metric``,
    ``n`` (finite values used), ``n_excluded`` (rows left out as invalid),
    ``mean``, ``median``, ``std`` (ddof=1), ``cov`` (fraction), ``ci_low`` and
    ``ci_high`` (Student's t interval of the mean at ``confidence``), ``best``
    and ``worst`` (max/min for throughput, min/max for latency: see
    :func:`iolab.analysis.metrics.lower_is_better`), ``confidence``, plus the ``keep`` columns that are
    constant within the group. A metric with no finite value in a group gives
    no row.
    """
    what = "summarize"
    by = _resolve_by(results, by, what=what)
    metrics = _check_metrics(results, metrics, what=what)
    if not 0 < confidence < 1:
        raise IolabError(f"confidence must be in (0, 1), got {confidence}", context=what)
    results, mask = _prepare(results, drop_invalid, what)
    rows = []
    for key, sub in _groups(results, by):
        good = sub[mask.loc[sub.index]]
        _warn_duplicate_reps(good, key, by, what)
        base = dict(zip(by, key))
        base.update(_kept(sub, keep, by))
        for metric in metrics:
            x = _finite(good[metric])
            n = len(x)
            if n == 0:
                continue
            mean = float(np.mean(x))
            std = float(np.std(x, ddof=1)) if n > 1 else math.nan
            low, high = confidence_interval(x, confidence)
            lower = lower_is_better(metric)
            rows.append({
                **base, "metric": metric, "n": n, "n_excluded": int(len(sub) - len(good)),
                "mean": mean, "median": float(np.median(x)), "std": std, "cov": cov(x),
                "ci_low": low, "ci_high": high,
                "best": float(np.min(x) if lower else np.max(x)),
                "worst": float(np.max(x) if lower else np.min(x)),
                "confidence": confidence,
            })
    columns = by + [c for c in keep if c in results.columns and c not in by] + [
        "metric", "n", "n_excluded", "mean", "median", "std", "cov", "ci_low", "ci_high",
        "best", "worst", "confidence"]
    return pd.DataFrame(rows, columns=columns)


def aggregate(results: pd.DataFrame, statistic: str = "best", *, by: Sequence[str] = DEFAULT_BY,
              metrics: Sequence[str] = ("bw_mbps", "iops", "lat_mean_us"),
              keep: Sequence[str] = DEFAULT_KEEP, drop_invalid: bool = True) -> pd.DataFrame:
    """One value per test and metric, the way the emulated tool reports it.

    ``statistic`` is ``"best"`` (CrystalDiskMark: max MB/s and IOPS, min
    latency, each taken independently over the N passes, as CDM does),
    ``"mean"`` (KDiskMark's Default profile) or ``"median"``. Returns one row
    per group (wide: one column per metric) with a ``statistic`` column naming
    the statistic and ``n`` (passes used), so a table can say "best of 5".
    Concatenate two calls to show CDM's and KDM's figures side by side.
    """
    what = "aggregate"
    if statistic not in STATISTICS:
        raise IolabError(f"unknown statistic {statistic!r}", context=what,
                         hint=f"use one of {', '.join(STATISTICS)}")
    by = _resolve_by(results, by, what=what)
    metrics = _check_metrics(results, metrics, what=what)
    results, mask = _prepare(results, drop_invalid, what)
    rows = []
    for key, sub in _groups(results, by):
        good = sub[mask.loc[sub.index]]
        if good.empty:
            continue
        _warn_duplicate_reps(good, key, by, what)
        row = dict(zip(by, key))
        row.update(_kept(sub, keep, by))
        row["statistic"] = statistic
        row["n"] = len(good)
        for metric in metrics:
            x = _finite(good[metric])
            if len(x) == 0:
                row[metric] = math.nan
            elif statistic == "best":
                row[metric] = float(np.min(x) if lower_is_better(metric) else np.max(x))
            elif statistic == "mean":
                row[metric] = float(np.mean(x))
            else:
                row[metric] = float(np.median(x))
        rows.append(row)
    columns = by + [c for c in keep if c in results.columns and c not in by] + ["statistic", "n"] + metrics
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------- #
# Adaptive repeats (the Phoronix approach)
# --------------------------------------------------------------------------- #
def _check_repeat_args(cov_target: float, min_n: int, max_n: int) -> None:
    if min_n < 1 or max_n < min_n:
        raise IolabError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}",
                         context="repeats")
    if cov_target < 0:
        raise IolabError(f"cov_target must be >= 0, got {cov_target}", context="repeats")


def needs_more(values: Sequence[float], *, cov_target: float = 0.03, min_n: int = 3,
               max_n: int = 10) -> bool:
    """Should another repetition run?

    True while fewer than ``min_n`` values exist, or while the coefficient of
    variation of the finite values exceeds ``cov_target`` (a fraction: 0.03 is
    3 %) and fewer than ``max_n`` values exist. ``len(values)`` counts every
    attempt, finite or not, so a measurement that keeps failing (NaN) still
    stops at ``max_n``.
    """
    _check_repeat_args(cov_target, min_n, max_n)
    n = len(values)
    if n < min_n:
        return True
    if n >= max_n:
        return False
    finite = _finite(values)
    if len(finite) < 2:
        return True
    spread = cov(finite)
    return math.isnan(spread) or spread > cov_target


def repeat_until_stable(measure: Callable[[], float], *, cov_target: float = 0.03, min_n: int = 3,
                        max_n: int = 10, on_result: Callable[[int, float], None] | None = None
                        ) -> list[float]:
    """Call ``measure()`` until :func:`needs_more` says stop; return every value.

    ``len(result)`` is the number of repetitions (record it as ``n``). The
    optional ``on_result(rep, value)`` is called after each repetition (rep
    counts from 1) so a caller can save results as they come. An exception
    from ``measure`` propagates; what was measured before it is whatever
    ``on_result`` saved. An engine that interleaves several targets per
    repetition calls :func:`needs_more` on each target's values instead and
    goes on while any of them needs more.
    """
    _check_repeat_args(cov_target, min_n, max_n)
    values: list[float] = []
    while needs_more(values, cov_target=cov_target, min_n=min_n, max_n=max_n):
        value = measure()
        try:
            value = float(value)
        except (TypeError, ValueError) as exc:
            raise IolabError(f"measure() returned {value!r}, not a number", context="repeats") from exc
        values.append(value)
        if on_result is not None:
            on_result(len(values), value)
    spread = cov(values)
    if spread > cov_target:
        log.info("repeats: stopped at the cap n=%d with CoV %.1f %% > %.1f %%",
                 len(values), 100 * spread, 100 * cov_target)
    return values


# --------------------------------------------------------------------------- #
# Flags
# --------------------------------------------------------------------------- #
def split_flags(value) -> list[str]:
    """``"a;b"`` -> ``["a", "b"]``; NaN/None/"" -> ``[]``."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return []
    return [part.strip() for part in str(value).split(";") if part.strip()]


def _join_flags(parts: Iterable[str]) -> str:
    seen: list[str] = []
    for part in parts:
        if part and part not in seen:
            seen.append(part)
    return ";".join(seen)


def _buffered(results: pd.DataFrame, buffered) -> pd.Series:
    """Which rows used buffered (page-cache) I/O."""
    if buffered is not None and not isinstance(buffered, str):
        if isinstance(buffered, (bool, np.bool_)):
            return pd.Series(bool(buffered), index=results.index)
        return pd.Series(buffered, index=results.index).fillna(False).astype(bool)
    if "direct" in results.columns:
        direct = pd.to_numeric(results["direct"], errors="coerce")
        return direct.eq(0)
    if "isolation" in results.columns:
        # cgroup/hugepages isolate buffered tests; "direct" means O_DIRECT;
        # "none" is deliberately cached and needs no warning.
        return results["isolation"].isin(["cgroup", "hugepages"])
    return pd.Series(False, index=results.index)


def flag_results(results: pd.DataFrame, *, cpu_count: int | None = None, min_runtime_s: float = 1.0,
                 mem_limit=None, file_size=None, cov_threshold: float = HIGH_VARIANCE_COV,
                 cpu_bound_pct: float = 90.0, variance_metric: str = "bw_mbps",
                 by: Sequence[str] = DEFAULT_BY, file_factor: float = 4.0,
                 buffered=None, cpu_is_total: bool = True) -> pd.DataFrame:
    """Return a copy of ``results`` with a ``flags`` column (``;``-joined).

    Flags computed here (recomputed on every call, so changing a threshold
    takes effect); any other flag already present, such as the engine's
    ``cache_suspect``, is kept:

    * ``cpu_bound``: the fio jobs' CPU (``cpu_usr_pct + cpu_sys_pct``, percent
      of one core) reaches ``cpu_bound_pct`` % of what they could get:
      ``100 x numjobs`` (each job near a full core), or ``100 x cpu_count``
      when there are more jobs than CPUs. With ``cpu_is_total=True`` (the
      convention of :mod:`iolab.engine.fio.parse`, which sums the jobs' CPU) the
      values are totals over the row's ``numjobs`` jobs; with False they are
      per-job averages (what fio itself prints with ``group_reporting``).
    * ``too_short``: ``runtime_s < min_runtime_s``.
    * ``high_variance``: the CoV of ``variance_metric`` over the row's group
      (``by``: the repetitions of one measurement) exceeds ``cov_threshold``.
    * ``small_file``: a buffered test whose file is smaller than
      ``file_factor`` x ``mem_limit`` (the page cache could hold a good part
      of it). ``mem_limit`` and ``file_size`` are bytes or sizes like
      ``"512M"``; ``file_size=None`` uses a ``file_size`` column if present.
      Buffered rows come from ``buffered`` (bool or per-row mask), else a
      ``direct`` column (0), else ``isolation`` in (cgroup, hugepages).
    """
    what = "flag_results"
    if not isinstance(results, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(results).__name__}", context=what)
    if cpu_count is not None and cpu_count < 1:
        raise IolabError(f"cpu_count must be >= 1, got {cpu_count}", context=what)
    out = results.copy()
    new: dict = {index: [] for index in out.index}
    for flag, rows in (
            (FLAG_CPU_BOUND, _cpu_bound_rows(out, cpu_count, cpu_bound_pct, cpu_is_total)),
            (FLAG_TOO_SHORT, out.index[_numeric(out, "runtime_s") < min_runtime_s]
             if min_runtime_s is not None else []),
            (FLAG_HIGH_VARIANCE, _high_variance_rows(out, cov_threshold, variance_metric, by, what)),
            (FLAG_SMALL_FILE, _small_file_rows(out, mem_limit, file_size, file_factor, buffered, what))):
        for index in rows:
            new[index].append(flag)
    existing = out["flags"] if "flags" in out.columns else pd.Series(None, index=out.index, dtype=object)
    out["flags"] = [
        _join_flags([f for f in split_flags(existing.loc[index]) if f not in OWN_FLAGS] + new[index])
        for index in out.index
    ]
    return out


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    if column in frame.columns:
        return pd.to_numeric(frame[column], errors="coerce")
    return pd.Series(math.nan, index=frame.index)


def _cpu_bound_rows(out: pd.DataFrame, cpu_count, cpu_bound_pct: float, cpu_is_total: bool):
    """Rows whose jobs' total CPU reaches ``cpu_bound_pct`` % of the cores they could use."""
    usr, sys_ = _numeric(out, "cpu_usr_pct"), _numeric(out, "cpu_sys_pct")
    cpu = usr.fillna(0) + sys_.fillna(0)
    cpu[usr.isna() & sys_.isna()] = math.nan
    jobs = _numeric(out, "numjobs").fillna(1).clip(lower=1)
    if not cpu_is_total:
        cpu = cpu * jobs
    usable = jobs if cpu_count is None else jobs.clip(upper=cpu_count)
    return out.index[cpu >= cpu_bound_pct / 100.0 * 100.0 * usable]


def _high_variance_rows(out: pd.DataFrame, cov_threshold, variance_metric: str, by, what: str) -> list:
    """Rows of the groups (repetitions of one measurement) whose CoV exceeds ``cov_threshold``."""
    if cov_threshold is None or variance_metric not in out.columns:
        return []
    mask, rows = valid_rows(out), []
    for _, sub in _groups(out, _resolve_by(out, by, what=what)):
        spread = cov(sub.loc[mask.loc[sub.index], variance_metric])
        if not math.isnan(spread) and spread > cov_threshold:
            rows += list(sub.index)
    return rows


def _small_file_rows(out: pd.DataFrame, mem_limit, file_size, file_factor: float, buffered, what: str):
    """Buffered rows whose file is under ``file_factor`` x ``mem_limit``."""
    if mem_limit is None:
        return []
    limit = parse_size(mem_limit, context="mem_limit")
    if file_size is not None:
        sizes = pd.Series(float(parse_size(file_size, context="file_size")), index=out.index)
    elif "file_size" in out.columns:
        sizes = out["file_size"].map(
            lambda v: math.nan if pd.isna(v) else float(parse_size(v, context="file_size")))
    else:
        log.info("%s: mem_limit given but no file size: small_file not checked", what)
        return []
    small = _buffered(out, buffered) & (sizes < file_factor * limit)
    return out.index[small.fillna(False).astype(bool)]


def has_flag(results: pd.DataFrame, flag: str) -> pd.Series:
    """Boolean mask of rows carrying ``flag``."""
    if "flags" not in results.columns:
        return pd.Series(False, index=results.index)
    return results["flags"].map(lambda v: flag in split_flags(v)).astype(bool)
