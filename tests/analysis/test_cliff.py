"""The write-cliff detector on synthetic per-second series (pure: no device, no fio)."""
import pytest

from iolab.analysis.cliff import find_cliff, parse_bw_log, recovery
from iolab.core.errors import IolabError

MB = 1_000_000


def step_series(burst, after, cliff_bytes, seconds, *, first=None):
    """Per-second mean rates of a write that runs at ``burst`` until ``cliff_bytes``, then at ``after``."""
    cliff_s = cliff_bytes / burst
    times, rates = [], []
    for i in range(1, seconds + 1):
        start, end = i - 1, i
        at_burst = max(0.0, min(end, cliff_s) - start)
        rates.append(at_burst * burst + (1 - at_burst) * after)
        times.append(float(end))
    if first is not None:
        rates[0] = first
    return times, rates


def test_a_clean_step_is_placed_inside_its_second():
    times, rates = step_series(100 * MB, 25 * MB, 256 * 2**20, 9)
    cliff = find_cliff(times, rates)
    assert cliff.found
    assert cliff.burst_bps == pytest.approx(100 * MB)
    assert cliff.after_bps == pytest.approx(25 * MB)
    assert cliff.cliff_bytes == pytest.approx(256 * 2**20, rel=1e-6)
    assert cliff.cliff_s == pytest.approx(256 * 2**20 / (100 * MB), rel=1e-6)
    assert cliff.drop == pytest.approx(0.75)


def test_noise_and_a_slow_first_second_do_not_move_it_far():
    times, rates = step_series(100 * MB, 25 * MB, 300 * MB, 10, first=70 * MB)
    wobble = [1.03, 0.97, 1.02, 0.99, 1.0, 1.04, 0.96, 1.01, 0.98, 1.02]
    rates = [r * w for r, w in zip(rates, wobble)]
    cliff = find_cliff(times, rates)
    assert cliff.found
    assert cliff.burst_bps == pytest.approx(100 * MB, rel=0.05)
    assert cliff.after_bps == pytest.approx(25 * MB, rel=0.05)
    assert cliff.cliff_bytes == pytest.approx(300 * MB, rel=0.12)  # the slow first second lost 30 MB


def test_a_cliff_on_a_sample_boundary():
    times, rates = [1.0, 2.0, 3.0, 4.0, 5.0], [80 * MB, 80 * MB, 20 * MB, 20 * MB, 20 * MB]
    cliff = find_cliff(times, rates)
    assert cliff.found and cliff.cliff_bytes == pytest.approx(160 * MB)


def test_a_steady_rate_has_no_cliff():
    cliff = find_cliff([1, 2, 3, 4, 5], [100 * MB, 98 * MB, 101 * MB, 99 * MB, 100 * MB])
    assert not cliff.found and cliff.after_bps is None and cliff.burst_bps == pytest.approx(100 * MB)


def test_a_fall_that_does_not_settle_is_no_cliff():
    rates = [100 * MB, 100 * MB, 60 * MB, 10 * MB, 50 * MB, 5 * MB, 45 * MB]
    assert not find_cliff(range(1, 8), rates).found


def test_recovery_after_idle():
    cliff = find_cliff(*step_series(100 * MB, 25 * MB, 256 * 2**20, 9))
    back = recovery(cliff, 97 * MB)
    assert back["recovered"] and back["fraction"] == pytest.approx(72 / 75)
    assert recovery(cliff, 30 * MB)["recovered"] is False


@pytest.mark.parametrize("times, rates, message", [
    ([1, 2], [1, 2], "at least 3"),
    ([1, 2, 3], [1, 2], "3 timestamps but 2 rates"),
    ([1, 1, 2], [5, 5, 5], "must increase"),
    ([1, 2, 3], [5, -1, 5], "negative"),
])
def test_bad_series_are_refused(times, rates, message):
    with pytest.raises(IolabError, match=message):
        find_cliff(times, rates)


def test_fio_bandwidth_log():
    times, rates = parse_bw_log("1000, 97656, 1, 131072, 0\n2000, 24414, 1, 131072, 0, 0\n")
    assert times == [1.0, 2.0] and rates == [97656 * 1024, 24414 * 1024]
    with pytest.raises(IolabError, match="line 2"):
        parse_bw_log("1000, 5, 1, 4096, 0\nfio: oops\n")


def test_a_series_in_one_cell():
    from iolab.analysis.cliff import series_text, series_values
    assert series_text([1.0, 2.5, 49.938]) == "1;2.5;49.938"
    assert series_values("1;2.5;49.938") == [1.0, 2.5, 49.938] and series_values(float("nan")) == []
    with pytest.raises(IolabError, match="not a series"):
        series_values("1;x")
