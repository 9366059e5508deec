"""iolab.analysis.stats on synthetic results with known answers."""
from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest

from iolab.core.errors import IolabError
from iolab.analysis.stats import DEFAULT_BY, aggregate, confidence_interval, cov, flag_results, has_flag, needs_more, repeat_until_stable, split_flags, summarize, t_cdf, t_quantile, valid_rows


def results(values_by_test: dict, *, metric="bw_mbps", **extra) -> pd.DataFrame:
    """Tidy rows: one per test x repetition, direction read."""
    rows = []
    for test, values in values_by_test.items():
        for rep, value in enumerate(values, start=1):
            rows.append({"run_id": "run1", "host": "h1", "label": "box", "test": test, "rep": rep,
                         "direction": "read", metric: value, **extra})
    return pd.DataFrame(rows)


# --- Student's t ------------------------------------------------------------
def test_t_quantile_closed_forms():
    # df=1 is Cauchy, df=2 has a closed form: both exact
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-12)
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-12)


def test_t_cdf_matches_closed_form_for_df4():
    # F(t) = 1/2 + 3/8 * u * (1 - u^2/12 * ...) with the textbook df=4 form
    def cdf4(t):
        s = t / math.sqrt(1 + t * t / 4)
        return 0.5 + 3 / 8 * s * (1 - s * s / 12)
    for t in (0.3, 1.0, 2.0, 2.776, 5.0):
        assert t_cdf(t, 4) == pytest.approx(cdf4(t), abs=1e-12)
        assert t_cdf(-t, 4) == pytest.approx(1 - cdf4(t), abs=1e-12)


@pytest.mark.parametrize("df, table", [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262),
                                       (29, 2.045), (1000, 1.962)])
def test_t_quantile_matches_printed_tables(df, table):
    value = t_quantile(0.975, df)
    assert value == pytest.approx(table, abs=5e-4)
    assert t_cdf(value, df) == pytest.approx(0.975, abs=1e-12)
    assert t_quantile(0.025, df) == pytest.approx(-value)


def test_t_quantile_rejects_nonsense():
    with pytest.raises(IolabError):
        t_quantile(1.0, 3)
    with pytest.raises(IolabError):
        t_quantile(0.9, 0)


# --- summarize --------------------------------------------------------------
def test_summarize_exact_ci_for_known_sample():
    frame = results({"seq": [1.0, 2.0, 3.0, 4.0, 5.0]})
    out = summarize(frame, metrics=["bw_mbps"])
    assert len(out) == 1
    row = out.iloc[0]
    std = math.sqrt(2.5)
    half = t_quantile(0.975, 4) * std / math.sqrt(5)
    assert half == pytest.approx(2.776445 * std / math.sqrt(5), rel=1e-6)
    assert (row.n, row["mean"], row["median"]) == (5, 3.0, 3.0)
    assert row["std"] == pytest.approx(std)
    assert row["cov"] == pytest.approx(std / 3.0)
    assert row.ci_low == pytest.approx(3.0 - half)
    assert row.ci_high == pytest.approx(3.0 + half)
    assert (row.best, row.worst) == (5.0, 1.0)
    # target is an optional column: absent, it is not grouped by
    assert "target" not in out.columns and {"run_id", "test", "direction", "metric"} <= set(out.columns)
    assert out.loc[0, "host"] == "h1" and out.loc[0, "label"] == "box"


def test_confidence_interval_levels():
    x = [10.0, 12.0, 11.0, 13.0]
    mean, sem = 11.5, float(np.std(x, ddof=1)) / 2
    low, high = confidence_interval(x, 0.99)
    assert (low, high) == pytest.approx((mean - t_quantile(0.995, 3) * sem, mean + t_quantile(0.995, 3) * sem))
    assert t_quantile(0.995, 3) == pytest.approx(5.841, abs=5e-4)  # printed table
    assert all(math.isnan(v) for v in confidence_interval([1.0]))
    out = summarize(results({"a": x}), metrics=["bw_mbps"], confidence=0.99)
    assert (out.loc[0, "ci_low"], out.loc[0, "ci_high"]) == pytest.approx((low, high))


