"""The steady-state section: SNIA PTS's plot of a ``steady-state`` run, from its round rows.

A steady-state run writes one results row per round (``round``, ``rep``) carrying the verdict
per target (``steady_figure`` in ``steady_metric``, ``steady_reached``, ``steady_round``,
``steady_mean``, ``steady_range_pct``, ``steady_slope_pct``, ``steady_window``, and as reason codes
``steady_why_not``, ``steady_cut`` and ``steady_purge``: see :mod:`iolab.classic.steadystate`).
The codes are worded here in the report's language; an older run's ``steady_why_not`` in English
words is shown as it is.
Rounds are not repetitions: they are a time series, each round after the one before on a drive
that changes. This section shows them as the PTS does: per system the figure per round, the
measurement window shaded, its mean with ±10% and ±20% of it, and the line fitted through it;
a table of the verdicts, and the sentences.

Two layers: :func:`steady_rounds` and :func:`steady_summary` compute (DataFrames in and out);
:func:`steadystate_section` draws and words them.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.analysis.steadystate import MAX_RANGE, decode, slope
from iolab.core.errors import IolabError
from iolab.core.units import human_size
from iolab.core import optional
from iolab.report import i18n
from iolab.report.sections.common import Figure, Section, numeric, number_or_dash, unique_in_order, with_system
from iolab.report.tables import DASH, Table

_t = i18n.scoped("sections")

#: the figures a steady-state run can judge, as result columns, with their unit
FIGURES = {"iops": "IOPS", "bw_mbps": "MB/s"}
#: rounds before the window this far above its mean are the fresh drive's burst (the PTS's range limit)
BURST = MAX_RANGE
#: the section's table columns, in order
_COLUMNS = ("rounds", "window", "figure", "range_pct", "slope_pct", "reached")
#: reason figures shown as sizes, and as percentages
_SIZES, _PCTS = {"bytes", "pts", "written", "planned"}, {"pct"}


def is_steadystate(data: pd.DataFrame) -> pd.Series:
    """Rows of a steady-state run: the rounds, which carry the verdict (``steady_reached``)."""
    if "steady_reached" not in data.columns:
        return pd.Series(False, index=data.index)
    return data["steady_reached"].notna()


def _truth(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "1.0")


def _given(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _last_run(rows: pd.DataFrame) -> pd.DataFrame:
    """A system's rounds of its last run (a system measured twice is shown as last measured)."""
    if "run_id" not in rows.columns or rows["run_id"].nunique() <= 1:
        return rows
    return rows[rows["run_id"] == unique_in_order(rows["run_id"])[-1]]


def _judged(rows: pd.DataFrame, per_round: dict[str, pd.Series], window: list[int]) -> str:
    """Which figure the run judged: ``steady_metric``; in an older run without it, the one whose window
    mean is the verdict's mean (IOPS when none is)."""
    metric = rows["steady_metric"].dropna().astype(str) if "steady_metric" in rows.columns else pd.Series(dtype=str)
    if len(metric) and metric.iloc[0] in FIGURES:
        return metric.iloc[0]
    mean = numeric(rows, "steady_mean").dropna()
    if mean.empty or not window:
        return "iops"
    target = float(mean.iloc[0])
    misses = {}
    for column, series in per_round.items():
        values = series[series.index.isin(window)]
        if len(values) and target:
            misses[column] = abs(float(values.mean()) - target) / abs(target)
    return min(misses, key=misses.get) if misses else "iops"


def steady_rounds(data: pd.DataFrame) -> pd.DataFrame:
    """One row per system and round: ``system``, ``round``, ``figure`` (the judged one), ``column``
    (``iops`` or ``bw_mbps``), ``in_window`` (a round of the measurement window)."""
    data = with_system(data)
    rows = data[is_steadystate(data)]
    out = []
    for system in unique_in_order(rows["system"].astype(str)):
        part = _last_run(rows[rows["system"].astype(str) == system])
        number = numeric(part, "round").fillna(numeric(part, "rep"))
        if number.isna().all():
            raise IolabError("steady-state rows without a round number", context=f"system {system}",
                             hint="the rows should come from the steady-state recipe (columns round or rep)")
        part = part.assign(_round=number.astype(int))
        per_round = {c: numeric(part, c).groupby(part["_round"]).sum(min_count=1) for c in FIGURES if c in part.columns}
        window_of = part["steady_window"].map(_truth) if "steady_window" in part.columns else pd.Series(
            False, index=part.index)
        window = sorted(int(r) for r in part.loc[window_of, "_round"].unique())
        column = _judged(part, per_round, window)
        series = per_round.get(column, pd.Series(dtype=float))
        for number, figure in series.items():
            out.append({"system": system, "round": int(number), "figure": float(figure), "column": column,
                        "in_window": int(number) in window})
    return pd.DataFrame(out, columns=["system", "round", "figure", "column", "in_window"])


