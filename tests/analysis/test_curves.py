"""iolab.analysis.curves on synthetic curves with known answers."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from iolab.analysis.curves import access_time_summary, find_knee, jain_index, position_profile, scaling, seek_distance, sweep_axis, sweep_table
from iolab.core.errors import IolabError

QD = [1, 2, 4, 8, 16, 32, 64, 128]


def qd_sweep(iops, p99, *, qd=QD, numjobs=1, reps=3, noise=0.0, **extra) -> pd.DataFrame:
    rows = []
    for rep in range(1, reps + 1):
        wiggle = 1.0 + noise * (rep - (reps + 1) / 2)
        for depth, i, p in zip(qd, iops, p99):
            rows.append({"run_id": "r1", "test": f"rnd4k-q{depth}", "rep": rep, "direction": "read",
                         "bs": 4096, "iodepth": depth, "numjobs": numjobs, "iops": i * wiggle,
                         "lat_p99_us": p, **extra})
    return pd.DataFrame(rows)


def device_model(capacity=100_000.0, service_us=80.0, qd=QD, numjobs=1):
    """A device with a fixed IOPS ceiling: Little's law until it saturates."""
    iops, p99 = [], []
    for depth in qd:
        oio = depth * numjobs
        offered = oio / (service_us * 1e-6)
        served = min(offered, capacity)
        iops.append(served)
        p99.append(1.5 * oio / served * 1e6)
    return iops, p99


# --- knee ---------------------------------------------------------------------
def test_knee_where_constructed():
    iops = [10_000, 20_000, 40_000, 78_000, 80_000, 80_500, 80_700, 80_800]
    p99 = [100, 102, 105, 120, 200, 400, 800, 1600]
    knee = find_knee(qd_sweep(iops, p99, noise=0.005))
    assert knee.found and knee.x == 8
    assert knee.row["iops"] == pytest.approx(78_000)
    assert "oio 8" in knee.reason and "16" in knee.reason
    assert list(knee.table["x"]) == QD and list(knee.table["n"]) == [3] * 8
    assert knee.table["saturated"].tolist() == [False] * 4 + [True] * 4


def test_knee_of_a_littles_law_device():
    # 80 us per I/O, 100k IOPS ceiling: saturation between OIO 8 (100k offered) and 16
    iops, p99 = device_model()
    knee = find_knee(qd_sweep(iops, p99))
    assert knee.x == 8


def test_knee_uses_outstanding_io_for_jobs_times_qd():
    depths = [1, 2, 4, 8, 16]
    iops, p99 = device_model(qd=depths, numjobs=4)   # OIO 4, 8, 16, 32, 64
    data = qd_sweep(iops, p99, qd=depths, numjobs=4)
    assert list(sweep_axis(data).unique()) == [4, 8, 16, 32, 64]
    knee = find_knee(data)
    assert knee.x == 8 and knee.row["iodepth"] == 2 and knee.row["numjobs"] == 4
    assert knee.x_name == "oio"


def test_knee_none_when_never_saturated():
    iops = [10_000 * 2**k for k in range(8)]
    p99 = [100 + k for k in range(8)]
    knee = find_knee(qd_sweep(iops, p99))
    assert not knee and knee.row is None and knee.x is None
    assert "not saturated" in knee.reason


def test_knee_needs_latency_growth_not_just_a_plateau():
    # IOPS flat from the start but latency flat too (e.g. a synchronous engine
    # capping the queue depth at 1): no knee
    knee = find_knee(qd_sweep([5000] * 8, [200] * 8))
    assert not knee.found


def test_knee_edge_cases():
    one = find_knee(qd_sweep([1000], [100], qd=[1]))
    assert not one.found and "at least two" in one.reason
    no_p99 = find_knee(qd_sweep([1000, 1010], [np.nan, np.nan], qd=[1, 2]))
    assert not no_p99.found and "lat_p99_us" in no_p99.reason
    with pytest.raises(IolabError, match="several curves"):
        find_knee(pd.concat([qd_sweep([1, 2], [1, 2], qd=[1, 2]),
                             qd_sweep([1, 2], [1, 2], qd=[1, 2]).assign(direction="write")]))
    with pytest.raises(IolabError, match="lat_p99_us"):
        find_knee(qd_sweep([1, 2], [1, 2], qd=[1, 2]).drop(columns="lat_p99_us"))


