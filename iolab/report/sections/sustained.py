"""The sustained-write section: a review's sustained-performance page, from the write-cliff finding.

One row per system: the burst rate, how much it wrote before the cliff, the rate after it
(and the share lost), and the rate of the short write after the idle pause; the sentences
come from :mod:`iolab.report.cliff_text`. The finding itself is computed when the run ends
(:mod:`iolab.analysis.cliff` over fio's per-second log, kept in the run's ``raw/``); this
section reads only the result rows, as every report does.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.analysis.cliff import series_values
from iolab.core.units import human_size
from iolab.core import optional
from iolab.report import cliff_text, i18n
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import Figure, Section, number_or_dash, unique_in_order, with_system

_t = i18n.scoped("sections")

#: the tests of the sustained-write recipe (the ``sustained`` row carries the finding)
SUSTAINED_TESTS = ("sustained", "recovery")
#: columns of the section's table, in order, with the figure each shows
_COLUMNS = ("burst_mbps", "cliff_bytes", "after_mbps", "cliff_drop", "recovery_mbps", "idle_s")


def is_sustained(data: pd.DataFrame) -> pd.Series:
    """Rows of a sustained-write run: its two tests, where the run wrote a cliff finding."""
    if "test" not in data.columns or not ({"cliff_found", "cliff_error"} & set(data.columns)):
        return pd.Series(False, index=data.index)
    return data["test"].astype(str).isin(SUSTAINED_TESTS)


def _shown(column: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    if column == "cliff_bytes":
        return human_size(float(value))
    if column == "cliff_drop":
        return f"{float(value) * 100:.0f}%"
    return number_or_dash(float(value), 1 if column == "idle_s" else None)


def sustained_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """The section, or None when no row carries a finding."""
    i18n.check_lang(lang)
    data = with_system(data)
    rows = data[data["test"].astype(str).eq("sustained")]
    if rows.empty:
        return None
    columns = [_t(f"sustained.col_{c}", lang) for c in _COLUMNS]
    shown, numbers, index = [], [], []
    for system in unique_in_order(rows["system"].astype(str)):
        row = rows[rows["system"].astype(str) == system].iloc[-1]
        index.append(system)
        values = [pd.to_numeric(row.get(c), errors="coerce") for c in _COLUMNS]
        numbers.append(values)
        shown.append([_shown(c, v) for c, v in zip(_COLUMNS, values)])
    table = Table(pd.DataFrame(shown, index=index, columns=columns),
                  data=pd.DataFrame(numbers, index=index, columns=columns),
                  caption=_t("sustained.caption", lang), notes=[_t("sustained.note", lang)])
    figure = _series_figure(rows, index, lang)
    return Section(kind="sustained-write", title=_t("sustained.heading", lang), lang=lang,
                   intro=_t("sustained.intro", lang), tables=[table], figures=[figure] if figure else [],
                   sentences=cliff_text.sentences(rows, lang, system="system"))


def _series_figure(rows: pd.DataFrame, systems: list[str], lang: str) -> Figure | None:
    """The per-second write rate of each system over time, the cliff marked (dashed) where it was found."""
    if "series_mbps" not in rows.columns:
        return None
    fig, ax = optional.pyplot().subplots(figsize=(7.2, 3.8))
    drawn = []
    for system in systems:
        row = rows[rows["system"].astype(str) == system].iloc[-1]
        seconds, mbps = series_values(row.get("series_s")), series_values(row.get("series_mbps"))
        if not mbps or len(seconds) != len(mbps):
            continue
        # each sample is the mean over the second before its time: drawn as a step over that second
        (line,) = ax.plot([0.0] + seconds, mbps[:1] + mbps, drawstyle="steps-pre", label=system)
        cliff_s = pd.to_numeric(row.get("cliff_s"), errors="coerce")
        if pd.notna(cliff_s):
            ax.axvline(float(cliff_s), color=line.get_color(), linestyle="--", linewidth=1)
        drawn.append(system)
    if not drawn:
        optional.pyplot().close(fig)
        return None
    ax.set_xlabel(_t("sustained.x", lang))
    ax.set_ylabel(_t("sustained.y", lang))
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    return Figure(fig, alt=_t("sustained.alt", lang, systems=i18n.join(drawn, lang)))
