"""What every report section shares: the :class:`Section` and :class:`Figure` objects, number formats for
prose and tables, the ``system`` column, a fleet's aggregate rows, and one legend for an Axes and its twin."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from iolab.report import commentary, i18n
from iolab.core.errors import IolabError
from iolab.analysis.stats import split_flags, valid_rows
from iolab.report.tables import DASH

MiB = 1024 * 1024
GiB = 1024 * MiB

#: Host name of a fleet's aggregate rows (:data:`iolab.fleet.inventory.ALL_HOSTS`).
ALL_HOSTS = "all"
#: Flag of a fleet's aggregate rows.
AGGREGATE_FLAG = "fleet_aggregate"
#: Flag of a ``--simultaneous`` run's total rows (:data:`iolab.engine.simultaneous.TOTAL_FLAG`): its targets' sum.
SIMULTANEOUS_TOTAL_FLAG = "simultaneous_total"


@dataclass
class Figure:
    """A matplotlib figure of a section, with the alt text its image carries."""
    figure: object
    alt: str
    caption: str = ""

    @property
    def axes(self) -> list:
        return list(self.figure.axes)


class CoverageNote(str):
    """A sentence on what was measured (tests only one system ran), not a finding: shown after them, once."""


@dataclass
class Section:
    """One recipe-specific part of a report: heading, tables, figures, findings."""
    kind: str
    title: str
    lang: str = "en"
    intro: str = ""
    tables: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    sentences: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    caveats: list = field(default_factory=list)  # the flags of the rows shown (iolab.report.section_caveats)

    def __repr__(self) -> str:
        return (f"Section({self.kind!r}, {self.title!r}, {len(self.tables)} tables, {len(self.figures)} figures, "
                f"{len(self.sentences)} sentences)")

    @property
    def findings(self) -> str:
        """The commentary as Markdown (a bullet per finding; coverage notes, once each, and notes after)."""
        text = "\n".join(f"- {s}" for s in self.sentences if not isinstance(s, CoverageNote))
        notes = list(dict.fromkeys(s for s in self.sentences if isinstance(s, CoverageNote))) + list(self.notes)
        if notes:
            text += ("\n\n" if text else "") + "\n".join(f"*{n}*" for n in notes)
        return text

    def markdown(self) -> str:
        """Heading, tables and findings as Markdown (figures left out): for tests and plain-text use."""
        parts = [f"### {self.title}"]
        if self.intro:
            parts.append(self.intro)
        parts += [t.to_markdown() for t in self.tables]
        if self.sentences or self.notes:
            parts.append(f"**{i18n.text('headings.commentary', self.lang)}**\n\n{self.findings}")
        if self.caveats:
            parts.append(self.caveats_markdown())
        return "\n\n".join(parts)

    def caveats_markdown(self) -> str:
        return i18n.text("commentary.caveats", self.lang) + "\n" + "\n".join(f"- {c}" for c in self.caveats)

    def show(self, display: Callable | None = None, *, level: int = 3) -> None:
        """Display in a notebook: heading, tables, figures (closed once shown, numbered by
        :func:`iolab.report.figures.show`), findings."""
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        from iolab.report import figures
        display(Markdown(f"{'#' * level} {self.title}" + (f"\n\n{self.intro}" if self.intro else "")))
        for table in self.tables:
            display(table)
        for fig in self.figures:  # numbered on the page, referred to before, captioned under (its alt text if none)
            figures.show(display, fig.figure, alt=fig.alt, caption=fig.caption or fig.alt, lang=self.lang,
                         lead="lead_section")
        if self.sentences or self.notes:
            display(Markdown(f"**{i18n.text('headings.commentary', self.lang)}**\n\n{self.findings}"))
        if self.caveats:
            display(Markdown(self.caveats_markdown()))

    def close(self) -> None:
        """Close the figures without showing them."""
        import matplotlib.pyplot as plt
        for fig in self.figures:
            plt.close(fig.figure)


# =========================================================================== helpers
# Shared by every section module: column access, the order systems appear in, number formats for prose and
# tables, winner sentences, a fleet's aggregate rows, and curves' names and legends. (Each section module
# takes its words with ``i18n.scoped("sections")``, and matplotlib from :func:`iolab.core.optional.pyplot`.)


def plot_labels(group: str, lang: str) -> dict:
    """Axis and legend texts of a plotting function (``sections.plot.<group>``) in ``lang``."""
    return dict(i18n.catalog(lang)["sections"]["plot"][group])


def as_numbers(series) -> pd.Series:
    """``series`` as numbers, NaN where a value is not one."""
    return pd.to_numeric(series, errors="coerce")


def numeric(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where the frame lacks it."""
    if name not in frame.columns:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return as_numbers(frame[name])


