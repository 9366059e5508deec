"""The measure notebook's chart of one recipe's run: MB/s and IOPS per test side by side, a bar per direction.

:func:`summaries` computes what is drawn (tidy frames from :func:`iolab.report.tables.summarize`); :func:`chart`
draws it and words its caption and alt text in the page's language, as the report and compare pages caption
theirs; the notebook shows it numbered with :func:`iolab.report.figures.show`.
"""
from __future__ import annotations

import pandas as pd

from iolab.core import optional
from iolab.report import i18n, plot, tables
from iolab.report.sections.common import Figure

#: the two panels, left to right
METRICS = ("bw_mbps", "iops")

_t = i18n.scoped("measure_chart")


def summaries(part: pd.DataFrame, lang: str = "en") -> dict[str, pd.DataFrame]:
    """Per metric of :data:`METRICS`: one row per test and direction (``x`` the test's label, ``bar`` the
    direction's, in ``lang``), the mean over the passes with its 95% confidence interval."""
    found = {}
    for metric in METRICS:
        summary = tables.summarize(part, value=metric, system="direction", by=("test",))
        summary["x"] = [i18n.label(t, lang, section="tests") for t in summary["test"]]
        summary["bar"] = [i18n.label(d, lang, section="directions") for d in summary["system"]]
        found[metric] = summary
    return found


def _systems(part: pd.DataFrame) -> list[str]:
    column = "system" if "system" in part else "label"
    return list(dict.fromkeys(part[column].dropna().astype(str))) if column in part else []


def caption(part: pd.DataFrame, recipe: str, found: dict[str, pd.DataFrame], lang: str = "en") -> str:
    """What the chart shows, in ``lang``: the recipe and system, both metrics with their units, and error bars
    only when the chart draws them (several passes)."""
    names = [tables.caption_for(m, tables.metric_unit(m), lang) for m in METRICS]
    has_ci = any(s["ci_low"].notna().any() for s in found.values())
    text = _t("caption", lang, recipe=recipe, system=i18n.join(_systems(part), lang), left=names[0], right=names[1])
    return text + (_t("ci", lang) if has_ci else "")


def chart(part: pd.DataFrame, recipe: str, lang: str = "en") -> Figure:
    """The two panels for one recipe's rows (``part``), with caption and alt text in ``lang``."""
    found = summaries(part, lang)
    fig, axes = optional.pyplot().subplots(1, 2, figsize=(12, 3.8))
    for ax, metric in zip(axes, METRICS):
        plot.bars(found[metric], x="x", y="value", hue="bar", low="ci_low", high="ci_high", ax=ax, xlabel="",
                  ylabel=tables.caption_for(metric, tables.metric_unit(metric), lang),
                  legend_title=i18n.text("labels.direction", lang))
    plot.tight(fig)
    text = caption(part, recipe, found, lang)
    return Figure(fig, alt=text, caption=text)
