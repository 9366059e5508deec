"""A steady-state run's rounds in a report's summary table and chart: its measurement window only.

A steady-state run (:mod:`iolab.classic.steadystate`) writes one results row per round: a series in time on
a drive that changes, not repetitions of one measurement. Its own section
(:mod:`iolab.report.sections.steadystate`) draws every round. The summary table and chart of a recipe
take the measurement window alone, the rounds the run marked ``steady_window``, as one row per run, target
and test holding the window's mean (the PTS's steady-state figure when the window was steady): never all
rounds averaged as if they were repetitions, and no confidence interval across them. The rounds of a run
without a window (ended before its verdict, or fewer rounds than a window) are left out of the summary.
:func:`note` says which rounds the summary took, in the report's language.

The window's row keeps its rounds' flags, ``high_variance`` among them, and :func:`caveat_sentences` says
that flag in the words of rounds, not repetitions.

Computation (:func:`summary_rows`, tidy DataFrames in and out) apart from wording (:func:`note`,
:func:`caveat_sentences`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from iolab.report import commentary, i18n

#: the test a steady-state run repeats round after round (:data:`iolab.classic.steadystate.ROUND`)
ROUND = "round"
#: what one row of the window stands for: the mean of these over the window's rounds
MEANS = ("bw_mbps", "iops", "lat_mean_us", "cpu_usr_pct", "cpu_sys_pct", "io_bytes", "runtime_s")
#: per-round figures that do not combine into the window's (percentiles): left blank, as for a mix row
BLANK = ("lat_p50_us", "lat_p99_us", "lat_p999_us")
#: the columns that tell one window from another
_KEYS = ("run_id", "target", "test", "direction")


@dataclass
class Summary:
    """A recipe's generic rows, split for its summary."""
    #: the rows for the summary table and chart: no round, one row per window with its mean
    rows: pd.DataFrame
    #: the same without the windows' rows (what is held against an emulated device's declared ceilings)
    measurements: pd.DataFrame
    #: one row per window: ``system``, ``first``, ``last``, ``rounds`` (all the run made)
    windows: pd.DataFrame
    #: the systems whose rounds had no window: ``system``, ``rounds``
    without: pd.DataFrame


def round_rows(rows: pd.DataFrame, manifests: pd.DataFrame) -> pd.Series:
    """Which of ``rows`` are a steady-state run's rounds: those carrying its verdict (``steady_reached``), and
    the ``round`` test of a run whose manifest records ``steady_state`` (one that ended before its verdict)."""
    mask = rows["steady_reached"].notna() if "steady_reached" in rows else pd.Series(False, index=rows.index)
    if "steady_state" in manifests and "run_id" in rows:
        steady = set(manifests.loc[manifests["steady_state"].notna(), "run_id"])
        mask = mask | (rows["run_id"].isin(steady) & rows["test"].astype(str).eq(ROUND))
    return mask


def in_window(rows: pd.DataFrame) -> pd.Series:
    """Which of ``rows`` are a steady-state run's measurement window (its rounds marked ``steady_window``, and the
    one row :func:`summary_rows` makes of them)."""
    if "steady_window" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["steady_window"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def _round_numbers(rows: pd.DataFrame) -> pd.Series:
    number = pd.to_numeric(rows["round"], errors="coerce") if "round" in rows else pd.Series(float("nan"), rows.index)
    return number.fillna(pd.to_numeric(rows["rep"], errors="coerce")).astype(int)


def _flags(values) -> str:
    """Every flag of the window's rounds, once. ``high_variance`` stays: the rounds varied (as they do before
    a drive is steady), which the summary's note says in the rounds' words (:func:`caveat_sentences`)."""
    found = [f for v in values if isinstance(v, str) for f in v.split(";") if f]
    return ";".join(dict.fromkeys(found))


def _one_row(window: pd.DataFrame) -> dict:
    """The window's rows as one: the first row's settings, the means of :data:`MEANS`, rep 1."""
    row = window.iloc[0].to_dict()
    for column in MEANS:
        if column in window:
            row[column] = pd.to_numeric(window[column], errors="coerce").mean()
    for column in BLANK:
        if column in window:
            row[column] = float("nan")
    if "lat_max_us" in window:
        row["lat_max_us"] = pd.to_numeric(window["lat_max_us"], errors="coerce").max()
    if "flags" in window:
        row["flags"] = _flags(window["flags"])
    row["rep"] = 1
    return row


def summary_rows(rows: pd.DataFrame, results: pd.DataFrame, manifests: pd.DataFrame) -> Summary:
    """``rows`` (a recipe's generic rows) without any round, plus one row per measurement window of the
    steady-state rounds in ``results`` (the recipe's rows, its section's too; ``manifests`` its runs)."""
    rounds = results[round_rows(results, manifests)]
    measurements = rows[~round_rows(rows, manifests)]
    keys = [k for k in _KEYS if k in rounds]
    kept, windows, without = [], [], []
    for _, group in rounds.groupby(keys, sort=False, dropna=False):
        numbers = _round_numbers(group)
        system = str(group["system"].iloc[0]) if "system" in group else str(group["run_id"].iloc[0])
        window = group[in_window(group)]
        if window.empty:
            without.append({"system": system, "rounds": int(numbers.nunique())})
            continue
        kept.append(_one_row(window))
        inside = numbers[window.index]
        windows.append({"system": system, "first": int(inside.min()), "last": int(inside.max()),
                        "rounds": int(numbers.nunique())})
    summary = pd.concat([measurements, pd.DataFrame(kept)], ignore_index=True) if kept else measurements
    return Summary(summary, measurements, pd.DataFrame(windows, columns=["system", "first", "last", "rounds"]),
                   pd.DataFrame(without, columns=["system", "rounds"]))


def window_caveats(found: pd.DataFrame, summary: Summary) -> pd.Series:
    """Which caveats of the summary (:func:`iolab.report.commentary.caveats` rows) concern a measurement
    window's row only: a system with a window, every test named its rounds' (``round``)."""
    systems = set(summary.windows["system"].astype(str))
    return pd.Series([str(row["system"]) in systems and all(str(t) == ROUND for t, _ in row["tests"])
                      for _, row in found.iterrows()], index=found.index, dtype=bool)


def caveat_sentences(found: pd.DataFrame, summary: Summary, lang: str = "en") -> list[str]:
    """The caveat sentences of a summary table (``found``: its :func:`iolab.report.commentary.caveats`): a
    window's row in the words of rounds (``high_variance``: the rounds varied before the drive was steady; the
    figure is the window's), every other row's in the words of repetitions."""
    windows = window_caveats(found, summary)
    return (commentary.caveat_sentences(found[windows], lang=lang, over="rounds") if windows.any() else []) + \
        (commentary.caveat_sentences(found[~windows], lang=lang) if (~windows).any() else [])


def note(summary: Summary, lang: str = "en") -> str:
    """What the summary took of the steady-state rounds (Markdown in ``lang``); "" when there were none."""
    parts = []
    if not summary.windows.empty:
        each = [i18n.text("steady_window.each", lang, system=w["system"], first=w["first"], last=w["last"],
                          rounds=w["rounds"]) for w in summary.windows.to_dict("records")]
        parts.append(i18n.text("steady_window.taken", lang, each=i18n.join(each, lang)))
    if not summary.without.empty:
        each = [i18n.text("steady_window.each_without", lang, system=w["system"], rounds=w["rounds"])
                for w in summary.without.to_dict("records")]
        parts.append(i18n.text("steady_window.without", lang, each=i18n.join(each, lang)))
    return i18n.join_sentences(parts, lang)
