"""The result columns every layer agrees on (design notes, "Contracts")."""
from __future__ import annotations

#: Contract columns of ``results.csv`` and of :func:`iolab.load`, in order.
RESULT_COLUMNS = [
    "run_id", "host", "label", "recipe", "test", "rep", "direction", "bs", "iodepth",
    "numjobs", "bw_mbps", "iops", "lat_mean_us", "lat_p50_us", "lat_p99_us",
    "lat_p999_us", "lat_max_us", "cpu_usr_pct", "cpu_sys_pct", "io_bytes", "runtime_s",
    "isolation", "error",
]

#: Columns iolab adds around the contract (kept after the contract columns); ``ioengine``: the fio
#: engine the row's job ran with (:mod:`iolab.engine.ioengines`).
EXTRA_COLUMNS = ["target", "tool", "job", "valid", "flags", "ioengine"]

#: Columns ``iolab.engine.fio.parse_output`` returns.
PARSE_COLUMNS = [
    "job", "host", "groupid", "direction", "bs", "iodepth", "numjobs", "bw_mbps", "iops",
    "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us",
    "cpu_usr_pct", "cpu_sys_pct", "io_bytes", "runtime_s", "error",
]
