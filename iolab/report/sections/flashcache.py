"""The flash-cache experiment: the same recipe with a cache on and off, how much the cache helped per test,
and its warm-up repetition by repetition (the seed article's RAID card with a flash cache, cache on vs off).

Which runs are which comes from their labels: a run labelled ``... cache=on``
(or ``cache on``, ``cache:on``) and one labelled the same with ``cache=off`` are
one experiment (``examples/plans/flash-cache.yaml`` and its twin
``flash-cache-off.yaml`` say how to make them). Rows without such a label are
not this section's.

Computation: :func:`cache_state` (on/off per row), :func:`flashcache_reps`
(tidy: experiment, state, test, direction, rep, MB/s, IOPS) and
:func:`flashcache_summary` (per experiment x test x direction: cache off, cache
on at its first and last repetition, the ratios). Presentation:
:func:`flashcache_section`. Its words are the locale files' ``flashcache`` keys
(``iolab/report/locale/{en,ja}.yaml``), numbers through :mod:`iolab.report.i18n`.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n
from iolab.report.sections.common import Figure, Section, numeric, number_or_dash, unique_in_order, usable_rows
from iolab.report.tables import Table

STATE_RE = re.compile(r"(?i)(?:^|[\s(\[,;/_-])cache\s*[=: ]\s*(on|off)\b")

_t = i18n.scoped("flashcache")


def cache_state(data: pd.DataFrame) -> pd.Series:
    """``"on"``, ``"off"`` or None per row, from the run's label (``... cache=on`` / ``... cache=off``)."""
    if "label" not in data.columns:
        return pd.Series(None, index=data.index, dtype=object)
    found = data["label"].astype(str).str.extract(STATE_RE, expand=False)
    return pd.Series([v.lower() if isinstance(v, str) else None for v in found], index=data.index, dtype=object)


def _experiment(label: str) -> str:
    """A label without its cache=on/off token: what the two runs of one experiment share."""
    name = STATE_RE.sub(" ", label)
    return re.sub(r"\s+", " ", name).strip(" -_,;/()[]") or "cache"


