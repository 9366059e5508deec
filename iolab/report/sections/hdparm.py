"""hdparm's cached (-T) and buffered disk (-t) reads: mean ± SD over the alternating passes, hdparm itself beside."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import (
    Figure, Section, numeric, usable_rows, with_system, unique_in_order, about, signed_percent,
    number_or_dash, winner_lines, MiB)

_t = i18n.scoped("sections")

HDPARM_TESTS = ("cached-reads", "disk-reads")



def hdparm_results(data: pd.DataFrame) -> pd.DataFrame:
    """hdparm's two timings per system (target), tool and test, over the alternating passes.

    Columns: ``system, test, tool`` (``iolab`` for iolab's Python/fio
    equivalent, ``hdparm`` for hdparm itself), ``direct``, ``n``, ``mbps`` and
    ``mbps_sd`` (decimal MB/s: mean and standard deviation), ``mibps`` and
    ``mibps_sd`` (hdparm's "MB/sec", which is MiB/s), ``cov``.
    """
    data = usable_rows(with_system(data))
    data = data[data["test"].isin(HDPARM_TESTS)]
    tools = data["tool"].map(lambda t: "hdparm" if str(t) == "hdparm" else "iolab") if "tool" in data.columns \
        else pd.Series("iolab", index=data.index)
    rows = []
    for (system, test, tool), sub in data.groupby([data["system"], data["test"], tools], sort=False):
        mbps = numeric(sub, "bw_mbps")
        mibps = numeric(sub, "hdparm_mb_sec")
        mibps = mibps.where(mibps.notna(), mbps * 1e6 / MiB)
        direct = numeric(sub, "direct")
        rows.append({"system": system, "test": test, "tool": tool,
                     "direct": bool(direct.fillna(0).max() > 0), "n": int(mbps.notna().sum()),
                     "mbps": float(mbps.mean()), "mbps_sd": float(mbps.std()) if mbps.notna().sum() > 1 else math.nan,
                     "mibps": float(mibps.mean()),
                     "mibps_sd": float(mibps.std()) if mibps.notna().sum() > 1 else math.nan})
    frame = pd.DataFrame(rows, columns=["system", "test", "tool", "direct", "n", "mbps", "mbps_sd", "mibps",
                                        "mibps_sd"])
    frame["cov"] = frame["mbps_sd"] / frame["mbps"]
    order = {t: i for i, t in enumerate(HDPARM_TESTS)}
    systems = {s: i for i, s in enumerate(unique_in_order(data["system"]))}
    return frame.sort_values(["test", "tool", "system"], key=lambda s: s.map(order) if s.name == "test" else
                             s.map({"iolab": 0, "hdparm": 1}) if s.name == "tool" else s.map(systems),
                             kind="stable").reset_index(drop=True)


def hdparm_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Cached (-T) and buffered disk (-t) reads per target: mean ± SD over the alternating passes.

    Table: rows = timing x tool (iolab's equivalent, hdparm itself when its
    rows exist), columns = per system the decimal MB/s (mean ± SD) beside
    hdparm's "MB/sec" (MiB/s). Bar charts with SD error bars; findings: each
    target's disk reads, the fastest, the cached reads as memory speed, and
    hdparm against the equivalent.
    """
    i18n.check_lang(lang)
    results = hdparm_results(data)
    if results.empty:
        return None
    section = Section("hdparm", _t("hdparm.heading", lang), lang, intro=_t("hdparm.intro", lang))
    section.tables.append(_hdparm_table(results, lang))
    section.figures.append(_hdparm_figure(results, lang))
    ours = results[results["tool"] == "iolab"]
    section.sentences += _disk_sentences(results, ours, lang) + _versus_sentences(results, ours, lang)
    if "cached-reads" in set(ours["test"]):
        section.notes.append(_t("hdparm.cached_note", lang))
    return section


def _timing(test: str, direct: bool, lang: str) -> str:
    return _t(f"hdparm.test_{test.replace('-', '_')}{'_direct' if direct else ''}", lang)


def _tool_name(tool: str, lang: str) -> str:
    return _t("hdparm.tool_iolab", lang) if tool == "iolab" else "hdparm"


def _hdparm_table(results: pd.DataFrame, lang: str) -> Table:
    """Rows = timing x tool, columns = per system the decimal MB/s (mean ± SD) beside hdparm's MiB/s."""
    systems = unique_in_order(results["system"])
    keys = list(dict.fromkeys(zip(results["test"], results["tool"], results["direct"])))
    index = pd.MultiIndex.from_tuples([(_timing(t, d, lang), _tool_name(tool, lang)) for t, tool, d in keys],
                                      names=[_t("hdparm.timing", lang), _t("hdparm.tool", lang)])
    mb_head, mib_head = _t("hdparm.col_mbps", lang), _t("hdparm.col_mibps", lang)
    columns = pd.MultiIndex.from_tuples([(s, h) for s in systems for h in (mb_head, mib_head)])
    shown, numbers = [], []
    for test, tool, direct in keys:
        row_s, row_n = [], []
        for system in systems:
            match = results[(results["system"] == system) & (results["test"] == test) & (results["tool"] == tool)]
            if match.empty:
                row_s += [DASH, DASH]
                row_n += [math.nan, math.nan]
                continue
            r = match.iloc[0]
            sd = (f" ± {i18n.number(r['mbps_sd'], digits=i18n.default_digits(r['mbps']))}"
                  if np.isfinite(r["mbps_sd"]) else "")
            row_s += [number_or_dash(r["mbps"]) + sd, number_or_dash(r["mibps"], 2)]
            row_n += [r["mbps"], r["mibps"]]
        shown.append(row_s)
        numbers.append(row_n)
    n = int(results["n"].max())
    return Table(pd.DataFrame(shown, index=index, columns=columns),
                 data=pd.DataFrame(numbers, index=index, columns=columns),
                 caption=_t("hdparm.caption", lang, n=n), notes=[_t("hdparm.note", lang)])


def _hdparm_figure(results: pd.DataFrame, lang: str) -> Figure:
    """A bar chart per timing, systems side by side, SD error bars, hdparm itself hatched."""
    from iolab.report import plot
    tests = unique_in_order(results["test"])
    fig, axes = optional.pyplot().subplots(1, len(tests), figsize=(5.2 * len(tests), 3.8), squeeze=False)
    for ax, test in zip(axes[0], tests):
        part = results[results["test"] == test].assign(
            hue=lambda f: [_tool_name(t, lang) for t in f["tool"]],
            low=lambda f: f["mbps"] - f["mbps_sd"].fillna(0), high=lambda f: f["mbps"] + f["mbps_sd"].fillna(0))
        plot.bars(part, x="system", y="mbps", hue="hue", low="low", high="high", ax=ax, log=False, xlabel="",
                  ylabel=_t("hdparm.col_mbps", lang), title=_timing(test, bool(part["direct"].any()), lang),
                  legend_title=_t("hdparm.tool", lang), hatched=["hdparm"])
    plot.tight(fig)
    return Figure(fig, alt=_t("hdparm.alt", lang))


def _disk_sentences(results: pd.DataFrame, ours: pd.DataFrame, lang: str) -> list[str]:
    """Each target's disk and cached reads (iolab's equivalent), and the fastest disk reads."""
    sentences = []
    for system in unique_in_order(results["system"]):
        mine = ours[ours["system"] == system].set_index("test")
        parts = []
        if "disk-reads" in mine.index:
            r = mine.loc["disk-reads"]
            parts.append(_t("hdparm.disk", lang, system=system, mbps=about(r["mbps"]), mibps=about(r["mibps"]),
                            sd=i18n.percent(r["cov"]) if np.isfinite(r["cov"]) else DASH, n=int(r["n"])))
        if "cached-reads" in mine.index:
            r = mine.loc["cached-reads"]
            parts.append(_t("hdparm.cached", lang, mbps=about(r["mbps"]), mibps=about(r["mibps"])))
        if parts:
            sentences.append(i18n.join_sentences(parts, lang))
    disk = ours[ours["test"] == "disk-reads"]
    if len(disk) >= 2:
        sentences += winner_lines(pd.DataFrame({
            "system": disk["system"], "test": _timing("disk-reads", bool(disk["direct"].any()), lang),
            "direction": "", "metric": "bw_mbps", "unit": "MB/s", "value": disk["mbps"], "n": disk["n"],
            "ci_low": disk["mbps"] - disk["mbps_sd"], "ci_high": disk["mbps"] + disk["mbps_sd"]}).assign(n=1), lang)
    return sentences


def _versus_sentences(results: pd.DataFrame, ours: pd.DataFrame, lang: str) -> list[str]:
    """Per system that ran hdparm itself: its MB/sec against iolab's equivalent, timing by timing."""
    sentences = []
    originals = results[results["tool"] == "hdparm"]
    for system in unique_in_order(originals["system"]):
        items = []
        for _, o in originals[originals["system"] == system].iterrows():
            e = ours[(ours["system"] == system) & (ours["test"] == o["test"])]
            if e.empty or not (o["mibps"] > 0):
                continue
            e = e.iloc[0]
            items.append(_t("hdparm.versus_item", lang, test=_timing(o["test"], bool(o["direct"]), lang),
                            orig=about(o["mibps"]), ours=about(e["mibps"]),
                            diff=signed_percent(e["mibps"] / o["mibps"] - 1)))
        if items:
            sentences.append(_t("hdparm.versus", lang, system=system,
                                items="; ".join(items) if lang == "en" else "、".join(items)))
    return sentences