def test_summarize_empty_results_keeps_columns():
    empty = results({}).reindex(columns=["run_id", "test", "direction", "rep", "bw_mbps"])
    out = summarize(empty, metrics=["bw_mbps"])
    assert out.empty and {"metric", "mean", "ci_low", "best"} <= set(out.columns)


def test_summarize_latency_best_is_minimum_and_tidy_shape():
    frame = results({"rnd": [100.0, 90.0, 110.0]}, metric="lat_mean_us")
    frame["bw_mbps"] = [10.0, 12.0, 11.0]
    out = summarize(frame, metrics=("bw_mbps", "lat_mean_us")).set_index("metric")
    assert list(out.index) == ["bw_mbps", "lat_mean_us"]
    assert (out.loc["lat_mean_us", "best"], out.loc["lat_mean_us", "worst"]) == (90.0, 110.0)
    assert (out.loc["bw_mbps", "best"], out.loc["bw_mbps", "worst"]) == (12.0, 10.0)


def test_summarize_single_value_has_no_interval_and_nan_is_ignored():
    frame = results({"a": [7.0], "b": [1.0, np.nan, 3.0]})
    out = summarize(frame, metrics=["bw_mbps"]).set_index("test")
    assert out.loc["a", "n"] == 1 and math.isnan(out.loc["a", "ci_low"]) and math.isnan(out.loc["a", "std"])
    assert out.loc["b", "n"] == 2 and out.loc["b", "mean"] == 2.0


def test_summarize_excludes_invalid_and_failed_rows():
    frame = results({"a": [10.0, 11.0, 12.0, 1000.0, 500.0]})
    frame["valid"] = [True, True, True, False, True]
    frame["error"] = [np.nan, "", "0", np.nan, "28"]
    out = summarize(frame, metrics=["bw_mbps"])
    assert out.loc[0, "n"] == 3 and out.loc[0, "n_excluded"] == 2 and out.loc[0, "mean"] == 11.0
    kept = summarize(frame, metrics=["bw_mbps"], drop_invalid=False)
    assert kept.loc[0, "n"] == 5
    assert list(valid_rows(frame)) == [True, True, True, False, False]


def test_summarize_groups_by_target_when_present():
    frame = pd.concat([results({"a": [1.0, 2.0]}, target="/mnt/ssd"),
                       results({"a": [5.0, 7.0]}, target="/mnt/hdd")], ignore_index=True)
    out = summarize(frame, metrics=["bw_mbps"]).set_index("target")
    assert out.loc["/mnt/ssd", "mean"] == 1.5 and out.loc["/mnt/hdd", "mean"] == 6.0


def test_summarize_unknown_column_is_an_error():
    frame = results({"a": [1.0, 2.0]})
    with pytest.raises(IolabError, match="tset"):
        summarize(frame, by=("run_id", "tset"))
    with pytest.raises(IolabError, match="iops"):
        summarize(frame, metrics=("iops",))


def test_summarize_warns_when_pooling_different_measurements(caplog):
    frame = results({"tio": [10.0, 11.0]})
    other = frame.assign(job="randwrite", bw_mbps=[1.0, 1.1])
    frame = pd.concat([frame.assign(job="seqwrite"), other], ignore_index=True)
    with caplog.at_level(logging.WARNING, logger="iolab.analysis.stats"):
        summarize(frame, metrics=["bw_mbps"])
    assert "pooled" in caplog.text and "job" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="iolab.analysis.stats"):
        out = summarize(frame, by=DEFAULT_BY + ("job",), metrics=["bw_mbps"])
    assert caplog.text == "" and len(out) == 2


