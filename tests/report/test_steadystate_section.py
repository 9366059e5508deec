"""The steady-state section from a real short steady-state run (real fio on emulated:hdd, a throttled loop
device in RAM, 1 s rounds): the sentences name the round and window of the run's steadystate.json, the PTS
plot marks its window, mean, ±10/±20% and fitted slope, the table holds its verdict; in en and ja."""
from __future__ import annotations


import pandas as pd
import pytest

from iolab.core.units import human_size
from iolab.report import i18n, sections
from iolab.report.tables import DASH
from iolab.report.sections.steadystate import steady_summary, steadystate_section

from cli_helpers import needs_fio, needs_root

pytestmark = [needs_root, needs_fio]


@pytest.fixture
def steady(steady_hdd_run):
    """The session's steady-state run (tests/conftest.py): hdd's constant throttle is steady at round 5."""
    return steady_hdd_run[1:]


@pytest.fixture
def unsteady(unsteady_hdd_run):
    """--max-time 6 and --precondition-size 24M: preconditioning and rounds cut short, not steady and why."""
    return unsteady_hdd_run[1:]


def test_the_sentence_names_the_round_and_window_of_the_run(steady):
    rows, found = steady
    verdict = found["targets"]["hdd"]
    assert verdict["reached"]
    first, last = verdict["window"][0], verdict["window"][-1]
    section = steadystate_section(rows, lang="en")
    (sentence,) = section.sentences
    figure = rows.loc[rows["test"].eq("round"), "steady_figure"].iloc[0]
    assert figure == pytest.approx(verdict["mean"], rel=1e-6)  # the steady-state figure: the window's mean
    assert sentence.startswith(f"**hdd** reached steady state at round {verdict['round']}: "
                               f"{i18n.number(figure)} IOPS, the mean of rounds {first}–{last} (range ")
    assert "% of the mean, slope " in sentence
    assert "burst" not in sentence  # a constant throttle: no faster first rounds
    assert sentence.endswith(" Not purged: an emulated device starts empty.")
    assert "Preconditioning" not in sentence and "bound" not in sentence  # nothing was cut short
    assert section.title == "Steady state (SNIA PTS)" and section.kind == "steady-state"


def test_the_pts_plot_marks_the_window_mean_bands_and_fitted_slope(steady):
    rows, found = steady
    verdict = found["targets"]["hdd"]
    (figure,) = steadystate_section(rows, lang="en").figures
    (ax,) = figure.axes
    labels = [line.get_label() for line in ax.lines]
    series = ax.lines[labels.index("hdd")]
    assert series.get_marker() == "o"
    assert list(series.get_xdata()) == list(range(1, len(verdict["figures"]) + 1))
    assert list(series.get_ydata()) == pytest.approx(verdict["figures"])
    (span,) = ax.patches
    assert (span.get_x(), span.get_x() + span.get_width()) == (verdict["window"][0] - 0.5, verdict["window"][-1] + 0.5)
    mean = ax.lines[labels.index("window mean")]
    assert mean.get_ydata()[0] == pytest.approx(verdict["mean"], rel=1e-6)
    bands = sorted(line.get_ydata()[0] for line in ax.lines if "% of the mean" in line.get_label())
    assert bands == pytest.approx([verdict["mean"] * f for f in (0.8, 0.9, 1.1, 1.2)], rel=1e-6)
    fit = ax.lines[labels.index("fitted slope")]
    assert list(fit.get_xdata()) == [verdict["window"][0], verdict["window"][-1]]
    rise = fit.get_ydata()[1] - fit.get_ydata()[0]
    assert rise / verdict["mean"] * 100 == pytest.approx(verdict["slope_pct"], abs=0.01)
    assert ax.get_ylabel() == "IOPS per round" and "rounds 1–5" in figure.alt


def test_the_table_holds_the_runs_verdict(steady):
    rows, found = steady
    verdict = found["targets"]["hdd"]
    table = steadystate_section(rows, lang="en").tables[0]
    assert list(table.frame.index) == ["hdd"]
    row = table.frame.loc["hdd"]
    assert row["Rounds"] == str(len(verdict["figures"])) and row["Window (rounds)"] == "1–5"
    assert row["Steady"] == "yes" and row["Steady-state figure"].endswith(" IOPS")
    numbers = table.data.loc["hdd"]
    assert numbers["Steady-state figure"] == pytest.approx(verdict["mean"], rel=1e-6)
    assert numbers["Steady-state figure"] == rows.loc[rows["test"].eq("round"), "steady_figure"].iloc[0]
    assert numbers["Range (% of mean)"] == pytest.approx(verdict["range_pct"], abs=1e-3)
    assert numbers["Slope (% of mean)"] == pytest.approx(verdict["slope_pct"], abs=1e-3)


