"""The steady-state section words the run's reason codes in the report's language (built from rows as the
engine writes them; no fio): why not steady, what a bound cut short, the purge; an older run's English
words in ``steady_why_not`` are shown as they are; the steady-state figure fills the table and sentence."""
from __future__ import annotations

import pandas as pd
import pytest

from iolab.analysis.steadystate import Reason, encode
from iolab.report.sections.steadystate import steady_summary, steadystate_section, worded
from iolab.report.tables import DASH

MiB = 1024**2


def _rows(figures, **verdict) -> pd.DataFrame:
    """Round rows of one system as the engine writes them (``steady_*`` the same in each)."""
    return pd.DataFrame([{"test": "round", "label": "ssd", "rep": i, "round": i, "iops": f,
                          "bw_mbps": f * 4096 / 1e6, **verdict, "steady_window": verdict.get("steady_reached", False)}
                         for i, f in enumerate(figures, start=1)])


def _unsteady(**extra) -> pd.DataFrame:
    figures = [100.0, 180.0, 90.0, 170.0, 95.0, 175.0]
    why = encode([Reason("range", {"first": 2, "last": 6, "pct": 84.1, "max": 20})])
    cut = encode([Reason("precondition_size", {"bytes": 64 * MiB, "pts": 2048 * MiB}),
                  Reason("max_rounds", {"rounds": 6})])
    return _rows(figures, steady_figure=None, steady_metric="iops", steady_reached=False, steady_round=None,
                 steady_mean=142.0, steady_range_pct=84.1, steady_slope_pct=3.0, steady_why_not=why,
                 steady_cut=cut, **extra)


def test_the_codes_are_worded_in_english():
    rows = _unsteady(steady_purge="no_discard device=sdb")
    (sentence,) = steadystate_section(rows, lang="en").sentences
    assert sentence == ("**ssd** did not reach steady state within 6 rounds: over rounds 2–6 the range is 84.1% of "
                        "the mean, over 20%. Preconditioning wrote 64 MiB, less than the PTS's twice the test area "
                        "(2 GiB): bounded by --precondition-size. The rounds stopped at the limit of 6 "
                        "(--max-rounds) before steady state. Not purged: sdb does not support discard.")


def test_the_codes_are_worded_in_japanese(japanese):
    rows = _unsteady(steady_purge="blkdiscard device=sdb")
    (sentence,) = steadystate_section(rows, lang="ja").sentences
    assert sentence == ("**ssd**：6ラウンド以内に定常状態に達しなかった（ラウンド2–6の範囲が平均の84.1%で、20%を超える）。"
                        "プレコンディショニングは64 MiBで、PTSの定めるテスト領域の2倍（2 GiB）より少ない"
                        "（--precondition-sizeによる制限）。定常状態に達する前に、ラウンド数の上限6（--max-rounds）で"
                        "止まった。最初にblkdiscardでデバイス（sdb）をパージした：全ブロックのディスカードであり、"
                        "セキュアイレースではない。")


@pytest.mark.parametrize("code, en, ja", [
    ("emulated", "Not purged: an emulated device starts empty.", "パージしていない：エミュレートしたデバイスは空の状態から始まる。"),
    ("not_device kind=dir", "Not purged: the target is a directory on a file system, not a device.",
     "パージしていない：対象はファイルシステム上のディレクトリで、デバイスではない。"),
    ("no_confirm", "Not purged: a purge needs --confirm naming the device.",
     "パージしていない：パージにはデバイスを名指しする--confirmが要る。"),
])
def test_every_purge_code_has_its_sentence(code, en, ja):
    assert worded(code, "purge", "en") == [en] and worded(code, "purge", "ja") == [ja]


def test_an_older_runs_english_reason_is_shown_as_it_is(japanese):
    """Runs made before the codes kept English words in steady_why_not and had no steady_figure, metric, cut
    or purge columns: the words stand as they are, the figure is the steady window's mean."""
    old = "max_time 4 s: 3 s gone, no time for round 4; 3 round(s): the measurement window needs 5"
    rows = _rows([150.0, 151.0, 149.0], steady_reached=False, steady_round=None, steady_mean=None,
                 steady_range_pct=None, steady_slope_pct=None, steady_why_not=old)
    assert steadystate_section(rows, lang="en").sentences == [
        f"**ssd** did not reach steady state within 3 rounds: {old}."]
    assert steadystate_section(rows, lang="ja").sentences == [f"**ssd**：3ラウンド以内に定常状態に達しなかった（{old}）。"]
    steady = _rows([150.0] * 5, steady_reached=True, steady_round=5, steady_mean=150.0, steady_range_pct=0.0,
                   steady_slope_pct=0.0, steady_why_not=None)
    summary = steady_summary(steady)
    assert summary.loc[0, "figure"] == 150.0 and summary.loc[0, "column"] == "iops"


def test_the_steady_state_figure_fills_the_table_in_the_runs_metric():
    """steady_metric names the judged figure: MB/s here, though the rows carry IOPS too."""
    figures = [52.0, 50.0, 51.0, 50.0, 49.0]
    rows = _rows([f * 1e6 / 131072 for f in figures], steady_figure=50.4, steady_metric="bw_mbps",
                 steady_reached=True, steady_round=5, steady_mean=50.4, steady_range_pct=5.95, steady_slope_pct=-4.8,
                 steady_why_not=None, steady_cut=None, steady_purge="emulated")
    rows["bw_mbps"] = figures
    section = steadystate_section(rows, lang="en")
    row, numbers = section.tables[0].frame.loc["ssd"], section.tables[0].data.loc["ssd"]
    assert row["Steady-state figure"] == "50.4 MB/s" and numbers["Steady-state figure"] == 50.4
    assert section.sentences[0].startswith("**ssd** reached steady state at round 5: 50.4 MB/s, the mean of rounds "
                                           "1–5 (range 6.0% of the mean, slope -4.8%).")
    unsteady = _unsteady(steady_purge="emulated")
    assert steadystate_section(unsteady, lang="en").tables[0].frame.loc["ssd", "Steady-state figure"] == DASH


def test_two_systems_one_steady_one_failed(japanese):
    """A system without a verdict round beside one with it: the round is still said as a whole number."""
    steady = _rows([150.0] * 5, steady_figure=150.0, steady_metric="iops", steady_reached=True, steady_round=5,
                   steady_mean=150.0, steady_range_pct=0.0, steady_slope_pct=0.0, steady_why_not=None,
                   steady_purge="emulated")
    failed = _rows([100.0, float("nan"), 100.0], steady_figure=None, steady_metric="iops", steady_reached=False,
                   steady_round=None, steady_mean=None, steady_range_pct=None, steady_slope_pct=None,
                   steady_why_not="no_figure round=2", steady_purge="not_device kind=file").assign(label="hdd")
    rows = pd.concat([steady, failed], ignore_index=True)
    en = steadystate_section(rows, lang="en").sentences
    assert en[0].startswith("**ssd** reached steady state at round 5: 150 IOPS, the mean of rounds 1–5 (")
    assert en[1] == ("**hdd** did not reach steady state within 3 rounds: round 2 has no figure (it failed). "
                     "Not purged: the target is a file on a file system, not a device.")
    ja = steadystate_section(rows, lang="ja").sentences
    assert ja[0].startswith("**ssd**：ラウンド5で定常状態に達した。定常状態の値は150 IOPS（ラウンド1–5の平均、")
    assert ja[1] == ("**hdd**：3ラウンド以内に定常状態に達しなかった（ラウンド2は失敗して値がない）。"
                     "パージしていない：対象はファイルシステム上のファイルで、デバイスではない。")