# --- aggregate --------------------------------------------------------------
def test_aggregate_cdm_best_and_kdm_mean():
    frame = results({"SEQ1M Q8T1": [500.0, 520.0, 510.0, 490.0, 530.0]})
    frame["lat_mean_us"] = [20.0, 18.0, 19.0, 25.0, 21.0]
    frame["iops"] = frame["bw_mbps"] * 1e6 / 2**20
    best = aggregate(frame, "best")
    assert best.loc[0, "statistic"] == "best" and best.loc[0, "n"] == 5
    assert best.loc[0, "bw_mbps"] == 530.0
    assert best.loc[0, "lat_mean_us"] == 18.0  # CDM: min latency, from another pass
    mean = aggregate(frame, "mean")
    assert mean.loc[0, "statistic"] == "mean" and mean.loc[0, "bw_mbps"] == 510.0
    assert mean.loc[0, "lat_mean_us"] == pytest.approx(20.6)
    median = aggregate(frame, "median")
    assert median.loc[0, "bw_mbps"] == 510.0 and median.loc[0, "lat_mean_us"] == 20.0
    both = pd.concat([best, mean], ignore_index=True)
    assert list(both["statistic"]) == ["best", "mean"]


def test_aggregate_rejects_unknown_statistic():
    with pytest.raises(IolabError, match="max"):
        aggregate(results({"a": [1.0]}, iops=1.0, lat_mean_us=1.0), "max")


