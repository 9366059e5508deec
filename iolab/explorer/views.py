"""What the JupyterLab explorer shows beyond its bars, computed apart from the widgets.

* :func:`views` — the views a recipe's rows offer: the bars per test, and each recipe-specific section that
  applies (Bonnie++'s and tiobench's tables, the queue-depth curves...; :func:`iolab.report.sections.plan`);
  :func:`section` builds one of them.
* :func:`overlay` — a published article's figures with the runs shown beside them
  (:func:`iolab.report.beside.beside`), for the first of the article's tables the runs have a figure for, else the
  article's first table alone; drawn by :func:`overlay_chart` as the compare notebook draws it.
* :func:`render` — the HTML report of the runs shown (beside the article, if one is chosen): what the explorer's
  "Render the report" button writes.

Nothing here builds a widget; the charts are matplotlib figures the caller turns into images and closes.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from iolab.core.errors import IolabError
from iolab.report import i18n

log = logging.getLogger(__name__)

_t = i18n.scoped("explorer")

#: The view every recipe has: one bar per test and system.
BARS = "bars"


def views(data: pd.DataFrame) -> list[str]:
    """The views of one recipe's rows: :data:`BARS`, then the kinds of section that apply, in report order."""
    from iolab.report import sections
    return [BARS] + (sections.plan(data) if not data.empty else [])


def view_label(view: str, lang: str) -> str:
    """A view's name in ``lang`` (``explorer.views`` in the locale)."""
    table = (i18n.catalog(lang).get("explorer") or {}).get("views") or {}
    return str(table.get(view, view))


def section(data: pd.DataFrame, kind: str, *, lang: str, context: pd.DataFrame | None = None):
    """The :class:`~iolab.report.sections.Section` of ``kind`` for ``data`` (None when the rows give none);
    the other sections built on the way are closed."""
    from iolab.report import sections
    if kind not in sections.SECTIONS:
        raise IolabError(f"unknown view {kind!r}", context="explorer view",
                         hint="choose one of " + ", ".join([BARS, *sections.SECTIONS]))
    built, _ = sections.build(data, lang=lang, context=context)
    chosen = None
    for part in built:
        if part.kind == kind and chosen is None:
            chosen = part
        else:
            part.close()
    return chosen


def articles(lang: str) -> list[tuple[str, str]]:
    """``(title in lang, article id)`` of every shipped article, for a chooser."""
    from iolab.analysis import reference
    return [(str((info.get("title") or {}).get(lang) or name), name) for name, info in reference.articles().items()]


@dataclass
class Overlay:
    """One of an article's tables as the explorer draws it: the published rows, with measured ones beside."""
    article: str
    benchmark: str
    metric: str
    unit: str
    title: str
    summary: pd.DataFrame  # :func:`iolab.report.beside.as_summary` rows with an ``x`` column (the test's label)
    measured: list  # the measured systems among the summary's
    text: str  # what is shown, in one sentence
    axes: object = None  # the chart's axes once drawn


def overlay(article: str, results: pd.DataFrame, manifests: pd.DataFrame | None = None, *,
            lang: str = "en") -> Overlay:
    """The article's first table the runs shown have a figure for, with theirs beside; else its first table."""
    from iolab.analysis import reference
    from iolab.report import beside
    info = reference.article_info(article)
    published = reference.load(article=article)
    combined = beside.beside(published, results, article=article, manifests=manifests, lang=lang) \
        if not results.empty else published
    specs = [s for s in reference.table_specs(info, published)
             if not combined[(combined["benchmark"] == s["benchmark"]) & (combined["metric"] == s["metric"])].empty]
    if not specs:
        raise IolabError("the article has no table with a figure", context=f"article {article}")
    measured = beside.is_measured(combined)
    chosen = next((s for s in specs if (measured & (combined["benchmark"] == s["benchmark"])
                                        & (combined["metric"] == s["metric"])).any()), specs[0])
    part = combined[(combined["benchmark"] == chosen["benchmark"]) & (combined["metric"] == chosen["metric"])]
    summary = beside.as_summary(part, lang=lang)
    summary["x"] = [i18n.test_label(t, d, lang) for t, d in zip(summary["test"], summary["direction"])]
    title = i18n.label(chosen["title"], lang, section="tables")
    mine = list(dict.fromkeys(part.loc[beside.is_measured(part), "system"].astype(str)))
    if mine:
        text = _t("overlay_beside", lang, article=(info.get("title") or {}).get(lang) or article, table=title)
    else:
        benchmarks = i18n.join(list(dict.fromkeys(published["benchmark"].astype(str))), lang)
        text = _t("overlay_alone", lang, benchmarks=benchmarks, table=title)
    return Overlay(article, str(chosen["benchmark"]), str(chosen["metric"]), str(part["unit"].iloc[0]), title,
                   summary, mine, text)


def overlay_chart(shown: Overlay, *, lang: str, log_scale: bool | None = None):
    """The overlay's figure (article's and measured systems in their own colours), or None for a single value."""
    from iolab.report import figures, tables
    fig = figures.summary_chart(shown.summary, unit=shown.unit, lang=lang, published=True,
                                ylabel=tables.caption_for(shown.metric, shown.unit, lang),
                                legend_title=i18n.text("labels.system", lang))
    if fig is not None:
        apply_scale(fig, log_scale)
        fig.axes[0].set_title(shown.title)
    return fig


def overlay_outputs(article: str, data: pd.DataFrame, manifests: pd.DataFrame | None, *, lang: str,
                    log_scale: bool | None = None) -> tuple[Overlay, list]:
    """The overlay and what shows it: its sentence, then its chart as a PNG (the figure closed) or, for a
    single figure, the sentence that gives it."""
    import matplotlib.pyplot as plt

    from iolab.report import figures
    from iolab.explorer.widgetkit import markdown, png
    shown = overlay(article, data, manifests if not data.empty else None, lang=lang)
    fig = overlay_chart(shown, lang=lang, log_scale=log_scale)
    if fig is None:
        return shown, [markdown(shown.text),
                       markdown(figures.single_sentence(shown.summary, shown.unit, lang, published=True))]
    shown.axes = fig.axes[0]
    image = png(fig)
    plt.close(fig)
    return shown, [markdown(shown.text), image]


def apply_scale(fig, log_scale: bool | None) -> None:
    """A figure's value axes on a log (True) or linear (False) scale; None leaves each as drawn."""
    if log_scale is None:
        return
    for ax in fig.axes:
        if ax.get_ylabel():
            ax.set_yscale("log" if log_scale else "linear")


def render(run_dirs: Sequence[str | os.PathLike], *, lang: str, out: str | os.PathLike,
           reference: str | None = None):
    """The compare report of ``run_dirs`` (beside ``reference``'s systems when given) in ``out``: ReportFiles."""
    from iolab.report import notebooks
    runs = [str(Path(r)) for r in dict.fromkeys(str(r) for r in run_dirs)]
    if not runs:
        raise IolabError("no run is shown", context="render the report", hint="choose runs with results first")
    return notebooks.report(runs, lang=lang, out=out, notebook="compare", reference=reference or None)
