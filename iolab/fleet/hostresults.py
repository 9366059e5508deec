"""Results per host from fio's combined client output: which entries are whose, each host's own
fio JSON document, its start time, why a host delivered nothing, and the fleet's aggregate rows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from iolab.analysis import together
from iolab.engine.fio.parse import parse_output
from iolab.engine.store import order_columns
from iolab.fleet.hostplan import LOG_MS
from iolab.fleet.inventory import ALL_HOSTS

def client_key(entry: dict) -> tuple:
    return (str(entry.get("hostname")), entry.get("port"))


def match(entry: dict, specs: dict) -> str | None:
    """The host an output entry belongs to; ``specs`` maps host -> (hostname, port, kind)."""
    hostname, port = client_key(entry)
    for name, (h, p, kind) in specs.items():
        if hostname == h and (kind == "unix" or port == p):
            return name
    by_port = [name for name, (h, p, kind) in specs.items() if kind == "tcp" and p == port]
    return by_port[0] if len(by_port) == 1 else None


def rows_by_host(text: str, per_host: dict) -> dict:
    """:func:`iolab.engine.fio.parse.parse_output` of fio's combined client output, its rows split per host.

    The parser names a client by its address, or ``address:port`` where one
    address has several servers; the output entries each host owns (``per_host``,
    matched by :func:`match`) say which of those names are its own.
    """
    table = parse_output(text)
    split = {}
    for name, entries in per_host.items():
        keys = set()
        for entry in entries:
            hostname, port = client_key(entry)
            keys.update((hostname, f"{hostname}:{port}"))
        split[name] = table[table["host"].isin(keys)].reset_index(drop=True)
    return split


def missing_reason(text: str, hostname: str, port, timed_out: bool) -> str:
    lines = [fioserver_line for fioserver_line in (l.strip() for l in text.splitlines()) if fioserver_line]
    hits = [l for l in lines if hostname in l and ("connect" in l or "timed out" in l or "timeout" in l
                                                  or "disconnected" in l or "fio:" in l)]
    exact = [l for l in hits if f"{hostname}:{port}" in l] or hits
    detail = "; ".join(dict.fromkeys(exact))
    if any("failed to connect" in l for l in exact):
        before = [l for l in lines if l.startswith("fio: connect:")]
        return f"did not answer: {'; '.join(before[:1] + exact)}"
    if any("timed out" in l or "timeout on cmd" in l for l in exact):
        return f"did not answer in time: {detail}"
    if any("disconnected" in l for l in exact):
        return f"disconnected mid-run: {detail}"
    if timed_out:
        return "no results before iolab's time limit"
    return f"no results from this host{': ' + detail if detail else ''}"


def global_options(jobfile_text: str) -> dict:
    """The ``[global]`` options of a job file, as fio's JSON lists them (text values)."""
    options, section = {}, None
    for raw in jobfile_text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section == "global":
            key, _, value = line.partition("=")
            options[key.strip()] = value.strip()
    return options


def host_document(doc: dict, entries: list, hostname: str | None, jobfile_text: str) -> dict:
    """That host's part of a client/server document as a standalone fio JSON document.

    fio's client merges every client's ``[global]`` options into one object
    (duplicate keys: one host's ``filename`` would show up for all), so the
    host's own are taken from the job file it was sent.
    """
    out = {k: doc[k] for k in ("fio version", "timestamp", "timestamp_ms", "time") if k in doc}
    out["global options"] = global_options(jobfile_text)
    out["jobs"] = entries
    disk = [d for d in doc.get("disk_util", []) if hostname is None or str(d.get("hostname")) == hostname]
    if disk:
        out["disk_util"] = disk
    out["iolab"] = {"note": "extracted by iolab from a fio client/server run (client_stats -> jobs); "
                            "fio's untouched output is in the fleet directory"}
    return out


def start_times(logdir: Path, names: Iterable[str]) -> dict:
    """Per host: Unix time (ms) its jobs started, from the first IOPS log sample."""
    found = {}
    for name in names:
        firsts = []
        for path in logdir.glob(f"{name}_iops.*"):
            if not path.is_file():
                continue
            try:
                with open(path) as handle:
                    first = handle.readline().split(",")[0]
                firsts.append(int(first) - LOG_MS)
            except (OSError, ValueError):
                continue
        if firsts:
            found[name] = min(firsts)
    return found


def aggregate(frames: dict, *, fleet_id: str, label: str, expected: Sequence[str]) -> pd.DataFrame:
    """The hosts' rows per test x rep x direction added up (see :mod:`iolab.fleet.runs` for each column): rates
    and mean latency as for any parts measured at once (:mod:`iolab.analysis.together`)."""
    parts = [f for f in frames.values() if f is not None and len(f)]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    table = table[table["direction"].notna()]
    rows = []
    keys = ["recipe", "test", "job", "rep", "direction"]
    for key, group in table.groupby(keys, dropna=False, sort=False):
        measured = sorted(group["host"].unique())
        missing = [h for h in expected if h not in measured]
        errors = [e for e in group["error"].dropna().unique() if e]
        flags = ["fleet_aggregate"] + (["partial_fleet"] if missing else [])
        error = "; ".join(([f"no results from {', '.join(missing)}"] if missing else []) + errors) or None
        starts = group["start_ms"].dropna() if "start_ms" in group else pd.Series(dtype=float)
        row = dict(zip(keys, key))
        row.update(
            run_id=fleet_id, host=ALL_HOSTS, label=label, bs=group["bs"].iloc[0], iodepth=group["iodepth"].iloc[0],
            numjobs=int(group["numjobs"].fillna(1).sum()),
            bw_mbps=together.total_rate(group["bw_mbps"], group["runtime_s"]),
            iops=together.total_rate(group["iops"], group["runtime_s"]),
            lat_mean_us=together.mean_latency(group["lat_mean_us"], group["iops"], group["runtime_s"]),
            lat_p50_us=math.nan, lat_p99_us=math.nan, lat_p999_us=math.nan,
            lat_max_us=group["lat_max_us"].max(), cpu_usr_pct=math.nan, cpu_sys_pct=math.nan,
            io_bytes=group["io_bytes"].sum(), runtime_s=group["runtime_s"].max(),
            isolation=group["isolation"].iloc[0], error=error, target=None, tool="fio",
            valid=error is None, flags=";".join(flags), fleet_id=fleet_id, n_hosts=len(expected),
            hosts_measured=len(measured), hosts=",".join(measured),
            start_spread_ms=(starts.max() - starts.min()) if len(starts) > 1 else (0.0 if len(starts) else math.nan),
        )
        rows.append(row)
    return order_columns(pd.DataFrame(rows))