# --- adaptive repeats -------------------------------------------------------
def test_cov_fraction():
    assert cov([10.0, 10.0, 10.0]) == 0.0
    assert cov([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)
    assert math.isnan(cov([5.0]))


def test_needs_more():
    assert needs_more([], min_n=3)
    assert needs_more([100.0, 100.0], min_n=3)            # below the minimum
    assert not needs_more([100.0, 101.0, 99.0])           # CoV 1 % <= 3 %
    assert needs_more([100.0, 110.0, 90.0])               # CoV 10 %
    assert not needs_more([100.0, 110.0, 90.0] * 4, max_n=10)  # at the cap
    assert not needs_more([100.0, 110.0, 90.0], cov_target=0.2)
    assert needs_more([np.nan, np.nan, np.nan])           # failing, below the cap
    assert not needs_more([np.nan] * 10)
    with pytest.raises(IolabError):
        needs_more([1.0], min_n=5, max_n=3)


def test_repeat_until_stable_stops_at_min_n_when_stable():
    seen = []
    values = repeat_until_stable(lambda: 100.0, on_result=lambda rep, v: seen.append((rep, v)))
    assert values == [100.0] * 3
    assert seen == [(1, 100.0), (2, 100.0), (3, 100.0)]


def test_repeat_until_stable_extends_until_cov_drops():
    sequence = iter([80.0, 120.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0])
    values = repeat_until_stable(lambda: next(sequence), cov_target=0.10, max_n=10)
    # squared deviations stay 800, so std = sqrt(800 / (n - 1)) <= 10 first at n = 9
    assert len(values) == 9 and cov(values) <= 0.10
    assert needs_more(values[:-1], cov_target=0.10)


def test_repeat_until_stable_caps_noisy_measurements():
    noisy = iter([50.0, 150.0] * 20)
    values = repeat_until_stable(lambda: next(noisy), max_n=7)
    assert len(values) == 7


def test_repeat_until_stable_rejects_non_numbers():
    with pytest.raises(IolabError):
        repeat_until_stable(lambda: "fast")


# --- flags ------------------------------------------------------------------
def flagged_frame():
    frame = results({"seq": [100.0, 101.0, 99.0], "rnd": [10.0, 20.0, 15.0]})
    frame["cpu_usr_pct"] = [40.0, 10.0, 10.0, 50.0, 20.0, 20.0]
    frame["cpu_sys_pct"] = [55.0, 10.0, 10.0, 30.0, 20.0, 20.0]
    frame["numjobs"] = [1, 1, 1, 1, 1, 1]
    frame["runtime_s"] = [5.0, 5.0, 0.4, 5.0, 5.0, 5.0]
    frame["isolation"] = "cgroup"
    frame["flags"] = [np.nan, "cache_suspect", "", np.nan, np.nan, "cache_suspect"]
    return frame


def test_flag_results_sets_each_flag_and_keeps_engine_flags():
    frame = flagged_frame()
    out = flag_results(frame, min_runtime_s=1.0, cov_threshold=0.05, mem_limit="512M", file_size="1G")
    flags = [split_flags(v) for v in out["flags"]]
    assert "cpu_bound" in flags[0]                     # 95 % of a core
    assert "cpu_bound" not in flags[3]                 # 80 %
    assert flags[1][0] == "cache_suspect"              # engine's flag kept first
    assert "too_short" in flags[2] and "too_short" not in flags[0]
    assert all("high_variance" in f for f in flags[3:]) and not any("high_variance" in f for f in flags[:3])
    assert all("small_file" in f for f in flags)       # 1 GiB < 4 x 512 MiB, buffered
    assert "cache_suspect" in flags[5] and "high_variance" in flags[5]
    assert frame["flags"].iloc[1] == "cache_suspect"   # input untouched
    assert list(has_flag(out, "too_short")) == [False, False, True, False, False, False]


def test_flag_results_recomputes_its_own_flags():
    once = flag_results(flagged_frame(), cov_threshold=0.05)
    assert has_flag(once, "high_variance").sum() == 3
    again = flag_results(once, cov_threshold=0.5)
    assert has_flag(again, "high_variance").sum() == 0
    assert has_flag(again, "cache_suspect").sum() == 2


def test_flag_results_cpu_bound_counts_jobs_and_cpus():
    # iolab.engine.fio.parse sums the jobs' CPU: 8 jobs at 50 % of a core each = 400 %
    frame = results({"rnd": [1.0]}, cpu_usr_pct=300.0, cpu_sys_pct=100.0, numjobs=8)
    assert not has_flag(flag_results(frame), "cpu_bound").any()
    # ... but on 4 CPUs, 400 % is all the machine has
    assert has_flag(flag_results(frame, cpu_count=4), "cpu_bound").all()
    # fio's own group_reporting prints the per-job average
    frame = results({"rnd": [1.0]}, cpu_usr_pct=60.0, cpu_sys_pct=35.0, numjobs=8)
    assert has_flag(flag_results(frame, cpu_is_total=False), "cpu_bound").all()
    assert not has_flag(flag_results(frame, cpu_is_total=True), "cpu_bound").any()


def test_flag_results_small_file_only_for_buffered_tests():
    frame = results({"a": [1.0], "b": [1.0], "c": [1.0]})
    frame["isolation"] = ["cgroup", "direct", "none"]
    out = flag_results(frame, mem_limit=512 * 2**20, file_size=2 * 2**30)
    assert list(has_flag(out, "small_file")) == [False, False, False]  # 2 GiB = 4 x 512 MiB
    out = flag_results(frame, mem_limit=512 * 2**20, file_size=2**30)
    assert list(has_flag(out, "small_file")) == [True, False, False]
    frame["direct"] = [1, 0, 1]
    out = flag_results(frame, mem_limit="512M", file_size="1G")
    assert list(has_flag(out, "small_file")) == [False, True, False]
    frame = frame.drop(columns="direct").assign(file_size=["4G", "1G", "1G"])
    out = flag_results(frame, mem_limit="512M", buffered=True)
    assert list(has_flag(out, "small_file")) == [False, True, True]


def test_flag_results_without_inputs_adds_empty_flags():
    frame = results({"a": [1.0, 1.0]})
    out = flag_results(frame)
    assert list(out["flags"]) == ["", ""]
    assert split_flags(np.nan) == [] and split_flags("a; b;") == ["a", "b"]
