"""The PTS steady-state criteria on constructed per-round series (pure: no device, no fio)."""
import pytest

from iolab.analysis.steadystate import Reason, decode, encode, slope, steady_state
from iolab.core.errors import IolabError


def test_a_flat_series_is_steady_at_round_five():
    found = steady_state([100.0] * 8)
    assert found.reached and found.round == 5 and found.window == (1, 2, 3, 4, 5)
    assert found.mean == 100 and found.range_pct == 0 and found.slope_pct == 0 and found.why_not is None


def test_fewer_than_five_rounds_are_never_steady():
    found = steady_state([100.0] * 4)
    assert not found.reached and found.round is None and found.rounds == 4
    assert found.reasons == (Reason("few_rounds", {"rounds": 4, "window": 5}),)
    assert found.why_not == "few_rounds rounds=4 window=5"


def test_a_range_of_exactly_20_percent_is_steady():
    # mean 100, max - min = 20; fitted slope 1 per round: excursion 4%
    found = steady_state([90.0, 110.0, 100.0, 100.0, 100.0])
    assert found.reached and found.range_pct == pytest.approx(20) and found.slope_pct == pytest.approx(4)


def test_a_range_just_over_20_percent_is_not():
    found = steady_state([89.9, 110.1, 100.0, 100.0, 100.0])
    assert not found.reached and found.reasons == (Reason("range", {"first": 1, "last": 5, "pct": 20.2, "max": 20}),)


def test_a_slope_excursion_of_exactly_10_percent_is_steady():
    found = steady_state([95.0, 97.5, 100.0, 102.5, 105.0])
    assert found.reached and found.slope_pct == pytest.approx(10) and found.range_pct == pytest.approx(10)


def test_a_slope_excursion_just_over_10_percent_is_not():
    found = steady_state([94.9, 97.45, 100.0, 102.55, 105.1])
    assert not found.reached and [r.code for r in found.reasons] == ["slope"]
    assert found.slope_pct == pytest.approx(10.2) and found.reasons[0].figures["pct"] == 10.2


def test_a_falling_slope_counts_as_its_size():
    falling = steady_state([105.1, 102.55, 100.0, 97.45, 94.9])
    assert not falling.reached and falling.reasons[0].figures["pct"] == -10.2
    assert steady_state([105.0, 102.5, 100.0, 97.5, 95.0]).slope_pct == pytest.approx(-10)


def test_a_rising_series_is_never_steady():
    found = steady_state([10.0 * r for r in range(1, 11)])
    assert not found.reached and found.window == (6, 7, 8, 9, 10)  # the last window judged
    assert [(r.code, r.figures["first"], r.figures["last"]) for r in found.reasons] == [("range", 6, 10),
                                                                                         ("slope", 6, 10)]
    assert decode(found.why_not) == list(found.reasons)  # what the results column keeps reads back


def test_steady_state_after_a_fall_is_reached_at_the_first_steady_window():
    # a burst, a cliff in round 3, then level: rounds 3-7 are the first steady window
    found = steady_state([500.0, 500.0, 101.0, 99.0, 100.0, 100.0, 101.0, 99.0])
    assert found.reached and found.round == 7 and found.window == (3, 4, 5, 6, 7)
    assert found.mean == pytest.approx(100.2)


def test_a_missing_round_is_an_error():
    with pytest.raises(IolabError, match=r"round\(s\) \[2\]"):
        steady_state([1.0, float("nan"), 1.0, 1.0, 1.0])


def test_the_slope_is_least_squares():
    assert slope([1.0, 3.0, 5.0]) == pytest.approx(2)
    assert slope([0.0, 0.0, 3.0]) == pytest.approx(1.5)


def test_reasons_read_back_and_words_are_not_codes():
    reasons = [Reason("max_time", {"limit_s": 6.5, "elapsed_s": 5.2, "rounds": 3}), Reason("emulated"),
               Reason("not_device", {"kind": "dir"})]
    text = encode(reasons)
    assert text == "max_time limit_s=6.5 elapsed_s=5.2 rounds=3; emulated; not_device kind=dir"
    assert decode(text) == reasons
    assert encode([]) is None and decode(None) is None and decode(float("nan")) is None
    # an older run's column held English words: not codes, shown as they are
    assert decode("rounds 1-5: range 23.4% of the mean is over 20%") is None
    assert decode("max_time 4 s: 3 s gone, no time for round 5; 4 round(s): the measurement window needs 5") is None