def test_knee_ignores_invalid_rows():
    iops = [10_000, 20_000, 40_000, 78_000, 80_000, 80_500, 80_700, 80_800]
    p99 = [100, 102, 105, 120, 200, 400, 800, 1600]
    data = qd_sweep(iops, p99, reps=1)
    bogus = data.iloc[[3]].assign(iops=1e9, valid=False)
    knee = find_knee(pd.concat([data.assign(valid=True), bogus], ignore_index=True))
    assert knee.x == 8 and knee.row["iops"] == 78_000


def test_sweep_table_medians_and_gains():
    data = qd_sweep([100, 150], [10, 30], qd=[1, 2], reps=3, noise=0.1)
    table = sweep_table(data)
    assert list(table["iops"]) == pytest.approx([100, 150])
    assert table.loc[1, "iops_gain"] == pytest.approx(0.5) and table.loc[1, "p99_growth"] == pytest.approx(2.0)
    assert math.isnan(table.loc[0, "iops_gain"])


# --- position curve -------------------------------------------------------------
POSITIONS = np.arange(100) / 100  # GNOME Disks: n * size / 100


def samples(rates, **extra):
    return pd.DataFrame({"position": POSITIONS[: len(rates)], "bw_mbps": rates, **extra})


def test_zoned_hdd_curve_declines_by_two():
    # ten zones from 200 MB/s (outer) down to 100 MB/s (inner), as zcav shows
    zones = np.repeat(np.linspace(200, 100, 10), 10)
    row = position_profile(samples(zones)).iloc[0]
    assert row["decline"] == pytest.approx(2.0)
    assert (row["avg"], row["min"], row["max"]) == (pytest.approx(150.0), 100.0, 200.0)
    assert row["slope"] < 0 and not row["is_flat"]
    assert row["max_dev"] == pytest.approx(50 / 150)


def test_linear_hdd_curve_fitted_decline_is_two():
    # falling in a straight line from 200 at position 0 to 100 at position 1
    row = position_profile(samples(200 - 100 * POSITIONS)).iloc[0]
    assert row["slope"] == pytest.approx(-100.0)
    assert row["decline_fit"] == pytest.approx(2.0)
    # decile means: positions 0.00-0.09 average 195.5, 0.90-0.99 average 105.5
    assert row["decline"] == pytest.approx(195.5 / 105.5)


def test_flat_ssd_raid_curve_is_flat_despite_one_slow_sample():
    rng = np.random.default_rng(1)
    rates = 1000 + rng.normal(0, 10, 100)
    rates[37] = 700  # one sample caught behind a flush
    row = position_profile(samples(rates)).iloc[0]
    assert row["is_flat"] and row["decline"] == pytest.approx(1.0, abs=0.03)
    assert abs(row["slope_rel"]) < 0.05


def test_dip_in_the_middle_is_not_flat():
    rates = np.full(100, 500.0)
    rates[40:60] = 350.0
    row = position_profile(samples(rates)).iloc[0]
    assert row["decline"] == pytest.approx(1.0) and not row["is_flat"]


def test_position_profile_per_direction_and_errors():
    read = samples(np.full(100, 200.0), direction="read")
    write = samples(np.linspace(180, 90, 100), direction="write")
    out = position_profile(pd.concat([read, write], ignore_index=True)).set_index("direction")
    assert out.loc["read", "is_flat"] and not out.loc["write", "is_flat"]
    assert out.loc["read", "n"] == 100
    with pytest.raises(IolabError, match="fraction"):
        position_profile(samples([100.0, 100.0]).assign(position=[0, 50]))
    with pytest.raises(IolabError, match="bw_mbps"):
        position_profile(pd.DataFrame({"position": [0.0]}))