def flashcache_reps(data: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows of the experiment: ``experiment, state, test, direction, rep, bw_mbps, iops``."""
    columns = ["experiment", "state", "test", "direction", "rep", "bw_mbps", "iops"]
    state = cache_state(data)
    rows = usable_rows(data[state.notna()])
    if rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows.assign(state=cache_state(rows), experiment=rows["label"].astype(str).map(_experiment),
                       rep=numeric(rows, "rep"), bw_mbps=numeric(rows, "bw_mbps"), iops=numeric(rows, "iops"))
    keys = ["experiment", "state", "test", "direction", "rep"]
    return rows.groupby(keys, sort=False, dropna=False)[["bw_mbps", "iops"]].mean().reset_index()[columns]


def flashcache_summary(data: pd.DataFrame) -> pd.DataFrame:
    """Per experiment x test x direction: ``off`` (MB/s, mean of the repetitions), ``on_first``, ``on_last``
    (MB/s at the cache's first and last repetition), ``last_rep``, ``reps_on``, ``ratio_first``, ``ratio_last``."""
    reps = flashcache_reps(data)
    rows = []
    for (experiment, test, direction), part in reps.groupby(["experiment", "test", "direction"], sort=False):
        on = part[part["state"] == "on"].sort_values("rep")
        off = part[part["state"] == "off"]
        off_mean = float(off["bw_mbps"].mean()) if len(off) else math.nan
        first = float(on["bw_mbps"].iloc[0]) if len(on) else math.nan
        last = float(on["bw_mbps"].iloc[-1]) if len(on) else math.nan
        ratio = (lambda v: v / off_mean if off_mean and np.isfinite(off_mean) and off_mean > 0 else math.nan)
        rows.append({"experiment": experiment, "test": test, "direction": direction, "off": off_mean,
                     "on_first": first, "on_last": last,
                     "last_rep": int(on["rep"].iloc[-1]) if len(on) else None, "reps_on": len(on),
                     "ratio_first": ratio(first), "ratio_last": ratio(last)})
    return pd.DataFrame(rows, columns=["experiment", "test", "direction", "off", "on_first", "on_last", "last_rep",
                                       "reps_on", "ratio_first", "ratio_last"])


def _table(experiment: str, reps: pd.DataFrame, summary: pd.DataFrame, lang: str) -> Table:
    on_reps = sorted(int(r) for r in reps.loc[reps["state"] == "on", "rep"].dropna().unique())
    shown, numbers, labels = [], [], []
    for _, row in summary.iterrows():
        labels.append(i18n.test_label(row["test"], row["direction"], lang))
        part = reps[(reps["test"] == row["test"]) & (reps["direction"] == row["direction"]) & (reps["state"] == "on")]
        by_rep = dict(zip(part["rep"].astype(int), part["bw_mbps"]))
        values = [row["off"]] + [by_rep.get(r, math.nan) for r in on_reps] + [row["ratio_first"], row["ratio_last"]]
        numbers.append(values)
        shown.append([number_or_dash(v) for v in values[:-2]] + [i18n.factor(v) or "-" for v in values[-2:]])
    heads = ([_t("off", lang)] + [_t("rep", lang, rep=r) for r in on_reps]
             + [_t("ratio_first", lang), _t("ratio_last", lang)])
    index = pd.Index(labels, name=_t("test", lang))
    return Table(pd.DataFrame(shown, index=index, columns=heads), caption=_t("caption", lang, experiment=experiment),
                 data=pd.DataFrame(numbers, index=index, columns=heads))


def _figure(reps: pd.DataFrame, lang: str) -> Figure:
    plt = optional.pyplot()
    panels = list(dict.fromkeys(zip(reps["experiment"], reps["test"], reps["direction"])))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.2), squeeze=False)
    for ax, (experiment, test, direction) in zip(axes[0], panels):
        part = reps[(reps["experiment"] == experiment) & (reps["test"] == test) & (reps["direction"] == direction)]
        for state, style, key in (("on", "o-", "on"), ("off", "s--", "off_line")):
            line = part[part["state"] == state].sort_values("rep")
            if len(line):
                ax.plot(line["rep"], line["bw_mbps"], style, label=_t(key, lang))
        ax.set_title(i18n.test_label(test, direction, lang))
        ax.set_xlabel(_t("xlabel", lang))
        ax.set_ylabel(_t("ylabel", lang))
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    return Figure(fig, alt=_t("alt", lang))


def _sentence(row, lang: str) -> str:
    test = i18n.test_label(row["test"], row["direction"], lang)
    fields = dict(test=test, ratio=i18n.factor(row["ratio_last"]), first=i18n.factor(row["ratio_first"]),
                  rep=row["last_rep"], on=number_or_dash(row["on_last"]), off=number_or_dash(row["off"]))
    if row["reps_on"] < 2:
        return _t("one_rep", lang, test=test)
    return _t("helped" if row["ratio_last"] > 1 else "hurt", lang, **fields)


def flashcache_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Cache on vs off: one table per experiment (cache off, cache on per repetition, the ratios), a plot of
    MB/s per repetition, and a sentence per test saying how much the cache helped once warm."""
    i18n.check_lang(lang)
    reps = flashcache_reps(data)
    if reps.empty:
        return None
    section = Section("flash-cache", _t("heading", lang), lang, intro=_t("intro", lang))
    summary = flashcache_summary(data)
    for experiment in unique_in_order(summary["experiment"]):
        part = summary[summary["experiment"] == experiment]
        states = set(reps.loc[reps["experiment"] == experiment, "state"])
        missing = {"on", "off"} - states
        if missing:
            section.notes.append(_t("alone", lang, experiment=experiment, state=_t(f"state_{missing.pop()}", lang)))
            continue
        section.tables.append(_table(experiment, reps[reps["experiment"] == experiment], part, lang))
        section.sentences += [_sentence(row, lang) for _, row in part.iterrows() if np.isfinite(row["off"])]
    if section.tables:
        section.figures.append(_figure(reps, lang))
    return section
