"""Tidy fleet data for reports: every fleet row, scaling (aggregate vs number of hosts),
per-host tail latency, start spread (tables for :mod:`iolab.report.fleetplots`).
"""

from __future__ import annotations

import logging

import pandas as pd

from iolab.engine.store import load as store_load
from iolab.fleet.inventory_schema import ALL_HOSTS
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)


def load(data_dir="data", fleet_id: str | None = None) -> pd.DataFrame:
    """Every fleet row (per host and aggregate) under ``data_dir``; ``fleet_id`` filters by prefix."""
    table = store_load(data_dir)
    if "fleet_id" not in table.columns:
        return table.iloc[0:0]
    table = table[table["fleet_id"].notna()]
    if fleet_id:
        table = table[table["fleet_id"].astype(str).str.startswith(fleet_id)]
    return table.reset_index(drop=True)


def _usable(data: pd.DataFrame, what: str) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(data).__name__}", context=what)
    needed = ["host", "test", "direction", "rep", "fleet_id", "n_hosts"]
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise IolabError(f"no column {', '.join(map(repr, missing))} (fleet results needed)", context=what)
    rows = data[(data["host"] != ALL_HOSTS) & data["direction"].notna()]
    if "valid" in rows.columns:
        rows = rows[rows["valid"].astype(str).str.lower().isin(["true", "1"])]
    if "error" in rows.columns:
        rows = rows[rows["error"].isna()]
    return rows


def scaling_table(data: pd.DataFrame, *, metric: str = "bw_mbps") -> pd.DataFrame:
    """Aggregate ``metric`` vs number of hosts running at once, one row per fleet run x test x direction.

    Sums the per-host rows of each repetition (a repetition where fewer hosts
    delivered than ran is left out and logged), then averages the repetitions.
    Columns: ``n_hosts, test, direction, fleet_id, total`` (sum over hosts),
    ``per_host`` (total / n_hosts), ``speedup`` (total / total at the smallest
    n of the same test and direction), ``efficiency`` (speedup / (n / n_min)),
    ``reps``, ``metric``.
    """
    rows = _usable(data, "scaling_table")
    if metric not in rows.columns:
        raise IolabError(f"no column {metric!r}", context="scaling_table")
    keys = ["fleet_id", "n_hosts", "test", "direction", "rep"]
    sums = rows.groupby(keys, dropna=False).agg(total=(metric, "sum"), measured=("host", "nunique")).reset_index()
    partial = sums[sums["measured"] < sums["n_hosts"]]
    if len(partial):
        log.warning("scaling_table: leaving out %d repetition(s) where not every host delivered", len(partial))
    sums = sums[sums["measured"] >= sums["n_hosts"]]
    table = sums.groupby(["n_hosts", "test", "direction", "fleet_id"], dropna=False).agg(
        total=("total", "mean"), reps=("rep", "nunique")).reset_index()
    table["n_hosts"] = table["n_hosts"].astype(int)
    table["per_host"] = table["total"] / table["n_hosts"]
    table = table.sort_values(["test", "direction", "n_hosts"]).reset_index(drop=True)
    base = table.loc[table.groupby(["test", "direction"])["n_hosts"].idxmin()].set_index(["test", "direction"])
    ref = table.set_index(["test", "direction"]).index.map(lambda k: base.loc[k, "total"])
    ref_n = table.set_index(["test", "direction"]).index.map(lambda k: base.loc[k, "n_hosts"])
    table["speedup"] = table["total"] / list(ref)
    table["efficiency"] = table["speedup"] / (table["n_hosts"] / list(ref_n))
    table["metric"] = metric
    return table[["n_hosts", "test", "direction", "fleet_id", "total", "per_host", "speedup", "efficiency",
                  "reps", "metric"]]


#: Latency columns of :func:`tail_latency`, and their names in the ``percentile`` column.
TAIL_COLUMNS = {"lat_p50_us": "p50", "lat_p99_us": "p99", "lat_p999_us": "p99.9", "lat_max_us": "max"}


def tail_latency(data: pd.DataFrame, *, statistic: str = "median") -> pd.DataFrame:
    """Per-host tail latency, long form: ``host, label, n_hosts, test, direction, percentile, latency_us``.

    One row per host x fleet size x test x direction x percentile (p50, p99,
    p99.9, max), over the repetitions by ``statistic`` (``median``, ``mean``
    or ``max``).
    """
    if statistic not in ("median", "mean", "max"):
        raise IolabError(f"must be median, mean or max, got {statistic!r}", context="tail_latency: statistic")
    rows = _usable(data, "tail_latency")
    present = [c for c in TAIL_COLUMNS if c in rows.columns]
    keys = ["host", "label", "n_hosts", "test", "direction"] if "label" in rows.columns else \
        ["host", "n_hosts", "test", "direction"]
    long = rows.melt(id_vars=keys + ["rep"], value_vars=present, var_name="column", value_name="latency_us")
    long = long.dropna(subset=["latency_us"])
    table = long.groupby(keys + ["column"], dropna=False)["latency_us"].agg(statistic).reset_index()
    table["percentile"] = table["column"].map(TAIL_COLUMNS)
    order = {name: i for i, name in enumerate(TAIL_COLUMNS.values())}
    table = table.sort_values(keys + ["percentile"], key=lambda s: s.map(order) if s.name == "percentile" else s)
    return table[keys + ["percentile", "latency_us"]].reset_index(drop=True)


def start_spread(data: pd.DataFrame) -> pd.DataFrame:
    """Per fleet run x test x rep: how far apart the hosts' jobs started (ms, by the servers' clocks)."""
    rows = data[(data["host"] != ALL_HOSTS)] if "host" in data else data
    if "start_ms" not in rows.columns:
        raise IolabError("no column 'start_ms' (fleet results needed)", context="start_spread")
    rows = rows.dropna(subset=["start_ms"]).drop_duplicates(["fleet_id", "host", "test", "rep"])
    grouped = rows.groupby(["fleet_id", "test", "rep"])["start_ms"]
    return grouped.agg(first="min", last="max", hosts="count").assign(
        spread_ms=lambda t: t["last"] - t["first"]).reset_index()
