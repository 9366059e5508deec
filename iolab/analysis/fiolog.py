"""fio's time-series logs (``write_bw_log``, ``write_iops_log``, ``write_lat_log``): the one reader.

Each line is ``time_ms, value, direction, bs, offset[, prio]``: the time since the job started in
milliseconds, the value (KiB/s for ``bw`` logs, I/Os per second for ``iops``, nanoseconds for the
latency logs), and the direction (0 read, 1 write, 2 trim). With ``log_avg_msec`` each sample is the
mean over the interval before its timestamp. Lines that are not numbers are refused, naming the line.
"""
from __future__ import annotations

import pandas as pd

from iolab.core.errors import IolabError

#: fio's bandwidth logs are in KiB/s
FIO_LOG_UNIT = 1024
#: fio's direction field
DIRECTIONS = {0: "read", 1: "write", 2: "trim"}
COLUMNS = ["t_s", "value", "direction"]


def read_log(text: str, *, context: str = "fio log") -> pd.DataFrame:
    """A log's lines -> ``t_s`` (seconds), ``value`` (as fio wrote it), ``direction`` (read/write/trim)."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            rows.append((int(fields[0]) / 1000, int(fields[1]), DIRECTIONS.get(int(fields[2]), fields[2])))
        except (ValueError, IndexError):
            raise IolabError(f"not a fio log line: {line[:80]!r}", context=f"{context} line {number}") from None
    return pd.DataFrame(rows, columns=COLUMNS)
