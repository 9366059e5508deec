"""The charts of a page as an editor prints them: numbered, captioned, referred to in the text, and only where a
chart says more than a sentence.

* :class:`Page` numbers the figures of one page (Figure 1, 2 ...; 図1, 2 ...); :func:`show` displays a figure with
  the sentence that refers to it before and its numbered caption under it (:func:`page` starts a page, and
  :meth:`iolab.report.sections.common.Section.show` numbers a section's figures on the same page).
* :func:`memory_rows` tells figures read from memory (hdparm -T cached reads, page-cache-inflated rows) from the
  device's; :func:`summary_chart` draws them on an axis of their own beside the device's, says a single value in a
  sentence instead of a full-width bar, and draws a 1x line under a table of speed-ups.

Everything said is in ``locale/<lang>.yaml``'s ``charts`` section; numbers by the tables' rule (:func:`iolab.report.plot.bar_label`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd

from iolab.core import optional
from iolab.core.errors import IolabError
from iolab.report import i18n
from iolab.report.commentary_base import MEMORY_TESTS, Rules

log = logging.getLogger(__name__)

_t = i18n.scoped("charts")

#: Units whose figures are ratios with a "no change" line: a speed-up of 1x.
SPEEDUP_UNITS = ("x",)
#: Units written right after the number, without a space (9x, 10%).
TIGHT_UNITS = ("x", "%")


@dataclass
class Page:
    """The figures of one page, numbered in the order they are shown."""
    lang: str = "en"
    count: int = 0

    def next(self) -> int:
        self.count += 1
        return self.count

    def name(self, n: int) -> str:
        """``Figure 3`` / ``図3``: how the text refers to figure ``n``."""
        return _t("figure", self.lang, n=n)

    def caption(self, n: int, caption: str) -> str:
        """The numbered caption under figure ``n`` (Markdown)."""
        return _t("caption", self.lang, n=n, caption=caption.strip().rstrip(".。"))

    def lead(self, n: int, key: str = "lead_table", **fields) -> str:
        """The sentence before figure ``n`` that refers to it (``charts.<key>``)."""
        return _t(key, self.lang, n=n, **fields)


_CURRENT: dict[str, Page] = {}


def page(lang: str = "en") -> Page:
    """Start numbering the figures of a new page in ``lang`` (a notebook calls this once, at the top)."""
    i18n.check_lang(lang)
    _CURRENT["page"] = Page(lang)
    return _CURRENT["page"]


def current(lang: str = "en") -> Page:
    """The page being numbered; a new one in ``lang`` when none was started."""
    found = _CURRENT.get("page")
    if found is None or found.lang != lang:
        found = page(lang)
    return found


def show(display, figure, *, alt: str, caption: str, lang: str = "en", lead: str = "lead_table",
         **fields) -> int:
    """Display ``figure`` (a matplotlib Figure) as a numbered figure: the sentence that refers to it
    (``charts.<lead>``; ``lead=""``: none, the caller's text refers to it), the image with ``alt``, its
    caption. Returns its number."""
    from IPython.display import Markdown
    from iolab.report import plot
    if not caption:
        raise IolabError("a figure without a caption", context="figures.show", hint=f"alt text: {alt!r}")
    numbers = current(lang)
    n = numbers.next()
    if lead:
        display(Markdown(numbers.lead(n, lead, **fields)))
    display(plot.to_image(figure, alt=alt))
    display(Markdown(numbers.caption(n, caption)))
    return n


# ---------------------------------------------------------------------------
# what a chart of a summary draws


def memory_rows(summary: pd.DataFrame, rules: Rules = Rules()) -> pd.Series:
    """Rows whose figure is memory's, not the device's: hdparm -T (cached reads), rows flagged
    ``cache_inflated``, and rows of a system not isolated from the page cache that are at least
    ``rules.inflated`` (10x) the isolated systems' best in the same test."""
    tests = summary["test"].astype(str)
    memory = tests.map(lambda t: any(m in t for m in MEMORY_TESTS)).astype(bool)
    if "flags" in summary.columns:
        memory |= summary["flags"].fillna("").astype(str).str.contains("cache_inflated")
    if "cache_isolated" in summary.columns:
        isolated = summary["cache_isolated"].fillna(True).astype(bool)
        values = pd.to_numeric(summary["value"], errors="coerce")
        direction = summary["direction"].fillna("").astype(str) if "direction" in summary.columns \
            else pd.Series("", index=summary.index)
        best = values.where(isolated).groupby([tests, direction]).transform("max")
        memory |= ~isolated & (values >= best * rules.inflated)
    return memory


def single_value(summary: pd.DataFrame) -> bool:
    """True when the summary holds one figure: a sentence says it, not a full-width bar."""
    return int(pd.to_numeric(summary["value"], errors="coerce").notna().sum()) <= 1


def single_sentence(summary: pd.DataFrame, unit: str, lang: str, *, published: bool = False) -> str:
    """The sentence that gives a one-figure table's value instead of a chart; an article's one ratio (a speed-up,
    a cost) is not given here, as its findings say it right after (each fact once per section)."""
    from iolab.report import plot
    from iolab.report.comparisons import RATIO_METRICS
    if published and "metric" in summary and len(summary) and summary["metric"].isin(RATIO_METRICS).all():
        return _t("single_ratio", lang)
    row = summary.dropna(subset=["value"]).iloc[0] if summary["value"].notna().any() else summary.iloc[0]
    value = plot.bar_label(row["value"], published=published)
    if unit:  # 9x and 10%, as the prose writes ratios; 712 MB/s, 25.3秒 (i18n.with_unit)
        shown = i18n.unit(unit, lang)
        value = f"{value}{shown}" if unit in TIGHT_UNITS else i18n.with_unit(value, shown)
    return _t("single", lang, value=value or "–", system=row["system"])


def summary_chart(summary: pd.DataFrame, *, unit: str, ylabel: str, lang: str, published: bool = False,
                  legend_title: str | None = None, dots_over: int = 12):
    """The chart of a summary (:func:`iolab.report.tables.summarize`, or an article's) with an ``x`` column:
    bars per system (dots past ``dots_over`` systems); the device's figures and memory's (:func:`memory_rows`) on
    two axes side by side; a 1x line under speed-ups. Returns the matplotlib Figure, or None for one figure
    (:func:`single_value`: say it with :func:`single_sentence`)."""
    from iolab.report import plot
    if single_value(summary):
        return None
    memory = memory_rows(summary)
    panels = [(key, part) for key, part in (("disk", summary[~memory]), ("memory", summary[memory]))
              if len(part)]
    split = len(panels) > 1
    widths = [max(1, part["x"].nunique()) for _, part in panels]
    fig, axes = optional.pyplot().subplots(1, len(panels), figsize=(10, 4), squeeze=False,
                                   gridspec_kw={"width_ratios": widths})
    for ax, (key, part) in zip(axes[0], panels):
        if part["system"].nunique() > dots_over:  # dozens of servers: one dot each, best and worst named
            plot.dots(part.dropna(subset=["value"]), x="x", y="value", label="system", ax=ax, xlabel="",
                      ylabel=ylabel)
        else:
            cached = part.loc[~part["cache_isolated"].fillna(True).astype(bool), "system"].unique() \
                if "cache_isolated" in part.columns else []
            low, high = ("ci_low", "ci_high") if "ci_low" in part.columns else (None, None)
            plot.bars(part, x="x", y="value", hue="system", low=low, high=high, ax=ax, xlabel="", ylabel=ylabel,
                      legend_title=legend_title, hatched=cached, published=published)
        if split:
            ax.set_title(_t(key, lang), fontsize="small", pad=14)  # clear of the value labels above the bars
        if unit in SPEEDUP_UNITS:
            plot.reference_line(ax, 1.0, _t("speedup_line", lang))
    if split:
        _one_legend(fig, legend_title)
    plot.tight(fig)
    return fig


def _one_legend(fig, title: str | None) -> None:
    """One legend of every system of the figure's axes, right of them (each system once, in its one colour)."""
    handles = {}
    for ax in fig.axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            if not text.startswith("_"):
                handles.setdefault(text, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if len(handles) > 1:
        fig.legend(list(handles.values()), list(handles), title=title, fontsize="small", title_fontsize="small",
                   frameon=False, loc="upper left", bbox_to_anchor=(1.0, 0.95))


def split_note(fig, lang: str) -> str:
    """The sentence under a chart whose memory figures have their own axis; '' for one axis."""
    return _t("split_note", lang) if fig is not None and len(fig.axes) > 1 else ""


def with_split_note(caption: str, fig, lang: str) -> str:
    """``caption`` followed by :func:`split_note` as its second sentence when the figure has a memory axis."""
    note = split_note(fig, lang)
    if not note:
        return caption
    return caption.rstrip(".。") + ("。" if lang == "ja" else ". ") + note
