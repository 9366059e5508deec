"""Parts measured at the same time, added up (iolab.analysis.together): the rule --simultaneous totals and fleet
aggregates share."""
import math

import pandas as pd
import pytest

from iolab.analysis import together
from iolab.fleet import hostresults


def test_a_part_that_ended_first_counts_for_its_own_runtime_only():
    # two disks at 100 MB/s: one wrote for 10 s, the other for 5 s: 1,500 MB in 10 s, not 200 MB/s
    assert together.total_rate([100.0, 100.0], [10.0, 5.0]) == pytest.approx(150.0)
    assert together.total_rate([100.0, 50.0], [10.0, 10.0]) == pytest.approx(150.0)  # same runtime: the sum


def test_without_a_runtime_for_every_part_the_rates_are_added():
    assert together.total_rate([100.0, 50.0], [10.0, None]) == pytest.approx(150.0)
    assert together.total_rate([100.0, 50.0], [10.0, 0.0]) == pytest.approx(150.0)
    assert math.isnan(together.total_rate([None, None], [1.0, 1.0]))


def test_mean_latency_is_weighted_by_each_parts_io_count():
    # 1,000 IOPS for 10 s at 100 us and 1,000 IOPS for 5 s at 400 us: 10,000 and 5,000 I/Os
    assert together.mean_latency([100.0, 400.0], [1000.0, 1000.0], [10.0, 5.0]) == pytest.approx(200.0)
    assert together.mean_latency([100.0, None], [1000.0, 1000.0], [10.0, 5.0]) == pytest.approx(100.0)
    assert math.isnan(together.mean_latency([100.0], [0.0], [10.0]))


def _host_rows(host: str, iops: float, runtime: float, lat: float) -> pd.DataFrame:
    return pd.DataFrame([{"recipe": "r", "test": "RND4K", "job": "RND4K", "rep": 1, "direction": "read",
                          "host": host, "bs": 4096, "iodepth": 1, "numjobs": 1, "iops": iops,
                          "bw_mbps": iops * 4096 / 1e6, "io_bytes": int(iops * runtime * 4096), "runtime_s": runtime,
                          "lat_mean_us": lat, "lat_max_us": lat * 3, "isolation": "direct", "error": None,
                          "start_ms": 0.0}])


def test_a_fleet_aggregate_takes_the_rule_a_simultaneous_total_takes():
    frames = {"a": _host_rows("a", 200.0, 10.0, 5000.0), "b": _host_rows("b", 200.0, 5.0, 5000.0)}
    (row,) = hostresults.aggregate(frames, fleet_id="f", label="2 hosts", expected=["a", "b"]).to_dict("records")
    assert row["iops"] == pytest.approx(300.0)  # 3,000 I/Os in 10 s: host b stopped at 5 s
    assert row["bw_mbps"] == pytest.approx(300.0 * 4096 / 1e6)
    assert row["io_bytes"] == 2000 * 4096 + 1000 * 4096 and row["runtime_s"] == 10.0
