"""The one figure CrystalDiskMark and KDiskMark show for a mixed row (R70/W30 ...).

fio measures a mixed job's reads and writes apart; both tools show one number per
mixed row. KDiskMark computes it from fio's two (src/benchmark.cpp,
``Benchmark::startTest``: ``(totalRead * p + totalWrite * (100 - p)) / 100`` with
``p`` the read percentage, applied alike to MB/s, IOPS and latency). iolab keeps fio's
read and write rows and adds a row with direction ``mix`` holding that figure, so a
reader can hold it beside KDiskMark's. The same row keeps the plain total
(``bw_total_mbps``, ``iops_total``: reads + writes), the single figure DiskSpd reports
for a mixed run, the program CrystalDiskMark 8 runs (``-w<write %>``, one result per run).
"""
from __future__ import annotations

import logging

import pandas as pd

log = logging.getLogger(__name__)

MIXED_RW = ("rw", "readwrite", "randrw")
#: Figures weighted by the read share, as KDiskMark does.
WEIGHTED = ("bw_mbps", "iops", "lat_mean_us")


def mix_figure(read: float, write: float, read_pct: float) -> float:
    """KDiskMark's figure of a mixed row: ``(read x p + write x (100 - p)) / 100``."""
    return (read * read_pct + write * (100 - read_pct)) / 100


def with_mix_row(frame: pd.DataFrame, step) -> pd.DataFrame:
    """``frame`` (one pass of one step) plus its ``mix`` row when the step is a mix with a ratio.

    Nothing is added when the step is not mixed, has no ``rwmixread``, or fio did not
    report both directions without error (a figure from half a job would mislead).
    """
    ratio = step.options.get("rwmixread") if step.rw in MIXED_RW else None
    if ratio is None or frame.empty or "direction" not in frame:
        return frame
    reads, writes = frame[frame["direction"] == "read"], frame[frame["direction"] == "write"]
    if len(reads) != 1 or len(writes) != 1:
        log.info("%s: no mix figure (fio reported %d read and %d write rows)", step.id, len(reads), len(writes))
        return frame
    read, write = reads.iloc[0], writes.iloc[0]
    if ("error" in frame and frame["error"].notna().any()) or pd.isna(read.get("bw_mbps")) or pd.isna(write.get("bw_mbps")):
        return frame
    row = read.copy()
    row["direction"] = "mix"
    p = float(ratio)
    for column in WEIGHTED:
        if column in row:
            row[column] = mix_figure(float(read[column]), float(write[column]), p)
    for column in ("lat_p50_us", "lat_p99_us", "lat_p999_us"):  # percentiles do not combine
        if column in row:
            row[column] = float("nan")
    if "lat_max_us" in row:
        row["lat_max_us"] = max(read["lat_max_us"], write["lat_max_us"])
    for column in ("io_bytes",):
        if column in row:
            row[column] = read[column] + write[column]
    if "runtime_s" in row:
        row["runtime_s"] = max(read["runtime_s"], write["runtime_s"])
    if "valid" in row:
        row["valid"] = bool(read["valid"]) and bool(write["valid"])
    row["rwmixread"] = int(p)
    row["bw_total_mbps"] = float(read["bw_mbps"]) + float(write["bw_mbps"])
    row["iops_total"] = float(read["iops"]) + float(write["iops"])
    return pd.concat([frame, pd.DataFrame([row.to_dict()])], ignore_index=True)