def usable_rows(data: pd.DataFrame) -> pd.DataFrame:
    """The rows a section may show (:func:`iolab.analysis.stats.valid_rows`: no error, a value)."""
    return data[valid_rows(data)] if len(data) else data


def with_system(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with a ``system`` column (the label where :func:`iolab.report.notebooks.select` did not name one)."""
    if "system" in data.columns:
        return data
    if "label" not in data.columns:
        raise IolabError("no column 'system' or 'label' naming the systems", context="sections",
                         hint="use iolab.report.notebooks.select()")
    return data.assign(system=data["label"].astype(str))


def system_names(data: pd.DataFrame) -> list[str]:
    """The ``system`` column's names, each once, in order of appearance."""
    return list(dict.fromkeys(data["system"].astype(str)))


def unique_in_order(values) -> list:
    """``values`` each once, in order of appearance."""
    return list(dict.fromkeys(values))


def about(value: float) -> str:
    """A rounded figure for prose: three significant digits (``39,412`` -> ``39,400``)."""
    if value is None or not np.isfinite(value) or value == 0:
        return i18n.number(value)
    digits = 2 - int(math.floor(math.log10(abs(value))))
    return i18n.number(round(value, digits), digits=max(0, digits))


def signed_percent(fraction: float) -> str:
    """A relative change as a signed percentage: ``0.018`` -> ``+1.8%``, ``-0.62`` -> ``-62%``."""
    pct = fraction * 100
    text = f"{abs(pct):.1f}" if abs(pct) < 10 else f"{abs(pct):.0f}"
    return ("-" if pct < 0 and text.strip("0.") else "+") + text + "%"


def small_percent(value: float) -> str:
    """A small share in percent for prose: ``0.31``, ``0.012``, ``0.0008``, ``12.5``."""
    if value >= 1:
        return i18n.number(value, digits=1)
    return f"{value:.2g}"


def us_as_ms(us: float) -> str:
    """Microseconds written as milliseconds for prose and tables, a dash where unknown."""
    return i18n.number(us / 1000.0) if us is not None and np.isfinite(us) else DASH


def number_or_dash(value, digits: int | None = None) -> str:
    """:func:`iolab.report.i18n.number`, a dash where the value is unknown."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return DASH
    return i18n.number(value, digits=digits)


def winner_lines(summary: pd.DataFrame, lang: str) -> list[str]:
    """iolab.report.commentary's winner sentences for a summary (system, test, direction, metric, unit, value...)."""
    if summary.empty:
        return []
    win = commentary.winners(summary)
    if win.empty:
        return []
    note = commentary.coverage_note(win, lang=lang)
    return commentary.winner_sentences(win, lang=lang) + ([CoverageNote(note)] if note else [])


def without_aggregates(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` without a fleet's aggregate rows (host ``all`` or flag ``fleet_aggregate``) and a simultaneous
    run's total rows (flag ``simultaneous_total``).

    The aggregate is the sum of the hosts (or targets) that ran together, not one more
    system: generic tables and charts must not set it beside the hosts.
    """
    if data.empty:
        return data
    mask = pd.Series(False, index=data.index)
    if "flags" in data.columns:
        mask |= data["flags"].map(lambda v: bool({AGGREGATE_FLAG, SIMULTANEOUS_TOTAL_FLAG} & set(split_flags(v))))
    if "host" in data.columns:
        mask |= data["host"].astype(str) == ALL_HOSTS
    return data[~mask]


def totals_left_out(data: pd.DataFrame, lang: str) -> str | None:
    """The sentence naming a ``--simultaneous`` run's totals that :func:`without_aggregates` kept out of the
    tables and charts (the sum of targets measured at once is no device), or None when ``data`` has none."""
    if data.empty or "flags" not in data.columns:
        return None
    totals = data[data["flags"].map(lambda v: SIMULTANEOUS_TOTAL_FLAG in split_flags(v))]
    if totals.empty:
        return None
    return i18n.text("text.simultaneous_left_out", lang, totals=i18n.join(system_names(with_system(totals)), lang))


def measured_systems(results: pd.DataFrame) -> list[str]:
    """The systems a selection measured: fleet aggregates left out, a fleet host counted once (by its label)
    however many fleet runs it took part in (``web1`` in the 1-, 2- and 3-host runs is one system)."""
    data = without_aggregates(with_system(results)) if len(results) else results
    if data.empty:
        return []
    names = data["system"].astype(str)
    if "fleet_id" in data.columns and "label" in data.columns:
        names = names.where(data["fleet_id"].isna(), data["label"].astype(str))
    return list(dict.fromkeys(names))


def without_aggregate_runs(manifests: pd.DataFrame) -> pd.DataFrame:
    """Run manifests without a fleet's own runs (host ``all``, ``data/_fleet/``): they measured no system."""
    if manifests.empty or "host" not in manifests.columns:
        return manifests
    return manifests[manifests["host"].astype(str) != ALL_HOSTS].reset_index(drop=True)


def is_aggregate(data: pd.DataFrame) -> pd.Series:
    """True for a fleet's aggregate rows (:func:`without_aggregates` leaves them out)."""
    return ~data.index.isin(without_aggregates(data).index)


def curve_name(key: dict, lang: str) -> str:
    """A curve's legend name from its group key: the sweep or test, and the direction in ``lang``."""
    return i18n.test_label(str(key.get("sweep") or key.get("test") or ""), key.get("direction"), lang)


def merge_legends(ax, twin, *, below: bool = False) -> None:
    """One legend for an Axes and its twin: right of the plot, or ``below`` it (figures with several panels)."""
    handles, texts = [], []
    for axes in (ax, twin):
        if axes is None:
            continue
        legend = axes.get_legend()
        if legend is not None:
            legend.remove()
        for handle, text in zip(*axes.get_legend_handles_labels()):
            if not text.startswith("_") and text not in texts:
                handles.append(handle)
                texts.append(text)
    if handles and below:
        ax.legend(handles, texts, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize="small",
                  frameon=False)
    elif handles:
        ax.legend(handles, texts, loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize="small", frameon=False)


def rows_matching(frame: pd.DataFrame, key: dict) -> pd.DataFrame:
    """The rows of ``frame`` whose columns hold ``key``'s values (all rows for an empty key)."""
    if not key:
        return frame
    return frame[np.logical_and.reduce([frame[k] == v for k, v in key.items()])]


def groups_by(frame: pd.DataFrame, keys: Sequence[str]) -> Iterator[tuple[dict, pd.DataFrame]]:
    """``frame``'s groups by ``keys`` in order of appearance (NaN a value too), each key as a dict column -> value."""
    if not keys:
        yield {}, frame
        return
    for key, sub in frame.groupby(list(keys), sort=False, dropna=False):
        yield dict(zip(keys, key if isinstance(key, tuple) else (key,))), sub