def steady_summary(data: pd.DataFrame) -> pd.DataFrame:
    """The verdict per system: ``rounds``, ``first``/``last`` (the window), ``figure`` (the steady-state
    figure, NaN when not steady), ``mean`` (the judged window's), ``range_pct``, ``slope_pct``,
    ``reached``, ``round``, ``why_not``, ``cut`` and ``purge`` (as the run wrote them), ``column``, the
    fitted line (``fit_slope`` per round and ``fit_at_first`` at the window's first round), and the fresh
    drive's burst: ``burst_rounds`` (how many of the first rounds ran more than 20% above the window's
    mean) and ``burst_peak``."""
    data = with_system(data)
    rows = data[is_steadystate(data)]
    rounds = steady_rounds(data)
    out = []
    for system, series in rounds.groupby("system", sort=False):
        verdict = _last_run(rows[rows["system"].astype(str) == system]).iloc[-1]
        window = series[series["in_window"]]
        figures = list(series["figure"])
        mean = pd.to_numeric(verdict.get("steady_mean"), errors="coerce")
        reached = _truth(verdict.get("steady_reached"))
        steady = pd.to_numeric(verdict.get("steady_figure", mean if reached else math.nan), errors="coerce")
        fit_slope = fit_at_first = math.nan
        if len(window) >= 2:
            values = list(window["figure"])
            fit_slope = slope(values)
            fit_at_first = sum(values) / len(values) - fit_slope * (len(values) - 1) / 2
        burst = 0
        if pd.notna(mean) and mean > 0 and len(window):
            for number, figure in zip(series["round"], figures):
                if number >= window["round"].min() or figure <= (1 + BURST) * mean:
                    break
                burst += 1
        out.append({
            "system": system, "rounds": len(series), "column": series["column"].iloc[0],
            "first": int(window["round"].min()) if len(window) else None,
            "last": int(window["round"].max()) if len(window) else None,
            "figure": float(steady) if pd.notna(steady) else math.nan,
            "mean": float(mean) if pd.notna(mean) else math.nan,
            "range_pct": float(pd.to_numeric(verdict.get("steady_range_pct"), errors="coerce")),
            "slope_pct": float(pd.to_numeric(verdict.get("steady_slope_pct"), errors="coerce")),
            "reached": reached,
            "round": int(verdict["steady_round"]) if _given(verdict.get("steady_round")) else None,
            **{key: verdict.get(f"steady_{key}") if _given(verdict.get(f"steady_{key}")) else None
               for key in ("why_not", "cut", "purge")},
            "fit_slope": fit_slope, "fit_at_first": fit_at_first,
            "burst_rounds": burst, "burst_peak": max(figures[:burst]) if burst else math.nan,
        })
    return pd.DataFrame(out)


# =========================================================================== presentation


def _unit(column: str, lang: str) -> str:
    return i18n.unit(FIGURES[column], lang)


def _window_text(first, last) -> str:
    return DASH if first is None or (isinstance(first, float) and math.isnan(first)) else f"{int(first)}–{int(last)}"


def _figures(figures: dict, lang: str) -> dict:
    """A reason's figures as the sentence shows them: sizes readable, percentages to one decimal."""
    shown = {}
    for key, value in figures.items():
        if key in _SIZES and isinstance(value, (int, float)):
            shown[key] = human_size(value)
        elif key in _PCTS and isinstance(value, (int, float)):
            shown[key] = i18n.number(value, digits=1)
        elif key == "kind":
            shown[key] = i18n.text(f"sections.steadystate.kinds.{value}", lang) if i18n.has(
                f"sections.steadystate.kinds.{value}", lang) else str(value)
        else:
            shown[key] = i18n.number(value) if isinstance(value, float) else str(value)
    return shown


def worded(text, group: str, lang: str) -> list[str]:
    """The reason codes of a ``steady_why_not`` / ``steady_cut`` / ``steady_purge`` cell, in ``lang``
    (``sections.steadystate.<group>.<code>``); text not in codes (an older run's words) as it is."""
    if text is None:
        return []
    reasons = decode(text)
    if reasons is None:
        return [str(text)]
    out = []
    for reason in reasons:
        key = f"sections.steadystate.{group}.{reason.code}"
        out.append(i18n.text(key, lang, **_figures(reason.figures, lang)) if i18n.has(key, lang) else str(reason))
    return out


