"""Concurrency: throughput, p99 latency and Jain's fairness against the number of jobs, per queue depth."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n
from iolab.analysis import curves
from iolab.report.tables import Table
from iolab.report.sections.common import (
    Figure, Section, plot_labels, as_numbers, numeric, usable_rows, with_system, unique_in_order, about,
    us_as_ms, number_or_dash, curve_name, merge_legends, groups_by, rows_matching)

_t = i18n.scoped("sections")


def _scaling_metric(data: pd.DataFrame) -> str:
    """IOPS for small blocks, MB/s for large ones (transactions per second for pgbench)."""
    if "tps" in data.columns and numeric(data, "tps").notna().any():
        return "tps"
    bs = numeric(data, "bs").dropna()
    return "iops" if len(bs) and bs.max() < 64 * 1024 else "bw_mbps"


def concurrency_points(data: pd.DataFrame, *, metric: str | None = None) -> pd.DataFrame:
    """Throughput, p99 and fairness against the number of jobs, per system and curve.

    One row per system x curve (sweep, direction, block size, queue depth) x
    numjobs with :func:`iolab.analysis.curves.scaling`'s ``total`` (the ``metric``,
    mean over repetitions), ``p99`` (µs), ``speedup`` and ``efficiency``, and
    ``jain`` (mean of the ``jain_index`` column the engine writes for
    numjobs > 1; NaN without it). ``metric`` defaults to IOPS for blocks under
    64 KiB, MB/s above, tps for pgbench.
    """
    data = usable_rows(with_system(data))
    if "sweep" in data.columns and data["sweep"].notna().any():
        data = data[data["sweep"].notna()]
    metric = metric or _scaling_metric(data)
    keys = [c for c in ("sweep", "test", "direction", "bs", "iodepth") if c in data.columns]
    if "sweep" in keys:
        keys.remove("test")
    by = ["system"] + keys
    table = curves.scaling(data, "numjobs", y=metric, by=by)
    if "jain_index" in data.columns:
        jain = data.assign(_j=as_numbers(data["jain_index"])).groupby(by + ["numjobs"], dropna=False)["_j"].mean()
        table["jain"] = [jain.get(tuple(r[c] for c in by + ["numjobs"]), math.nan)
                         for _, r in table.iterrows()]
    table["metric"] = metric
    return table


def concurrency_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Throughput and p99 latency against the number of jobs (:func:`iolab.report.curveplots.scaling_plot`).

    For tests swept over ``numjobs`` (named ``<base>-Q<d>T<j>`` with a ``sweep``
    column): a table (rows = queue depth x jobs, columns = total, p99 and
    Jain's fairness index per system), a chart per charted queue depth (the
    lowest and the highest), and per system how the total grew with the jobs
    and how evenly they shared the device.
    """
    i18n.check_lang(lang)
    data = usable_rows(with_system(data))
    if data.empty:
        return None
    points = concurrency_points(data)
    metric = str(points["metric"].iloc[0]) if len(points) else "iops"
    metric_name = _t(f"scaling.metric_{metric}", lang)
    section = Section("concurrency", _t("scaling.heading", lang), lang, intro=_t("scaling.intro", lang))
    for key, sub in groups_by(points, [c for c in ("sweep", "direction", "bs") if c in points.columns]):
        name = curve_name(key, lang)
        depths = sorted(as_numbers(sub["iodepth"]).dropna().unique()) if "iodepth" in sub.columns else [math.nan]
        charted = [depths[0], depths[-1]] if len(depths) > 1 else depths
        section.tables.append(_scaling_table(sub, name, metric_name, lang))
        section.figures.append(_scaling_figure(rows_matching(data, key), charted, name, metric, metric_name, lang))
        section.sentences += _scaling_sentences(sub, charted, metric_name, lang)
    return section


def _has_jain(points: pd.DataFrame) -> bool:
    return "jain" in points.columns and points["jain"].notna().any()


