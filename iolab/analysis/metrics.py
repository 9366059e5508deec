"""Every metric iolab knows, stated once: which way is better, the unit it is stored in, its label.

One table (:data:`KNOWN`) and one rule for names it lacks (:func:`metric`). The statistics'
"best" pass (CrystalDiskMark keeps the fastest: max MB/s and IOPS, min latency), the commentary's
winners and ratios, and the published figures all ask here.

* The result columns of the contract (``bw_mbps`` ... ``runtime_s``), the columns the classic
  engines add (bonnie++'s ``kps``/``cpu_pct``, GNOME Disks' ``access_ms``, pgbench's ``tps`` and
  ``lat_avg_ms``, sql-bench's ``elapsed_s``, the sustained write's cliff, tiobench's slow-op
  shares, the fleet's per-client rates) and the metrics of ``data/reference`` (``throughput``,
  ``latency_avg``, ``elapsed``, ``speedup``, ``overhead`` ...).
* ``unit`` is the unit of the stored value (decimal: MB/s is 10^6 B/s); ``None`` where each row
  carries its own (the reference figures: KB/s or MB/s, ms or us, as the article printed them).
* ``label`` names the key of the report's locale files (``metrics.<key>`` in
  ``iolab/report/locale/*.yaml``), ``None`` where reports do not name the metric in prose.
* A name not in the table: time (prefix ``lat``, ``cpu``, ``access``; suffix ``_us``, ``_ms``,
  ``_ns``, ``_s`` but not ``_per_s``), CPU and latency are better lower; everything else
  (rates, counts, bytes, ratios) higher.

>>> lower_is_better("access_ms"), higher_is_better("bw_mbps"), metric("lat_p99_us").unit
(True, True, 'us')
"""
from __future__ import annotations

from dataclasses import dataclass

HIGHER = "higher"
LOWER = "lower"

#: How an unknown name reads as "lower is better" (time, latency, CPU).
LOWER_PREFIXES = ("lat", "cpu", "access", "elapsed", "overhead")
LOWER_SUFFIXES = ("_us", "_ms", "_ns", "_s")
RATE_SUFFIXES = ("_per_s",)


@dataclass(frozen=True)
class Metric:
    """One metric: its name, which way is better, the stored unit and the locale key of its label."""
    name: str
    better: str
    unit: str | None = None
    label: str | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.better == LOWER

    @property
    def higher_is_better(self) -> bool:
        return self.better == HIGHER


def _table(better: str, unit: str | None, names: str, *, labelled: bool = False) -> dict:
    return {name: Metric(name, better, unit, name if labelled else None) for name in names.split()}


#: Every metric the package knows (name -> :class:`Metric`).
KNOWN: dict[str, Metric] = {
    # the contract's result columns (fio and every engine)
    **_table(HIGHER, "MB/s", "bw_mbps", labelled=True),
    **_table(HIGHER, "IOPS", "iops", labelled=True),
    **_table(LOWER, "us", "lat_mean_us lat_p50_us lat_p99_us lat_p999_us lat_max_us", labelled=True),
    **_table(LOWER, "%", "cpu_usr_pct cpu_sys_pct"),
    **_table(HIGHER, "B", "io_bytes"),
    **_table(LOWER, "s", "runtime_s"),
    # classic engines: bonnie++ and hdparm originals, GNOME Disks, pgbench, sql-bench, tiobench
    **_table(HIGHER, "K/sec", "kps"),
    **_table(LOWER, "%", "cpu_pct over_2s_pct over_10s_pct"),
    **_table(HIGHER, "MB/s", "hdparm_mb_sec"),
    **_table(LOWER, "ms", "access_ms avg_access_ms access_median_ms access_p95_ms"),
    **_table(HIGHER, "tps", "tps"),
    **_table(LOWER, "ms", "lat_avg_ms lat_stddev_ms conn_time_ms"),
    **_table(LOWER, "s", "elapsed_s wall_s"),
    # the sustained write (cliff) and the fleet's clients
    **_table(HIGHER, "MB/s", "burst_mbps after_mbps recovery_mbps client_min_mbps client_max_mbps"),
    **_table(HIGHER, "B", "cliff_bytes"),
    **_table(LOWER, "fraction", "cliff_drop"),
    **_table(HIGHER, "fraction", "jain_index"),
    # figures published in the articles (data/reference): each row states its unit
    **_table(HIGHER, None, "throughput rate", labelled=True),
    **_table(LOWER, None, "latency_avg latency_max elapsed", labelled=True),
    **_table(LOWER, None, "latency overhead"),
    **_table(HIGHER, None, "speedup shape"),
}


def metric(name: str) -> Metric:
    """The known metric ``name``, else one whose direction follows the rule for unknown names."""
    name = str(name)
    if name in KNOWN:
        return KNOWN[name]
    low = name.lower()
    lower = low.startswith(LOWER_PREFIXES) or (low.endswith(LOWER_SUFFIXES) and not low.endswith(RATE_SUFFIXES))
    return Metric(name, LOWER if lower else HIGHER)


def lower_is_better(name: str) -> bool:
    """True for latency, time and CPU; False for MB/s, IOPS, bytes, ratios (see :data:`KNOWN`)."""
    return metric(name).lower_is_better


def higher_is_better(name: str) -> bool:
    return not lower_is_better(name)