def _sentences(summary: pd.DataFrame, lang: str) -> list[str]:
    said = []
    for _, s in summary.iterrows():
        unit = _unit(s["column"], lang)
        if s["reached"]:
            line = _t("steadystate.reached", lang, system=s["system"], round=int(s["round"]),
                      window=_window_text(s["first"], s["last"]), figure=number_or_dash(s["figure"]), unit=unit,
                      range=i18n.number(s["range_pct"], digits=1), slope=f"{s['slope_pct']:+.1f}")
        else:
            why = ("、" if lang == "ja" else "; ").join(worded(s["why_not"], "why", lang)) or DASH
            line = _t("steadystate.not_reached", lang, system=s["system"], rounds=s["rounds"], why=why)
        parts = [line]
        if s["burst_rounds"]:
            parts.append(_t("steadystate.burst", lang, system=s["system"], n=s["burst_rounds"],
                            peak=number_or_dash(s["burst_peak"]), unit=unit, mean=number_or_dash(s["mean"])))
        parts += worded(s.get("cut"), "cut", lang) + worded(s.get("purge"), "purge", lang)
        said.append(("" if lang == "ja" else " ").join(parts))
    return said


def _table(summary: pd.DataFrame, lang: str) -> Table:
    columns = [_t(f"steadystate.col_{c}", lang) for c in _COLUMNS]
    shown, numbers = [], []
    for _, s in summary.iterrows():
        numbers.append([s["rounds"], s["first"], s["figure"], s["range_pct"], s["slope_pct"], s["reached"]])
        shown.append([str(s["rounds"]), _window_text(s["first"], s["last"]),
                      (i18n.with_unit(number_or_dash(s["figure"]), _unit(s["column"], lang))
                       if pd.notna(s["figure"]) else DASH),
                      number_or_dash(s["range_pct"], 1), DASH if pd.isna(s["slope_pct"]) else f"{s['slope_pct']:+.1f}",
                      _t("steadystate.yes" if s["reached"] else "steadystate.no", lang)])
    index = list(summary["system"])
    return Table(pd.DataFrame(shown, index=index, columns=columns),
                 data=pd.DataFrame(numbers, index=index, columns=columns),
                 caption=_t("steadystate.caption", lang), notes=[_t("steadystate.note", lang)])


def _figure(system: str, series: pd.DataFrame, s, lang: str) -> Figure:
    """The PTS plot of one system: the figure per round, the window shaded, mean ±10/±20%, the fitted line."""
    fig, ax = optional.pyplot().subplots(figsize=(7.2, 3.8))
    ax.plot(series["round"], series["figure"], marker="o", label=system)
    mean = s["mean"]
    if s["first"] is not None and pd.notna(s["first"]):
        ax.axvspan(s["first"] - 0.5, s["last"] + 0.5, color="tab:gray", alpha=0.15,
                   label=_t("steadystate.window", lang))
    if pd.notna(mean) and s["first"] is not None and pd.notna(s["first"]):
        ax.axhline(mean, color="black", linewidth=1, label=_t("steadystate.mean", lang))
        for share, style in ((0.10, "--"), (0.20, ":")):
            label = _t("steadystate.band", lang, pct=int(share * 100))
            for sign in (1, -1):
                ax.axhline(mean * (1 + sign * share), color="tab:gray", linestyle=style, linewidth=1,
                           label=label if sign == 1 else "_" + label)
        if pd.notna(s["fit_slope"]):
            xs = [s["first"], s["last"]]
            ys = [s["fit_at_first"], s["fit_at_first"] + s["fit_slope"] * (s["last"] - s["first"])]
            ax.plot(xs, ys, color="tab:red", linestyle="-.", linewidth=1.5, label=_t("steadystate.fit", lang))
    ax.set_xlabel(_t("steadystate.x", lang))
    ax.set_ylabel(_t("steadystate.y", lang, unit=_unit(s["column"], lang)))
    ax.set_xticks(list(series["round"]))
    ax.set_ylim(bottom=0)
    ax.set_title(system)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return Figure(fig, alt=_t("steadystate.alt", lang, system=system, rounds=len(series),
                              window=_window_text(s["first"], s["last"])))


def steadystate_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """The section, or None when no row carries a steady-state verdict."""
    i18n.check_lang(lang)
    data = with_system(data)
    if not is_steadystate(data).any():
        return None
    rounds, summary = steady_rounds(data), steady_summary(data)
    if summary.empty:
        return None
    figures = [_figure(system, rounds[rounds["system"] == system], s, lang)
               for system, (_, s) in zip(summary["system"], summary.iterrows())]
    return Section(kind="steady-state", title=_t("steadystate.heading", lang), lang=lang,
                   intro=_t("steadystate.intro", lang), tables=[_table(summary, lang)], figures=figures,
                   sentences=_sentences(summary, lang))