# --- access time ----------------------------------------------------------------
def test_access_time_summary_hdd_like():
    rng = np.random.default_rng(42)
    positions = rng.uniform(0, 1, 1000)
    distance = np.abs(np.diff(positions, prepend=np.nan))
    times = 2.0 + 12.0 * np.nan_to_num(distance, nan=0.5) + rng.normal(0, 0.3, 1000)
    data = pd.DataFrame({"position": positions, "access_ms": times})
    row = access_time_summary(data).iloc[0]
    assert row["n"] == 1000
    assert row["mean_ms"] == pytest.approx(times.mean())
    assert row["median_ms"] == pytest.approx(np.median(times))
    assert row["p95_ms"] == pytest.approx(np.percentile(times, 95))
    assert row["corr"] > 0.9 and row["corr_rank"] > 0.9
    # the same with distances given
    given = access_time_summary(data.assign(seek_distance=distance).drop(columns="position")).iloc[0]
    assert given["corr"] == pytest.approx(row["corr"])


def test_access_time_summary_flash_has_no_correlation():
    rng = np.random.default_rng(7)
    data = pd.DataFrame({"position": rng.uniform(0, 1, 1000), "access_ms": rng.normal(0.1, 0.01, 1000)})
    row = access_time_summary(data).iloc[0]
    assert abs(row["corr"]) < 0.1 and abs(row["corr_rank"]) < 0.1


def test_seek_distance():
    got = seek_distance(pd.DataFrame({"position": [0.5, 0.1, 0.9]}))
    assert math.isnan(got[0]) and list(got[1:]) == pytest.approx([0.4, 0.8])


# --- concurrency ----------------------------------------------------------------
def test_jain_index_known_values():
    assert jain_index([5.0] * 8) == pytest.approx(1.0)
    for n in (2, 4, 10):
        assert jain_index([100.0] + [0.0] * (n - 1)) == pytest.approx(1 / n)
    assert jain_index([1.0, 3.0]) == pytest.approx(16 / (2 * 10))
    assert math.isnan(jain_index([0.0, 0.0]))
    for bad in ([], [1.0, np.nan], [1.0, -1.0]):
        with pytest.raises(IolabError):
            jain_index(bad)


def test_scaling_per_client_fairness_and_efficiency():
    rows = []
    # one client: 100 MB/s; two: 90 each; four: 60, 60, 60, 20 (one starved)
    for rep in (1, 2):
        for jobs, rates, p99 in ((1, [100], [500]), (2, [90, 90], [600, 700]),
                                 (4, [60, 60, 60, 20], [900, 900, 900, 3000])):
            for client, (rate, p) in enumerate(zip(rates, p99)):
                rows.append({"numjobs": jobs, "rep": rep, "host": f"c{client}", "bw_mbps": rate,
                             "lat_p99_us": p})
    out = scaling(pd.DataFrame(rows), client="host").set_index("numjobs")
    assert list(out.index) == [1, 2, 4]
    assert list(out["total"]) == [100, 180, 200] and list(out["n"]) == [2, 2, 2]
    assert list(out["per_client"]) == [100, 90, 50]
    assert list(out["p99"]) == [500, 700, 3000]                # worst client
    assert out.loc[2, "jain"] == pytest.approx(1.0)
    assert out.loc[4, "jain"] == pytest.approx(200**2 / (4 * (3 * 3600 + 400)))
    assert list(out["speedup"]) == pytest.approx([1.0, 1.8, 2.0])
    assert list(out["efficiency"]) == pytest.approx([1.0, 0.9, 0.5])


def test_scaling_without_clients_and_by_label():
    data = pd.DataFrame({"label": ["a"] * 3 + ["b"] * 3, "numjobs": [1, 2, 4] * 2,
                         "bw_mbps": [100, 200, 400, 100, 110, 120]})
    out = scaling(data, by="label")
    assert list(out.columns[:2]) == ["label", "numjobs"]
    a, b = out[out.label == "a"], out[out.label == "b"]
    assert list(a["efficiency"]) == pytest.approx([1, 1, 1])
    assert list(b["speedup"]) == pytest.approx([1, 1.1, 1.2])
    assert out["jain"].isna().all() and out["p99"].isna().all()
