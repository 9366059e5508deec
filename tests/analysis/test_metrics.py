"""One rule for which way a metric is better (iolab.analysis.metrics), and every caller agrees with it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from iolab.analysis import metrics, reference, stats
from iolab.core.columns import RESULT_COLUMNS
from iolab.report import commentary, commentary_base, tables

ROOT = Path(__file__).resolve().parents[2]

#: Every metric the package knows, with the direction a reader expects (written out, not derived).
LOWER = ["lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us", "cpu_usr_pct", "cpu_sys_pct",
         "runtime_s", "cpu_pct", "over_2s_pct", "over_10s_pct", "access_ms", "avg_access_ms", "access_median_ms",
         "access_p95_ms", "lat_avg_ms", "lat_stddev_ms", "conn_time_ms", "elapsed_s", "wall_s", "cliff_drop",
         "latency_avg", "latency_max", "elapsed", "latency", "overhead"]
HIGHER = ["bw_mbps", "iops", "io_bytes", "kps", "hdparm_mb_sec", "tps", "burst_mbps", "after_mbps", "recovery_mbps",
          "client_min_mbps", "client_max_mbps", "cliff_bytes", "jain_index", "throughput", "rate", "speedup", "shape"]


def test_the_table_is_exactly_the_listed_metrics():
    assert sorted(metrics.KNOWN) == sorted(LOWER + HIGHER)


@pytest.mark.parametrize("name", LOWER)
def test_lower_is_better(name):
    assert metrics.lower_is_better(name) and not metrics.higher_is_better(name)
    assert metrics.KNOWN[name].better == metrics.LOWER


@pytest.mark.parametrize("name", HIGHER)
def test_higher_is_better(name):
    assert metrics.higher_is_better(name) and not metrics.lower_is_better(name)


@pytest.mark.parametrize("name, lower", [("clat_ns", True), ("lat_ns", True), ("queue_wait_us", True),
                                         ("cpu_steal", True), ("access_p99_ms", True), ("fsync_s", True),
                                         ("seeks_per_s", False), ("read_mbps", False), ("ops", False)])
def test_unknown_names_follow_the_rule(name, lower):
    assert metrics.lower_is_better(name) is lower
    assert metrics.metric(name).unit is None and metrics.metric(name).label is None


def test_units_and_labels():
    assert metrics.metric("bw_mbps").unit == "MB/s" and metrics.metric("lat_p99_us").unit == "us"
    assert metrics.metric("access_ms").unit == "ms" and metrics.metric("throughput").unit is None
    for lang in ("en", "ja"):
        locale = yaml.safe_load((ROOT / "iolab" / "report" / "locale" / f"{lang}.yaml").read_text(encoding="utf-8"))
        labelled = [m.label for m in metrics.KNOWN.values() if m.label]
        assert labelled and all(key in locale["metrics"] for key in labelled), lang


def test_every_measured_result_column_and_table_metric_is_known():
    measured = RESULT_COLUMNS[RESULT_COLUMNS.index("bw_mbps"):RESULT_COLUMNS.index("runtime_s") + 1]
    assert all(name in metrics.KNOWN for name in measured)
    assert all(name in metrics.KNOWN for name in tables.METRICS)
    published = reference.load()
    assert set(published["metric"]) <= set(metrics.KNOWN)


@pytest.mark.parametrize("name", LOWER + HIGHER)
def test_the_old_call_sites_agree(name):
    # the statistics' best pass, the commentary's winner and the package's rule give one answer
    frame = pd.DataFrame({"run_id": "r", "test": "t", "direction": "read", "rep": [1, 2], name: [1.0, 2.0]})
    best = stats.summarize(frame, metrics=[name], keep=())["best"].iloc[0]
    assert best == (1.0 if metrics.lower_is_better(name) else 2.0)
    assert commentary.higher_is_better(name) is commentary_base.higher_is_better(name) is metrics.higher_is_better(name)
    summary = pd.DataFrame({"system": ["a", "b"], "test": "t", "metric": name, "unit": "", "value": [1.0, 2.0]})
    winner = commentary.winners(summary)["winner"].iloc[0]
    assert winner == ("a" if metrics.lower_is_better(name) else "b")
