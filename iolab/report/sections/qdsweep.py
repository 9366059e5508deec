"""The queue-depth sweep: IOPS and p50/p99 latency against outstanding I/O per system, the knee marked and stated."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n
from iolab.analysis import curves
from iolab.report.tables import Table
from iolab.report.sections.common import (
    Figure, Section, plot_labels, usable_rows, with_system, unique_in_order, about, signed_percent,
    number_or_dash, winner_lines, curve_name, merge_legends, groups_by, rows_matching)

_t = i18n.scoped("sections")


def _curve_keys(data: pd.DataFrame) -> list[str]:
    return [c for c in ("sweep", "direction", "bs") if c in data.columns]


def _sweep_rows(data: pd.DataFrame) -> pd.DataFrame:
    """The rows of a sweep (a ``sweep`` name), with a ``system`` column."""
    data = with_system(data)
    return data[data["sweep"].notna()] if "sweep" in data.columns else data


def sweep_curves(data: pd.DataFrame) -> Iterator[tuple[dict, pd.DataFrame]]:
    """Each system's sweep curves: (the curve's key: sweep, direction, block size, system; its rows).

    The one grouping :func:`qd_points` and :func:`qd_knees` (and so the
    table, the chart and the knee sentences) share.
    """
    data = _sweep_rows(data)
    yield from groups_by(data, _curve_keys(data) + ["system"])


def qd_points(data: pd.DataFrame) -> pd.DataFrame:
    """One row per system x curve (sweep, direction, block size) x outstanding I/O.

    Columns: ``system``, the curve keys, ``oio`` (iodepth x numjobs), ``n``,
    ``iops``, ``p50_us``, ``p99_us`` (medians of the repetitions and of the
    configurations with the same OIO, as :func:`iolab.analysis.curves.sweep_table`),
    ``iodepth``/``numjobs`` (NaN where several share the OIO), ``knee`` (the
    point :func:`iolab.analysis.curves.find_knee` chose).
    """
    keys = _curve_keys(_sweep_rows(data))
    out = []
    for key, sub in sweep_curves(data):
        table = curves.sweep_table(sub)
        if table.empty:
            continue
        p50 = curves.sweep_table(sub, p99="lat_p50_us")["p99"] if "lat_p50_us" in sub.columns else math.nan
        knee = curves.find_knee(sub) if len(table) >= 2 else None
        frame = pd.DataFrame({**key, "oio": table["x"], "n": table["n"], "iops": table["iops"], "p50_us": p50,
                              "p99_us": table["p99"],
                              "iodepth": table.get("iodepth", math.nan), "numjobs": table.get("numjobs", math.nan)})
        frame["knee"] = (frame["oio"] == knee.x) if knee else False
        out.append(frame)
    columns = ["system"] + keys + ["oio", "n", "iops", "p50_us", "p99_us", "iodepth", "numjobs", "knee"]
    if not out:
        return pd.DataFrame(columns=columns)
    return pd.concat(out, ignore_index=True)[columns]


def qd_knees(data: pd.DataFrame, *, iops_gain: float = 0.05, p99_growth: float = 0.20) -> pd.DataFrame:
    """Per system and curve: the knee of the sweep (:func:`iolab.analysis.curves.find_knee`) and what lies beyond it.

    Columns: ``system``, the curve keys, ``found``, ``oio``/``iops``/``p99_us``
    at the knee, ``next_oio``, ``iops_gain`` and ``p99_growth`` of the step
    after it (fractions), ``last_oio``/``last_iops`` (the sweep's end),
    ``peak_oio``/``peak_iops`` (its highest IOPS), ``reason``.
    """
    keys = _curve_keys(_sweep_rows(data))
    rows = []
    for key, sub in sweep_curves(data):
        knee = curves.find_knee(sub, iops_gain=iops_gain, p99_growth=p99_growth)
        table = knee.table
        if table.empty:
            continue
        peak = table.loc[table["iops"].idxmax()]
        row = {**key, "found": knee.found, "oio": math.nan, "iops": math.nan, "p99_us": math.nan,
               "next_oio": math.nan, "iops_gain": math.nan, "p99_growth": math.nan,
               "last_oio": float(table["x"].iloc[-1]), "last_iops": float(table["iops"].iloc[-1]),
               "peak_oio": float(peak["x"]), "peak_iops": float(peak["iops"]), "reason": knee.reason}
        if knee.found:
            position = int(np.flatnonzero(table["x"].to_numpy() == knee.x)[0])
            nxt = table.iloc[position + 1]
            row.update(oio=knee.x, iops=float(knee.row["iops"]), p99_us=float(knee.row["p99"]),
                       next_oio=float(nxt["x"]), iops_gain=float(nxt["iops_gain"]), p99_growth=float(nxt["p99_growth"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=["system"] + keys + [
        "found", "oio", "iops", "p99_us", "next_oio", "iops_gain", "p99_growth", "last_oio", "last_iops",
        "peak_oio", "peak_iops", "reason"])


def qd_sweep_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """IOPS and p50/p99 latency against outstanding I/O per system, the knee marked and stated.

    Per curve (sweep, direction, block size): a table (rows = outstanding I/O,
    columns = IOPS, p50 and p99 per system), :func:`iolab.report.curveplots.qd_plot`
    with the knee starred and the p50 curves dotted, and a sentence per system:
    "IOPS saturate at about N at OIO k; beyond it p99 latency grows x%".
    """
    i18n.check_lang(lang)
    data = usable_rows(_sweep_rows(data))
    if data.empty:
        return None
    points = qd_points(data)
    knees = qd_knees(data)
    section = Section("qd-sweep", _t("qd.heading", lang), lang, intro=_t("qd.intro", lang))
    for key, sub in groups_by(data, _curve_keys(data)):
        name = curve_name(key, lang)
        pts = rows_matching(points, key)
        section.tables.append(_qd_table(pts, name, lang))
        section.figures.append(_qd_figure(sub, pts, name, lang))
        section.sentences += _qd_sentences(rows_matching(knees, key), unique_in_order(pts["system"]), name, lang)
    return section


def _qd_table(pts: pd.DataFrame, name: str, lang: str) -> Table:
    """One curve's table: rows = outstanding I/O, columns = IOPS, p50 and p99 (ms) per system."""
    systems = unique_in_order(pts["system"])
    oios = sorted(pts["oio"].unique())
    blocks = {"iops": _t("qd.col_iops", lang), "p50_us": _t("qd.col_p50", lang), "p99_us": _t("qd.col_p99", lang)}
    shown, numbers = {}, {}
    for column, head in blocks.items():
        for system in systems:
            series = pts[pts["system"] == system].set_index("oio")[column].reindex(oios)
            values = series / 1000.0 if column != "iops" else series
            numbers[(head, system)] = values.to_numpy()
            shown[(head, system)] = [number_or_dash(v) for v in values]
    index = pd.Index([int(x) if float(x).is_integer() else x for x in oios], name=_t("qd.index", lang))
    return Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                 caption=_t("qd.caption", lang, curve=name), notes=[_t("qd.note", lang)])


