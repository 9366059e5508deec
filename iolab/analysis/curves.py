"""Analysis for the curve recipes: qd-sweep knee, gnome-disks position curve, concurrency.

Computation only (drawing lives in :mod:`iolab.report.curveplots`). Inputs are tidy
DataFrames; outputs are DataFrames or small result objects.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from iolab.core.errors import IolabError
from iolab.analysis.stats import valid_rows

log = logging.getLogger(__name__)

#: Name of the computed outstanding-I/O column (iodepth x numjobs).
OIO = "oio"


def _require(data: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    if not isinstance(data, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(data).__name__}", context=what)
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise IolabError(f"no column {', '.join(map(repr, missing))}", context=what,
                         hint=f"columns are: {', '.join(map(str, data.columns))}")


def _usable(data: pd.DataFrame) -> pd.DataFrame:
    """Rows fit for analysis (not ``valid == False``, no fio error)."""
    mask = valid_rows(data)
    if (~mask).any():
        log.info("%d of %d rows left out (valid=False or fio error)", int((~mask).sum()), len(data))
    return data[mask]


def _single_series(data: pd.DataFrame, what: str,
                   columns=("run_id", "host", "target", "direction", "bs")) -> None:
    """A sweep must be one curve: refuse mixed directions, block sizes, runs.

    ``test`` is not checked: a recipe may name every sweep point as a test.
    """
    mixed = [c for c in columns if c in data.columns and data[c].nunique(dropna=True) > 1]
    if mixed:
        raise IolabError(
            f"data holds several curves (different {', '.join(mixed)})", context=what,
            hint="select one curve first, e.g. data[data.direction == 'read']",
        )


# --------------------------------------------------------------------------- #
# qd-sweep
# --------------------------------------------------------------------------- #
def sweep_axis(data: pd.DataFrame, x: str = "iodepth") -> pd.Series:
    """The sweep's x values: outstanding I/O (``iodepth x numjobs``) for a QD sweep.

    With ``x="iodepth"`` (or ``x="oio"``) and a ``numjobs`` column, the axis is
    OIO = iodepth x numjobs, the load the device really sees (SNIA's "OIO =
    threads x QD"). Any other ``x`` is taken as it is.
    """
    if x in ("iodepth", OIO) and "iodepth" in data.columns:
        depth = pd.to_numeric(data["iodepth"], errors="coerce")
        if "numjobs" in data.columns:
            jobs = pd.to_numeric(data["numjobs"], errors="coerce").fillna(1)
            return (depth * jobs).rename(OIO)
        return depth.rename(OIO)
    if x == OIO:
        raise IolabError("no column 'iodepth' to compute outstanding I/O from", context="sweep")
    return pd.to_numeric(data[x], errors="coerce").rename(x)


def sweep_table(data: pd.DataFrame, *, x: str = "iodepth", iops: str = "iops",
                p99: str = "lat_p99_us") -> pd.DataFrame:
    """One row per sweep point (repetitions reduced to their median), ordered by x.

    Columns: ``x`` (the sweep axis: OIO for a QD sweep), ``n``, ``iops``,
    ``p99``, ``iops_gain`` and ``p99_growth`` (relative change from the
    previous point: 0.05 = +5 %), and ``iodepth``/``numjobs`` when known.
    """
    what = "sweep"
    _require(data, [c for c in (x, iops, p99) if c != OIO], what)
    data = _usable(data)
    axis = sweep_axis(data, x)
    frame = pd.DataFrame({
        "x": axis.to_numpy(),
        "iops": pd.to_numeric(data[iops], errors="coerce").to_numpy(),
        "p99": pd.to_numeric(data[p99], errors="coerce").to_numpy(),
    })
    for column in ("iodepth", "numjobs"):
        if column in data.columns:
            frame[column] = pd.to_numeric(data[column], errors="coerce").to_numpy()
    frame = frame[np.isfinite(frame["x"])]
    grouped = frame.groupby("x", sort=True)
    table = grouped.median(numeric_only=True)
    table.insert(0, "n", grouped.size())
    table = table.reset_index()
    for column in ("iodepth", "numjobs"):
        if column in table.columns:
            # several configurations can share one OIO (QD8xT1, QD4xT2): say so
            distinct = grouped[column].nunique()
            table.loc[distinct.to_numpy() > 1, column] = math.nan
    table["iops_gain"] = table["iops"] / table["iops"].shift(1) - 1.0
    table["p99_growth"] = table["p99"] / table["p99"].shift(1) - 1.0
    return table


@dataclass
class Knee:
    """Result of :func:`find_knee`.

    ``row`` is the sweep point (a row of ``table``) after which the device is
    saturated, or None; ``reason`` says why, in words a report can quote;
    ``table`` is :func:`sweep_table`'s output with a ``saturated`` column
    marking the steps that meet the criterion.
    """

    row: pd.Series | None
    reason: str
    table: pd.DataFrame = field(repr=False)
    x_name: str = "oio"

    @property
    def found(self) -> bool:
        return self.row is not None

    @property
    def x(self) -> float | None:
        return None if self.row is None else float(self.row["x"])

    def __bool__(self) -> bool:
        return self.found


def find_knee(data: pd.DataFrame, *, x: str = "iodepth", iops: str = "iops", p99: str = "lat_p99_us",
              iops_gain: float = 0.05, p99_growth: float = 0.20) -> Knee:
    """The knee of a queue-depth sweep: the last point worth its queue depth.

    Definition: order the sweep points by x (OIO = iodepth x numjobs for a QD
    sweep, see :func:`sweep_axis`), reduce repetitions to their median, and
    look at each step from point k to point k+1. A step is *saturated* when
    IOPS grows by less than ``iops_gain`` (relative; a drop counts) while p99
    latency grows by more than ``p99_growth``. The knee is point k of the
    first saturated step: beyond it, more outstanding I/O buys latency, not
    IOPS. The thresholds are per step, so they assume the usual geometric
    sweep (1, 2, 4, 8, ...).

    Returns a :class:`Knee`; ``knee.row`` is None (with the reason) when the
    sweep has fewer than two points, lacks p99, or never saturates.
    """
    what = "find_knee"
    _require(data, [c for c in (x, iops, p99) if c != OIO], what)
    _single_series(data, what)
    table = sweep_table(data, x=x, iops=iops, p99=p99)
    x_name = OIO if x in ("iodepth", OIO) else x
    table["saturated"] = (table["iops_gain"] < iops_gain) & (table["p99_growth"] > p99_growth)
    if len(table) < 2:
        return Knee(None, f"a sweep needs at least two points of {x_name}, got {len(table)}", table, x_name)
    if table["p99"].isna().all():
        return Knee(None, f"no {p99} values: cannot tell latency growth", table, x_name)
    hits = np.flatnonzero(table["saturated"].to_numpy())
    if len(hits) == 0:
        last = table.iloc[-1]
        return Knee(None, (
            f"not saturated within the sweep: no step where IOPS grows < {iops_gain:.0%} while p99 "
            f"grows > {p99_growth:.0%} (up to {x_name} {last['x']:g}, {last['iops']:.0f} IOPS)"),
            table, x_name)
    k = int(hits[0]) - 1
    row, nxt = table.iloc[k], table.iloc[k + 1]
    reason = (
        f"knee at {x_name} {row['x']:g}: going to {nxt['x']:g} adds {nxt['iops_gain']:+.1%} IOPS "
        f"but {nxt['p99_growth']:+.1%} p99 latency")
    return Knee(row, reason, table, x_name)


# --------------------------------------------------------------------------- #
# gnome-disks position curve and access time
# --------------------------------------------------------------------------- #
def _curve_groups(samples: pd.DataFrame, by: Sequence[str] | None) -> list[str]:
    if by is None:
        return [c for c in ("run_id", "target", "direction") if c in samples.columns]
    by = [by] if isinstance(by, str) else list(by)
    _require(samples, by, "curve")
    return by


def _fit_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line y = intercept + slope * x."""
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan, math.nan
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def position_profile(samples: pd.DataFrame, *, position: str = "position", rate: str = "bw_mbps",
                     flat_tolerance: float = 0.10, bins: int = 10,
                     by: Sequence[str] | None = None) -> pd.DataFrame:
    """Transfer rate along the device (GNOME Disks' curve, zcav), summarised.

    ``samples`` has one row per sample: ``position`` as a fraction of the
    device (0 = LBA 0, the outer tracks of an HDD; 1 = the end) and ``rate``
    in MB/s. Returns one row per curve (grouped by ``by``; default: whichever
    of run_id, target, direction are present) with:

    * ``n``, ``avg``, ``min``, ``max`` (MB/s);
    * ``first_decile``, ``last_decile``: mean rate of the first and last tenth
      of the samples ordered by position; ``decline`` = first / last (2.0 for
      a disk that falls from 200 to 100 MB/s; 1.0 when flat);
    * ``slope``: least-squares slope in MB/s per whole device (the fitted
      change from start to end), ``slope_rel`` = slope / avg, and
      ``decline_fit`` = fitted rate at position 0 / fitted rate at 1 (2.0 for
      a straight fall from 200 to 100 MB/s; the decile ratio of that straight
      line is a little lower, as each decile averages over its tenth);
    * ``max_dev``: the largest deviation of a bin mean (samples ordered by
      position, split into ``bins`` bins) from ``avg``, as a fraction;
      ``is_flat`` = ``max_dev <= flat_tolerance``. Bin means, not single
      samples, so one slow sample does not make a flat device "not flat",
      while a dip in the middle (which a slope would miss) does.
    """
    what = "position_profile"
    _require(samples, (position, rate), what)
    by = _curve_groups(samples, by)
    samples = _usable(samples)
    pos_all = pd.to_numeric(samples[position], errors="coerce")
    if (pos_all > 1.0 + 1e-9).any() or (pos_all < -1e-9).any():
        raise IolabError(f"{position!r} must be a fraction of the device (0..1)", context=what,
                         hint="divide a percentage by 100, or an offset by the device size")
    rows = []
    groups = samples.groupby(by, dropna=False, sort=True) if by else [((), samples)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        frame = pd.DataFrame({"p": pd.to_numeric(sub[position], errors="coerce"),
                              "r": pd.to_numeric(sub[rate], errors="coerce")}).dropna()
        frame = frame.sort_values("p", kind="mergesort")
        n = len(frame)
        row = dict(zip(by, key))
        if n == 0:
            continue
        p, r = frame["p"].to_numpy(), frame["r"].to_numpy()
        avg = float(r.mean())
        tenth = max(1, math.ceil(n / 10))
        first, last = float(r[:tenth].mean()), float(r[-tenth:].mean())
        slope, intercept = _fit_slope(p, r)
        fit_end = intercept + slope
        parts = [part for part in np.array_split(r, min(bins, n)) if len(part)]
        bin_means = np.array([part.mean() for part in parts])
        max_dev = float(np.max(np.abs(bin_means / avg - 1.0))) if avg > 0 else math.nan
        row.update({
            "n": n, "avg": avg, "min": float(r.min()), "max": float(r.max()),
            "first_decile": first, "last_decile": last,
            "decline": first / last if last > 0 else math.nan,
            "slope": slope, "slope_rel": slope / avg if avg > 0 else math.nan,
            "decline_fit": intercept / fit_end if fit_end > 0 else math.nan,
            "max_dev": max_dev, "is_flat": bool(max_dev <= flat_tolerance) if n >= 2 else False,
            "flat_tolerance": flat_tolerance,
        })
        rows.append(row)
    columns = list(by) + ["n", "avg", "min", "max", "first_decile", "last_decile", "decline",
                          "slope", "slope_rel", "decline_fit", "max_dev", "is_flat", "flat_tolerance"]
    return pd.DataFrame(rows, columns=columns)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3:
        return math.nan
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    return _pearson(rx, ry)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def seek_distance(samples: pd.DataFrame, *, position: str = "position") -> pd.Series:
    """|position - previous position| in sample order (first sample: NaN), as GNOME Disks plots."""
    _require(samples, (position,), "seek_distance")
    return pd.to_numeric(samples[position], errors="coerce").diff().abs().rename("seek_distance")


def access_time_summary(samples: pd.DataFrame, *, time: str = "access_ms",
                        distance: str = "seek_distance", position: str = "position",
                        by: Sequence[str] | None = None) -> pd.DataFrame:
    """Random-access time summary (GNOME Disks' 1000 random 4 KiB reads).

    ``samples`` has one row per read, in the order they were made, with the
    access time in ms (``time``) and either the seek distance as a fraction
    of the device (``distance``) or the read's ``position``, from which the
    distance to the previous read is computed (GNOME Disks drops its first
    sample for lack of a previous one; here its distance is NaN and it only
    counts in the time statistics). Returns one row per group with ``n``,
    ``mean_ms``, ``median_ms``, ``p95_ms``, ``max_ms`` and the correlation of
    seek distance with time, Pearson (``corr``) and Spearman (``corr_rank``):
    strongly positive on an HDD (seek time grows with distance), near zero on
    flash.
    """
    what = "access_time_summary"
    _require(samples, (time,), what)
    if distance not in samples.columns and position not in samples.columns:
        raise IolabError(f"need {distance!r} or {position!r} for seek distances", context=what)
    by = _curve_groups(samples, by)
    samples = _usable(samples)
    rows = []
    groups = samples.groupby(by, dropna=False, sort=False) if by else [((), samples)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        t = pd.to_numeric(sub[time], errors="coerce")
        d = (pd.to_numeric(sub[distance], errors="coerce") if distance in sub.columns
             else seek_distance(sub, position=position))
        finite_t = t.dropna().to_numpy()
        if len(finite_t) == 0:
            continue
        both = pd.DataFrame({"d": d.to_numpy(), "t": t.to_numpy()}).dropna()
        rows.append({
            **dict(zip(by, key)), "n": len(finite_t), "mean_ms": float(finite_t.mean()),
            "median_ms": float(np.median(finite_t)), "p95_ms": float(np.percentile(finite_t, 95)),
            "max_ms": float(finite_t.max()),
            "corr": _pearson(both["d"].to_numpy(), both["t"].to_numpy()),
            "corr_rank": _spearman(both["d"].to_numpy(), both["t"].to_numpy()),
        })
    columns = list(by) + ["n", "mean_ms", "median_ms", "p95_ms", "max_ms", "corr", "corr_rank"]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------- #
# Concurrency
# --------------------------------------------------------------------------- #
def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2), in [1/n, 1].

    1 when every client got the same share, 1/n when one of n clients got
    everything. A client that did no I/O must be passed as 0, not left out.
    All zeros (nobody got anything) is NaN.
    """
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        raise IolabError("no values", context="jain_index")
    if not np.all(np.isfinite(x)):
        raise IolabError("values must be finite", context="jain_index",
                         hint="pass 0 for a client that did no I/O")
    if np.any(x < 0):
        raise IolabError("values must not be negative", context="jain_index")
    square_sum = float(np.sum(x * x))
    if square_sum == 0:
        return math.nan
    return float(np.sum(x)) ** 2 / (x.size * square_sum)


def scaling(data: pd.DataFrame, x: str = "numjobs", *, y: str = "bw_mbps", p99: str = "lat_p99_us",
            client: str | None = None, by: Sequence[str] = ()) -> pd.DataFrame:
    """Throughput, p99 latency and fairness against concurrency.

    ``data`` has one row per concurrency level x repetition, or, with
    ``client`` naming a column (``host`` for fio client/server, ``job`` for
    per-job rows), one row per client. For every level (and repetition),
    the clients' ``y`` are summed to ``total``; ``per_client`` = total /
    clients; ``p99`` is the worst client's (a mean of percentiles is not a
    percentile); ``jain`` is :func:`jain_index` over the clients (NaN without
    ``client``). Repetitions are then averaged. Also: ``speedup`` = total /
    total at the lowest level and ``efficiency`` = speedup / (x / lowest x)
    (1.0 = linear scaling). ``by`` keeps curves apart (e.g. ``("label",)``).
    Returns one row per ``by`` x level, ordered.
    """
    what = "scaling"
    by = [by] if isinstance(by, str) else list(by)
    needed = [x, y] + ([client] if client else []) + by
    _require(data, needed, what)
    data = _usable(data)
    has_p99 = p99 in data.columns
    rep = "rep" if "rep" in data.columns else None
    frame = pd.DataFrame({
        "_x": pd.to_numeric(data[x], errors="coerce").to_numpy(),
        "_y": pd.to_numeric(data[y], errors="coerce").to_numpy(),
        "_p99": pd.to_numeric(data[p99], errors="coerce").to_numpy() if has_p99 else math.nan,
        "_rep": data[rep].to_numpy() if rep else 0,
        "_client": data[client].to_numpy() if client else np.arange(len(data)),
    })
    for column in by:
        frame[column] = data[column].to_numpy()
    frame = frame[np.isfinite(frame["_x"])]
    level_rows = []
    for key, sub in frame.groupby(by + ["_x", "_rep"], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        ys = sub["_y"].fillna(0.0).to_numpy()
        level_rows.append({
            **dict(zip(by + ["_x", "_rep"], key)),
            "clients": len(sub), "total": float(ys.sum()),
            "p99": float(sub["_p99"].max()) if sub["_p99"].notna().any() else math.nan,
            "jain": jain_index(ys) if client else math.nan,
        })
    levels = pd.DataFrame(level_rows, columns=by + ["_x", "_rep", "clients", "total", "p99", "jain"])
    out_rows = []
    for key, sub in levels.groupby(by + ["_x"], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        clients = float(sub["clients"].mean())
        total = float(sub["total"].mean())
        out_rows.append({
            **dict(zip(by, key[:-1])), x: key[-1], "n": len(sub), "clients": clients,
            "total": total, "per_client": total / clients if clients else math.nan,
            "p99": float(sub["p99"].mean()) if sub["p99"].notna().any() else math.nan,
            "jain": float(sub["jain"].mean()) if sub["jain"].notna().any() else math.nan,
        })
    out = pd.DataFrame(out_rows, columns=by + [x, "n", "clients", "total", "per_client", "p99", "jain"])
    out["speedup"] = math.nan
    out["efficiency"] = math.nan
    curves = out.groupby(by, dropna=False, sort=False) if by else [((), out)]
    for _, sub in curves:
        sub = sub.sort_values(x)
        base = sub.iloc[0]
        if base["total"] > 0 and base[x] > 0:
            speedup = sub["total"] / base["total"]
            out.loc[sub.index, "speedup"] = speedup
            out.loc[sub.index, "efficiency"] = speedup / (sub[x] / base[x])
    return out.sort_values(by + [x], kind="mergesort").reset_index(drop=True)
