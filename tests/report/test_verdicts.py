"""The one comparison rule (iolab.report.verdicts) on known answers, both directions."""
import math

import pandas as pd
import pytest

from iolab.report import verdicts


def test_advantage_both_directions():
    assert verdicts.advantage(200, 100, higher=True) == pytest.approx(2.0)
    assert verdicts.advantage(1.0, 3.0, higher=False) == pytest.approx(3.0)
    assert verdicts.advantage(3.0, 1.0, higher=False) == pytest.approx(1 / 3)
    assert verdicts.advantage(1.0, 0.0, higher=True) == math.inf


@pytest.mark.parametrize("a, b, expected", [(0.258, 0.305, 0.154), (6, 7, 0.143), (55, 61, 0.098),
                                            (120, 100, 0.20), (100, 120, 0.167)])
def test_pct_difference_is_relative_to_the_value_compared_with(a, b, expected):
    assert verdicts.pct_difference(a, b) == pytest.approx(expected, abs=5e-4)


def test_tie_by_ci_and_by_tolerance():
    a = {"value": 100.0, "n": 3, "ci_low": 95.0, "ci_high": 105.0}
    b = {"value": 110.0, "n": 3, "ci_low": 104.0, "ci_high": 116.0}
    assert verdicts.tie(a, b) == "ci"
    assert verdicts.tie({"value": 100.0}, {"value": 102.9}) == "pct"
    assert verdicts.tie({"value": 100.0}, {"value": 104.0}) is None


def test_verdict_and_close():
    assert verdicts.verdict(1.02) == "tie" and verdicts.verdict(0.98) == "tie"
    assert verdicts.verdict(1.5) == "better" and verdicts.verdict(1 / 2.3) == "worse"
    assert verdicts.close(1.1) and verdicts.close(1 / 1.1) and not verdicts.close(1.7)
    assert not verdicts.close(0.4)


def test_ranks_share_the_better_rank_on_ties():
    values = pd.Series({"A": 100.0, "B": 101.0, "C": 50.0})
    assert verdicts.ranks(values, higher=True).to_dict() == {"A": 1, "B": 1, "C": 3}
    assert verdicts.ranks(values, higher=False).to_dict() == {"A": 2, "B": 2, "C": 1}