def _qd_figure(sub: pd.DataFrame, pts: pd.DataFrame, name: str, lang: str) -> Figure:
    """One curve's chart: :func:`iolab.report.curveplots.qd_plot`, the p50 curves dotted on the latency axis."""
    from iolab.report import curveplots
    fig, ax = optional.pyplot().subplots(figsize=(9.0, 4.6))
    curveplots.qd_plot(sub, hue="system", ax=ax, labels=plot_labels("qd", lang))
    twin = curveplots.twin_of(ax)
    colors = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for system in unique_in_order(pts["system"]):
        part = pts[pts["system"] == system]
        if twin is not None and part["p50_us"].notna().any():
            twin.plot(part["oio"], part["p50_us"], linestyle=":", marker=".", color=colors.get(system),
                      label=f"{system} p50", gid="p50")
    merge_legends(ax, twin)
    ax.set_title(name)
    return Figure(fig, alt=_t("qd.alt", lang, curve=name))


def _qd_sentences(knees: pd.DataFrame, systems: list, name: str, lang: str) -> list[str]:
    """One curve's findings: each system's knee (or that it has none), and the highest IOPS."""
    sentences = []
    for system in systems:
        found = knees[knees["system"] == system]
        if found.empty:
            continue
        k = found.iloc[0]
        if k["found"]:
            sentences.append(_t(
                "qd.knee", lang, system=system, iops=about(k["iops"]), oio=f"{k['oio']:g}",
                growth=i18n.percent(k["p99_growth"]), next=f"{k['next_oio']:g}", gain=signed_percent(k["iops_gain"])))
        else:
            sentences.append(_t("qd.no_knee", lang, system=system, oio=f"{k['last_oio']:g}",
                                iops=about(k["last_iops"])))
    if len(systems) >= 2:
        summary = pd.DataFrame({"system": knees["system"], "test": _t("qd.peak_test", lang, curve=name),
                                "direction": "", "metric": "iops", "unit": "IOPS",
                                "value": knees["peak_iops"], "n": 1})
        sentences += winner_lines(summary, lang)
    return sentences