def test_in_japanese(steady, japanese):
    rows, found = steady
    verdict = found["targets"]["hdd"]
    section = steadystate_section(rows, lang="ja")
    assert section.title == "定常状態（SNIA PTS）"
    assert section.sentences[0].startswith(f"**hdd**：ラウンド{verdict['round']}で定常状態に達した。定常状態の値は")
    assert "（ラウンド1–5の平均、" in section.sentences[0]
    assert section.sentences[0].endswith("パージしていない：エミュレートしたデバイスは空の状態から始まる。")
    assert section.tables[0].frame.loc["hdd", "定常"] == "到達"
    assert section.figures[0].axes[0].get_xlabel() == "ラウンド"


def test_the_rounds_leave_the_generic_shape(steady):
    rows, _ = steady
    assert "steady-state" in sections.plan(rows)
    built, rest = sections.build(rows, lang="en")
    assert "steady-state" in [s.kind for s in built]
    assert list(rest["test"]) == ["precondition"]  # the rounds are the section's, never repetitions


def test_the_fresh_drives_burst_is_said(japanese):
    """Built from rows (no fio): two first rounds 50% above a steady window's mean."""
    figures = [300.0, 280.0, 150.0, 152.0, 149.0, 151.0, 150.0]
    rows = pd.DataFrame([{"test": "round", "label": "ssd", "rep": i, "round": i, "iops": f, "bw_mbps": f * 4096 / 1e6,
                          "steady_reached": True, "steady_round": 7, "steady_mean": 150.4, "steady_range_pct": 2.0,
                          "steady_slope_pct": 0.3, "steady_why_not": None, "steady_window": i >= 3}
                         for i, f in enumerate(figures, start=1)])
    assert steady_summary(rows).loc[0, "burst_rounds"] == 2
    (sentence,) = steadystate_section(rows, lang="en").sentences
    assert "Its first 2 rounds as a fresh drive ran more than 20% above the window's mean (up to 300 IOPS" in sentence
    assert "新品状態の最初の2ラウンド" in steadystate_section(rows, lang="ja").sentences[0]


def test_not_reached_says_within_how_many_rounds_and_why(unsteady, japanese):
    rows, found = unsteady
    verdict = found["targets"]["hdd"]
    assert not verdict["reached"]
    section = steadystate_section(rows, lang="en")
    n = len(verdict["figures"])
    (sentence,) = section.sentences
    rounds = f"{n} {'round' if n == 1 else 'rounds'}"
    assert sentence.startswith(f"**hdd** did not reach steady state within {rounds}: {rounds}, fewer than "
                               "the measurement window's 5. ")
    assert verdict["why_not"] not in sentence  # the codes are worded, not shown
    written = human_size(int(rows.loc[rows["test"].eq("precondition"), "io_bytes"].iloc[0]))
    assert "Preconditioning wrote 24 MiB, less than the PTS's twice the capacity (32 MiB): bounded by " \
           "--precondition-size." in sentence
    assert (f"The time bound (--max-time) left preconditioning 1 s and cut it short after {written} of 24 MiB."
            in sentence)
    assert f"The time bound of 6 s (--max-time) stopped the rounds after {rounds}, before steady state." in sentence
    assert sentence.endswith("Not purged: an emulated device starts empty.")
    row = section.tables[0].frame.loc["hdd"]
    assert row["Steady"] == "no" and row["Window (rounds)"] == DASH and row["Steady-state figure"] == DASH
    (ax,) = section.figures[0].axes
    assert not ax.patches and [line.get_label() for line in ax.lines] == ["hdd"]  # no window: nothing to mark
    (ja,) = steadystate_section(rows, lang="ja").sentences
    assert ja.startswith(f"**hdd**：{n}ラウンド以内に定常状態に達しなかった（{n}ラウンドで、測定ウィンドウの5ラウンドに満たない）。")
    assert f"時間の上限（--max-time）により、プレコンディショニングは24 MiBのうち{written}で打ち切られた" in ja
    assert f"定常状態に達する前に、時間の上限6秒（--max-time）により{n}ラウンドで止まった。" in ja
