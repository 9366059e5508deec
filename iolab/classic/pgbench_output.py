"""pgbench's output: its summary (:func:`parse_output`) and its per-transaction logs (:func:`latency_summary`)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

_OUTPUT_PATTERNS = {
    "scale": r"^scaling factor:\s*(\d+)",
    "clients": r"^number of clients:\s*(\d+)",
    "threads": r"^number of threads:\s*(\d+)",
    "duration_s": r"^duration:\s*([\d.]+)\s*s",
    "transactions": r"^number of transactions actually processed:\s*(\d+)",
    "failed_transactions": r"^number of failed transactions:\s*(\d+)",
    "lat_avg_ms": r"^latency average\s*=\s*([\d.]+)\s*ms",
    "lat_stddev_ms": r"^latency stddev\s*=\s*([\d.]+)\s*ms",
    "conn_time_ms": r"^initial connection time\s*=\s*([\d.]+)\s*ms",
    # PG >= 14 "(without initial connection time)"; older "(excluding connections establishing)"
    "tps": r"^tps\s*=\s*([\d.]+)\s*\((?:without initial connection time|excluding connections establishing)\)",
}


def parse_output(text: str) -> dict:
    """pgbench's summary as numbers (missing lines are absent from the dict), plus ``aborted``."""
    found: dict = {}
    for key, pattern in _OUTPUT_PATTERNS.items():
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            value = float(match.group(1))
            found[key] = int(value) if key in ("scale", "clients", "threads", "transactions",
                                               "failed_transactions") else value
    found["aborted"] = "Run was aborted" in text
    return found


def latency_summary(lines) -> dict:
    """Per-transaction latencies (µs) from pgbench ``-l`` log lines: count, mean, p50, p99, p99.9, max.

    Failed or skipped transactions (latency ``failed``/``skipped``) are counted apart.
    """
    values, other = [], 0
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        if fields[2].isdigit():
            values.append(int(fields[2]))
        else:
            other += 1
    if not values:
        return {"count": 0, "not_completed": other}
    lat = np.asarray(values, dtype=float)
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    return {"count": len(values), "not_completed": other, "mean_us": float(lat.mean()), "p50_us": float(p50),
            "p99_us": float(p99), "p999_us": float(p999), "max_us": float(lat.max())}


def log_files(directory: Path, prefix: str) -> list[Path]:
    """pgbench's per-thread logs ``<prefix>.<pid>`` (thread 0) and ``<prefix>.<pid>.<n>``, in thread order."""
    def thread(path: Path) -> int:
        parts = path.name[len(prefix) + 1:].split(".")
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return sorted(directory.glob(f"{prefix}.*"), key=thread)

