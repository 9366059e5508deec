"""GNOME Disks' benchmark: the read (and write) rate along the device, the access-time scatter and its summary."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n
from iolab.analysis import curves
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import (
    Figure, Section, plot_labels, numeric, usable_rows, with_system, system_names, about,
    number_or_dash, winner_lines)

_t = i18n.scoped("sections")

GNOME_TESTS = ("read-rate", "write-rate", "access-time")



def gnome_summary(data: pd.DataFrame) -> pd.DataFrame:
    """GNOME Disks' summary per system: the rate curve (read and write) and the access time.

    One row per system with ``read_n, read_avg, read_min, read_max,
    read_first, read_last`` (first/last tenth of the positions), ``read_decline``
    (first / last), ``read_flat``, ``read_max_dev`` (largest deviation of a
    tenth from the average, a fraction), ``read_overall`` (all bytes / all
    seconds), the same with ``write_`` when the rewrite ran, ``sample_bytes``,
    and ``access_n, access_ms`` (mean, GNOME Disks' "Average Access Time",
    first sample dropped), ``access_median_ms, access_p95_ms, access_corr``
    (Spearman correlation of seek distance and time). MB/s and ms.
    """
    data = with_system(data)
    out = {s: {"system": s} for s in system_names(data)}
    rates = data[data["test"].isin(["read-rate", "write-rate"])] if "test" in data.columns else data.iloc[0:0]
    if len(rates) and "position" in rates.columns:
        profile = curves.position_profile(rates, by=["system", "test"])
        usable = usable_rows(rates)
        totals = usable.groupby(["system", "test"])[["io_bytes", "runtime_s"]].sum()
        for _, row in profile.iterrows():
            prefix = "read" if row["test"] == "read-rate" else "write"
            record = out[row["system"]]
            record.update({f"{prefix}_n": int(row["n"]), f"{prefix}_avg": row["avg"], f"{prefix}_min": row["min"],
                           f"{prefix}_max": row["max"], f"{prefix}_first": row["first_decile"],
                           f"{prefix}_last": row["last_decile"], f"{prefix}_decline": row["decline"],
                           f"{prefix}_flat": bool(row["is_flat"]), f"{prefix}_max_dev": row["max_dev"]})
            key = (row["system"], row["test"])
            if key in totals.index and totals.loc[key, "runtime_s"] > 0:
                record[f"{prefix}_overall"] = totals.loc[key, "io_bytes"] / totals.loc[key, "runtime_s"] / 1e6
            mine = usable[(usable["system"] == row["system"]) & (usable["test"] == row["test"])]
            sizes = numeric(mine, "bs").dropna()
            if len(sizes):
                record["sample_bytes"] = float(sizes.iloc[0])
    access = data[data["test"] == "access-time"] if "test" in data.columns else data.iloc[0:0]
    if len(access) and "access_ms" in access.columns:
        times = curves.access_time_summary(access, by=["system"])
        for _, row in times.iterrows():
            out[row["system"]].update(access_n=int(row["n"]), access_ms=row["mean_ms"],
                                      access_median_ms=row["median_ms"], access_p95_ms=row["p95_ms"],
                                      access_corr=row["corr_rank"])
    return pd.DataFrame(list(out.values()))


_GNOME_ROWS = (  # (summary column, locale key, digits or None)
    ("sample_bytes", "gnome.row_sample", "size"),
    ("read_avg", "gnome.row_read_avg", None), ("read_min", "gnome.row_read_min", None),
    ("read_max", "gnome.row_read_max", None), ("read_first", "gnome.row_read_first", None),
    ("read_last", "gnome.row_read_last", None),
    ("write_avg", "gnome.row_write_avg", None), ("write_min", "gnome.row_write_min", None),
    ("write_max", "gnome.row_write_max", None),
    ("access_ms", "gnome.row_access", None), ("access_median_ms", "gnome.row_access_median", None),
    ("read_n", "gnome.row_read_n", 0), ("write_n", "gnome.row_write_n", 0), ("access_n", "gnome.row_access_n", 0),
)


def gnome_disks_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """MB/s along the device with the access-time scatter (:func:`iolab.report.curveplots.position_plot`), the summary.

    Table: GNOME Disks' summary rows (average / minimum / maximum read rate,
    the outer and inner tenth, average access time, sample counts), columns =
    systems. Findings per system: "falls from X to Y MB/s from the outer to the
    inner edge (x-fold)" or "flat within ±n%", the access time and whether it
    grows with the seek distance; and the fastest average read rate.
    """
    from iolab.report import curveplots
    from iolab.core.units import human_size
    i18n.check_lang(lang)
    data = with_system(data)
    if data.empty:
        return None
    summary = gnome_summary(data)
    systems = list(summary["system"])
    section = Section("gnome-disks", _t("gnome.heading", lang), lang, intro=_t("gnome.intro", lang))
    shown, numbers, labels = [], [], []
    for column, key, digits in _GNOME_ROWS:
        if column not in summary.columns or summary[column].isna().all():
            continue
        values = summary[column].to_numpy(dtype=float)
        numbers.append(values)
        labels.append(_t(key, lang))
        if digits == "size":
            shown.append([human_size(v) if np.isfinite(v) else DASH for v in values])
        else:
            shown.append([number_or_dash(v, digits) for v in values])
    index = pd.Index(labels, name=_t("gnome.index", lang))
    section.tables.append(Table(pd.DataFrame(shown, index=index, columns=systems),
                                data=pd.DataFrame(numbers, index=index, columns=systems),
                                caption=_t("gnome.caption", lang)))
    ncols = min(len(systems), 2)
    nrows = math.ceil(len(systems) / ncols)
    fig, axes = optional.pyplot().subplots(nrows, ncols, figsize=(6.4 * ncols, 4.2 * nrows), squeeze=False)
    for ax, system in zip(axes.flat, systems):
        rows = data[data["system"] == system]
        rates = usable_rows(rows[rows["test"].isin(["read-rate", "write-rate"])])
        access = usable_rows(rows[rows["test"] == "access-time"])
        if rates.empty:
            ax.set_visible(False)
            continue
        hue = "direction" if rates["test"].nunique() > 1 else None
        if hue:
            rates = rates.assign(direction=[i18n.label(d, lang, section="directions") for d in rates["direction"]])
        curveplots.position_plot(rates, hue=hue, access=access if len(access) else None, ax=ax,
                                 labels=plot_labels("position", lang))
        ax.set_title(system)
    for ax in list(axes.flat)[len(systems):]:
        ax.set_visible(False)
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("gnome.alt", lang, systems=i18n.join(systems, lang))))
    for _, row in summary.iterrows():
        parts = []
        if np.isfinite(row.get("read_avg", math.nan)):
            if row.get("read_flat"):
                parts.append(_t("gnome.flat", lang, system=row["system"], pct=i18n.percent(row["read_max_dev"]),
                                avg=about(row["read_avg"])))
            elif row["read_decline"] >= 1:
                parts.append(_t("gnome.falls", lang, system=row["system"], first=about(row["read_first"]),
                                last=about(row["read_last"]), fold=i18n.factor(row["read_decline"]),
                                avg=about(row["read_avg"])))
            else:
                parts.append(_t("gnome.rises", lang, system=row["system"], first=about(row["read_first"]),
                                last=about(row["read_last"]), fold=i18n.factor(1 / row["read_decline"]),
                                avg=about(row["read_avg"])))
        if np.isfinite(row.get("access_ms", math.nan)):
            corr = row.get("access_corr", math.nan)
            key = "gnome.access_seek" if np.isfinite(corr) and corr >= 0.3 else "gnome.access_flat"
            r = f"{corr:.2f}" if np.isfinite(corr) else DASH
            parts.append(_t(key, lang, system=row["system"], ms=number_or_dash(row["access_ms"]),
                            median=number_or_dash(row["access_median_ms"]), r=r))
        if parts:
            section.sentences.append(i18n.join_sentences(parts, lang))
    if len(systems) >= 2 and "read_avg" in summary.columns:
        section.sentences += winner_lines(pd.DataFrame({
            "system": summary["system"], "test": _t("gnome.test_avg", lang), "direction": "", "metric": "rate",
            "unit": "MB/s", "value": summary["read_avg"], "n": 1}), lang)
    return section
