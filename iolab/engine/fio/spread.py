"""How fio's I/Os and bandwidth were spread: the share of I/Os slower than a threshold (tiotest's
"% > 2 s", from json+ histograms) and how evenly the clients of one job shared the device."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from iolab.engine.fio.parse import did_io, job_entries
from iolab.engine.fio.text import documents


def latency_over(text: str, thresholds_s: Iterable[float] = (2.0, 10.0)) -> pd.DataFrame:
    """Share of I/Os slower than each threshold, per job and direction (tiotest's "% > 2 s").

    Needs ``--output-format=json+`` (the latency histogram ``bins`` of
    ``lat_ns``, or ``clat_ns`` without ``lat_percentiles``); returns columns
    ``job, direction`` and ``over_<N>s_pct`` for each threshold. Entries of one
    job (numjobs without group_reporting) are added up. Empty when the output
    has no histogram.
    """
    thresholds = list(thresholds_s)
    docs = documents(text)
    if not docs:
        return pd.DataFrame(columns=["job", "direction"])
    entries, _ = job_entries(docs[-1])
    counts: dict[tuple[str, str], dict[int, int]] = {}
    for entry in entries:
        for direction in ("read", "write", "trim"):
            stats = entry.get(direction) or {}
            table = stats.get("lat_ns", {}) if "bins" in stats.get("lat_ns", {}) else stats.get("clat_ns", {})
            if "bins" not in table:
                continue
            merged = counts.setdefault((entry.get("jobname"), direction), {})
            for value, count in table["bins"].items():
                merged[int(value)] = merged.get(int(value), 0) + int(count)
    rows = []
    for (job, direction), bins in counts.items():
        total = sum(bins.values())
        if not total:
            continue
        row = {"job": job, "direction": direction}
        for limit in thresholds:
            slow = sum(count for value, count in bins.items() if value > limit * 1e9)
            row[f"over_{limit:g}s_pct"] = 100.0 * slow / total
        rows.append(row)
    return pd.DataFrame(rows, columns=["job", "direction"] + [f"over_{t:g}s_pct" for t in thresholds])


def client_fairness(text: str) -> pd.DataFrame:
    """How evenly the jobs (clients) of one fio job shared the device.

    For a job run with ``numjobs > 1`` *without* ``group_reporting`` fio
    reports one entry per clone; this gives per job name and direction the
    number of clients, Jain's fairness index of their bandwidth (1 = equal
    shares, 1/n = one client got everything) and the slowest and fastest
    client's MB/s. Jobs with a single entry are left out.
    """
    from iolab.analysis.curves import jain_index
    docs = documents(text)
    columns = ["job", "direction", "clients", "jain_index", "client_min_mbps", "client_max_mbps"]
    if not docs:
        return pd.DataFrame(columns=columns)
    entries, _ = job_entries(docs[-1])
    shares: dict[tuple[str, str], list[float]] = {}
    for entry in entries:
        for direction in ("read", "write", "trim"):
            stats = entry.get(direction) or {}
            if did_io(stats):
                shares.setdefault((entry.get("jobname"), direction), []).append(stats.get("bw_bytes", 0) / 1e6)
    rows = [{"job": job, "direction": direction, "clients": len(values), "jain_index": jain_index(values),
             "client_min_mbps": min(values), "client_max_mbps": max(values)}
            for (job, direction), values in shares.items() if len(values) > 1]
    return pd.DataFrame(rows, columns=columns)