def _scaling_table(sub: pd.DataFrame, name: str, metric_name: str, lang: str) -> Table:
    """One curve's table: rows = queue depth x jobs, columns = total, p99 (ms) and Jain's index per system."""
    levels = sub[["iodepth", "numjobs"]].drop_duplicates().sort_values(["iodepth", "numjobs"]) \
        if "iodepth" in sub.columns else sub[["numjobs"]].drop_duplicates().sort_values("numjobs")
    index = pd.MultiIndex.from_tuples([(f"QD{int(r['iodepth'])}", int(r["numjobs"])) for _, r in levels.iterrows()],
                                      names=[_t("scaling.depth", lang), _t("scaling.jobs", lang)]) \
        if "iodepth" in levels.columns else pd.Index(levels["numjobs"].astype(int), name=_t("scaling.jobs", lang))
    blocks = {"total": metric_name, "p99": _t("scaling.col_p99", lang)}
    if _has_jain(sub):
        blocks["jain"] = _t("scaling.col_jain", lang)
    shown, numbers = {}, {}
    for column, head in blocks.items():
        for system in unique_in_order(sub["system"]):
            values = []
            for _, level in levels.iterrows():
                match = sub[(sub["system"] == system) & (sub["numjobs"] == level["numjobs"])]
                if "iodepth" in levels.columns:
                    match = match[match["iodepth"] == level["iodepth"]]
                value = float(match[column].iloc[0]) if len(match) else math.nan
                values.append(value / 1000.0 if column == "p99" else value)
            numbers[(head, system)] = values
            shown[(head, system)] = [number_or_dash(v, 3) if column == "jain" else number_or_dash(v) for v in values]
    return Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                 caption=_t("scaling.caption", lang, curve=name, metric=metric_name))


def _scaling_figure(raw: pd.DataFrame, charted: list, name: str, metric: str, metric_name: str, lang: str) -> Figure:
    """One curve's chart: :func:`iolab.report.curveplots.scaling_plot` per charted queue depth."""
    from iolab.report import curveplots
    fig, axes = optional.pyplot().subplots(1, len(charted), figsize=(6.2 * len(charted), 4.2), squeeze=False)
    labels = plot_labels("scaling", lang)
    labels["x"] = _t("scaling.x_jobs", lang)
    labels["y"] = metric_name
    for ax, depth in zip(axes[0], charted):
        part = raw if not np.isfinite(depth) else raw[as_numbers(raw["iodepth"]) == depth]
        curveplots.scaling_plot(part, x="numjobs", y=metric, hue="system", ax=ax, labels=labels)
        ax.set_title(f"{name}, QD{int(depth)}" if np.isfinite(depth) else name)
        merge_legends(ax, curveplots.twin_of(ax), below=True)
    fig.tight_layout()
    return Figure(fig, alt=_t("scaling.alt", lang, curve=name, metric=metric_name))


def _scaling_sentences(sub: pd.DataFrame, charted: list, metric_name: str, lang: str) -> list[str]:
    """Per charted queue depth and system: how the total grew with the jobs, and how evenly they shared."""
    sentences = []
    for depth in charted:
        for system in unique_in_order(sub["system"]):
            curve = sub[sub["system"] == system]
            if np.isfinite(depth):
                curve = curve[curve["iodepth"] == depth]
            curve = curve.sort_values("numjobs")
            if len(curve) < 2:
                continue
            first, last = curve.iloc[0], curve.iloc[-1]
            parts = [_t("scaling.grows", lang, system=system, depth=f"QD{int(depth)}" if np.isfinite(depth) else "",
                        j0=int(first["numjobs"]), j1=int(last["numjobs"]), metric=metric_name,
                        a=about(first["total"]), b=about(last["total"]), speedup=i18n.factor(last["speedup"]),
                        eff=f"{last['efficiency'] * 100:.0f}", p0=us_as_ms(first["p99"]), p1=us_as_ms(last["p99"]))]
            if _has_jain(sub) and np.isfinite(last.get("jain", math.nan)):
                key = "scaling.jain_even" if last["jain"] >= 0.95 else "scaling.jain_uneven"
                parts.append(_t(key, lang, jobs=int(last["numjobs"]), jain=f"{last['jain']:.3f}"))
            sentences.append(i18n.join_sentences(parts, lang))
    return sentences
