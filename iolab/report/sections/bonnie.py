"""Bonnie++'s own tables (K/sec and %CP per test, "+++++", the latency line) with bonnie++ itself beside iolab's
equivalent."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.report import i18n, reasons
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import (
    Figure, Section, numeric, usable_rows, with_system, unique_in_order, about, signed_percent,
    number_or_dash, winner_lines, MiB, GiB)

_t = i18n.scoped("sections")

BONNIE_TESTS = ("putc", "put_block", "rewrite", "getc", "get_block", "seeks")
#: bonnie++'s columns: test -> (group, column)
BONNIE_LAYOUT = {"putc": ("seq_output", "per_chr"), "put_block": ("seq_output", "block"),
                 "rewrite": ("seq_output", "rewrite"), "getc": ("seq_input", "per_chr"),
                 "get_block": ("seq_input", "block"), "seeks": ("random", "seeks")}
#: bonnie++'s MinTime: a test that took less prints "+++++".
BONNIE_MIN_TIME = 0.5
PLUS = "+++++"



def _bonnie_tool(tool: str) -> str:
    return "bonnie++" if str(tool) == "bonnie++" else "iolab"


def bonnie_results(data: pd.DataFrame) -> pd.DataFrame:
    """Bonnie++'s figures per system, tool (``iolab`` = the fio/Python equivalent, ``bonnie++``) and test.

    Columns: ``system, tool, test, n``, ``rate`` (K/sec = KiB/s, or seeks/s
    for ``seeks``: the mean of the repetitions bonnie++ could time), ``cpu``
    (%CP), ``plus`` (True when every repetition took under 0.5 s: bonnie++
    prints "+++++"), ``mbps`` (decimal MB/s measured, also where bonnie++
    could not time it), ``lat_us`` (bonnie++'s latency: the worst single
    operation, the maximum over repetitions), ``file_size`` (bytes),
    ``version``.
    """
    data = usable_rows(with_system(data))
    data = data[data["test"].isin(BONNIE_TESTS)]
    rows = []
    tools = data["tool"].map(_bonnie_tool) if "tool" in data.columns else pd.Series("iolab", index=data.index)
    for (system, tool, test), sub in data.groupby([data["system"], tools, data["test"]], sort=False):
        runtime = numeric(sub, "runtime_s")
        if "plus" in sub.columns:
            plus = sub["plus"].astype(str).str.startswith("+") & sub["plus"].notna()
        else:
            plus = runtime < BONNIE_MIN_TIME
        if test == "seeks":
            rate = numeric(sub, "iops")
        else:
            rate = numeric(sub, "kps")
            derived = numeric(sub, "io_bytes") / 1024 / runtime
            rate = rate.where(rate.notna() | plus, derived)
        cpu = numeric(sub, "cpu_pct")
        cpu = cpu.where(cpu.notna(), numeric(sub, "cpu_usr_pct") + numeric(sub, "cpu_sys_pct"))
        timed = ~plus
        sizes = numeric(sub, "file_size").dropna()
        version = (sub["bonnie_version"].dropna().astype(str) if "bonnie_version" in sub.columns
                   else pd.Series([], dtype=str))
        rows.append({"system": system, "tool": tool, "test": test, "n": len(sub),
                     "rate": float(rate[timed].mean()) if timed.any() else math.nan,
                     "cpu": float(cpu[timed].mean()) if timed.any() else math.nan,
                     "plus": bool(plus.all()),
                     "mbps": float(numeric(sub, "bw_mbps").mean()),
                     "lat_us": float(numeric(sub, "lat_max_us").max()),
                     "file_size": float(sizes.iloc[0]) if len(sizes) else math.nan,
                     "version": version.iloc[0] if len(version) else None})
    frame = pd.DataFrame(rows, columns=["system", "tool", "test", "n", "rate", "cpu", "plus", "mbps", "lat_us",
                                        "file_size", "version"])
    order = {t: i for i, t in enumerate(BONNIE_TESTS)}
    systems = {s: i for i, s in enumerate(unique_in_order(data["system"]))}
    return frame.sort_values(["system", "tool", "test"], key=lambda s: s.map(systems) if s.name == "system" else
                             s.map({"iolab": 0, "bonnie++": 1}) if s.name == "tool" else s.map(order),
                             kind="stable").reset_index(drop=True)


def bonnie_latency(us: float) -> str:
    """A latency as bonnie++ prints it: ``28622us``, ``101ms``, ``12s``."""
    if us is None or not np.isfinite(us):
        return ""
    if us < 100000:
        return f"{int(round(us))}us"
    if us < 1e8:
        return f"{int(us // 1000)}ms"
    return f"{int(us // 1e6)}s"


def _bonnie_size(size: float) -> str:
    if not np.isfinite(size):
        return DASH
    size = int(size)
    return f"{size // GiB}G" if size % GiB == 0 else f"{size // MiB}M"


def bonnie_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Bonnie++'s own tables: K/sec and %CP per test, "+++++", the latency line; the original beside.

    Rows = system x tool (iolab's fio/Python equivalent, and bonnie++ itself
    where ``tool`` = bonnie++ rows exist), columns as bonnie++ prints them:
    Sequential Output (Per Chr, Block, Rewrite), Sequential Input (Per Chr,
    Block), Random Seeks, each K/sec (seeks: /sec) and %CP. A bar chart of the
    K/sec figures; findings: the winner per test, tests bonnie++ could not
    time, per-char tests that are CPU-bound (:func:`iolab.report.reasons.cpu_bound`), and the equivalent against
    the original.
    """
    i18n.check_lang(lang)
    results = bonnie_results(data)
    if results.empty:
        return None
    section = Section("bonnie", _t("bonnie.heading", lang), lang, intro=_t("bonnie.intro", lang))
    present = [t for t in BONNIE_TESTS if t in set(results["test"])]
    section.tables += _bonnie_tables(results, present, lang)
    figure = _bonnie_figure(results, lang)
    if figure is not None:
        section.figures.append(figure)
    section.sentences += _winners_and_untimed(results, lang) + _versus_sentences(results, present, lang)
    return section


def _tool_name(tool: str, version, lang: str) -> str:
    return _t("bonnie.tool_iolab", lang) if tool == "iolab" else f"bonnie++ {version}" if version else "bonnie++"


def _bonnie_columns(present: list[str], lang: str) -> tuple[list, list]:
    """bonnie++'s column heads: (group, column, unit) for the rates and %CP, (group, column) for the latencies."""
    columns, lat_columns = [("", "", _t("bonnie.size", lang))], []
    for test in present:
        group, col = BONNIE_LAYOUT[test]
        unit = "/sec" if test == "seeks" else "K/sec"
        columns += [(_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang), unit),
                    (_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang), "%CP")]
        lat_columns.append((_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang)))
    return columns, lat_columns


def _bonnie_row(part: pd.DataFrame, present: list[str]) -> tuple[list, list, list, list]:
    """One system x tool as bonnie++ prints it: (rates shown, their numbers, latencies shown, their numbers)."""
    sizes = part["file_size"].dropna()
    size = float(sizes.iloc[0]) if len(sizes) else math.nan
    row_s, row_n = [_bonnie_size(size)], [size]
    lat_s, lat_n = [], []
    for test in present:
        if test not in part.index:
            row_s += [DASH, DASH]
            row_n += [math.nan, math.nan]
            lat_s.append(DASH)
            lat_n.append(math.nan)
            continue
        r = part.loc[test]
        if r["plus"]:
            row_s += [PLUS, "+++"]
            row_n += [math.nan, math.nan]
        else:
            row_s += [_bonnie_rate(test, r["rate"]), f"{int(round(r['cpu']))}" if np.isfinite(r["cpu"]) else DASH]
            row_n += [r["rate"], r["cpu"]]
        lat_s.append(bonnie_latency(r["lat_us"]) or DASH)
        lat_n.append(r["lat_us"])
    return row_s, row_n, lat_s, lat_n


def _bonnie_rate(test: str, rate: float) -> str:
    """A rate as bonnie++ prints it, in the table and on the chart's bar alike (seeks/s to 0.1, K/sec whole)."""
    return f"{rate:.1f}" if test == "seeks" else f"{int(rate)}"


def _bonnie_tables(results: pd.DataFrame, present: list[str], lang: str) -> list[Table]:
    """The rate and %CP table and the latency table, rows = system x tool."""
    keys = list(dict.fromkeys(zip(results["system"], results["tool"])))
    versions = results.dropna(subset=["version"]).groupby(["system", "tool"])["version"].first()
    index = pd.MultiIndex.from_tuples([(s, _tool_name(t, versions.get((s, t)), lang)) for s, t in keys],
                                      names=[_t("bonnie.name", lang), _t("bonnie.tool", lang)])
    rows = [_bonnie_row(results[(results["system"] == s) & (results["tool"] == t)].set_index("test"), present)
            for s, t in keys]
    shown, numbers, lat_shown, lat_numbers = ([row[i] for row in rows] for i in range(4))
    columns, lat_columns = _bonnie_columns(present, lang)
    mcols = pd.MultiIndex.from_tuples(columns)
    lcols = pd.MultiIndex.from_tuples(lat_columns)
    return [Table(pd.DataFrame(shown, index=index, columns=mcols),
                  data=pd.DataFrame(numbers, index=index, columns=mcols),
                  caption=_t("bonnie.caption", lang), notes=[_t("bonnie.note", lang)]),
            Table(pd.DataFrame(lat_shown, index=index, columns=lcols),
                  data=pd.DataFrame(lat_numbers, index=index, columns=lcols),
                  caption=_t("bonnie.latency_caption", lang))]


def _bonnie_figure(results: pd.DataFrame, lang: str) -> Figure | None:
    """K/sec per test as bars (seeks are per second, another unit: left out), "+++++" where a bar cannot be."""
    from iolab.report import plot
    bars = results[(results["test"] != "seeks")].copy()
    bars["x"] = [_t(f"bonnie.short_{t}", lang) for t in bars["test"]]
    bars["hue"] = [s if t == "iolab" else f"{s} · bonnie++" for s, t in zip(bars["system"], bars["tool"])]
    bars["value"] = bars["rate"]
    if not bars["value"].notna().any():
        return None
    fig, ax = optional.pyplot().subplots(figsize=(10.0, 4.2))
    originals = [h for h in bars["hue"] if h.endswith(" · bonnie++")]
    # each bar's label is the table's text for it (bonnie++'s K/sec, whole numbers)
    bars["shown"] = [_bonnie_rate(t, v) if np.isfinite(v) else "" for t, v in zip(bars["test"], bars["value"])]
    plot.bars(bars, x="x", y="value", hue="hue", ax=ax, xlabel="", ylabel=_t("bonnie.chart_y", lang),
              legend_title=i18n.text("labels.system", lang), hatched=originals, labels="shown")
    # a test bonnie++ could not time has no bar: say why where the bar would be
    where = plot.bar_positions(bars, x="x", y="value", hue="hue")
    low = ax.get_ylim()[0]
    for (_, spot), plus in zip(where.iterrows(), bars["plus"]):
        if plus:
            ax.text(spot["pos"], low, PLUS, rotation=90, ha="center", va="bottom", fontsize="small", gid="plus")
    plot.tight(fig)
    return Figure(fig, alt=_t("bonnie.alt", lang))


def _winners_and_untimed(results: pd.DataFrame, lang: str) -> list[str]:
    """The winner per timed test, the tests bonnie++ could not time ("+++++"), the CPU-bound per-char tests."""
    equivalent = results[results["tool"] == "iolab"]
    # a test some system finished too fast to time has no fair winner: it gets its own sentence
    untimed = set(equivalent[equivalent["plus"]]["test"])
    summary = equivalent[~equivalent["test"].isin(untimed)]
    summary = pd.DataFrame({"system": summary["system"],
                            "test": [_t(f"bonnie.short_{t}", lang) for t in summary["test"]],
                            "direction": "", "metric": "rate",
                            "unit": ["seeks/s" if t == "seeks" else "K/sec" for t in summary["test"]],
                            "value": summary["rate"], "n": summary["n"]})
    sentences = winner_lines(summary, lang)
    plus = results[results["plus"]]
    for (system, test), rows in plus.groupby(["system", "test"], sort=False):
        tools = i18n.join([_tool_name(t, v, lang) for t, v in zip(rows["tool"], rows["version"])], lang)
        measured = rows[rows["tool"] == "iolab"]["mbps"].dropna()
        name = _t(f"bonnie.short_{test}", lang)
        if len(measured):
            sentences.append(_t("bonnie.plus", lang, system=system, tool=tools, test=name,
                                mbps=about(float(measured.iloc[0]))))
        else:
            sentences.append(_t("bonnie.plus_only", lang, system=system, tool=tools, test=name))
        others = equivalent[(equivalent["test"] == test) & ~equivalent["plus"]]
        for _, other in others.iterrows():
            sentences[-1] += _t("bonnie.plus_other", lang, system=other["system"], rate=number_or_dash(other["rate"]),
                                unit=i18n.unit("seeks/s" if test == "seeks" else "K/sec", lang))
    # the per-char tests close while the block tests are far apart: CPU-bound (their %CP the evidence)
    timed = equivalent[~equivalent["plus"]]
    found = reasons.cpu_bound(pd.DataFrame({
        "system": timed["system"], "test": [_t(f"bonnie.short_{t}", lang) for t in timed["test"]],
        "value": timed["rate"], "unit": "K/sec", "cpu": timed["cpu"]}),
        per_char=[_t(f"bonnie.short_{t}", lang) for t in ("putc", "getc")],
        block=[_t(f"bonnie.short_{t}", lang) for t in ("put_block", "rewrite", "get_block")])
    return sentences + reasons.sentences(found, lang=lang)


def _versus_sentences(results: pd.DataFrame, present: list[str], lang: str) -> list[str]:
    """Per system that ran bonnie++ itself too: iolab's equivalent against the original, test by test."""
    sentences = []
    for system in unique_in_order(results["system"]):
        mine = results[(results["system"] == system)]
        eq = mine[mine["tool"] == "iolab"].set_index("test")
        orig = mine[mine["tool"] == "bonnie++"].set_index("test")
        if orig.empty or eq.empty:
            continue
        items = []
        for test in present:
            if test in eq.index and test in orig.index:
                a, b = eq.loc[test], orig.loc[test]
                name = _t(f"bonnie.short_{test}", lang)
                if a["plus"] and b["plus"]:
                    items.append(_t("bonnie.both_plus", lang, test=name))
                elif np.isfinite(a["rate"]) and np.isfinite(b["rate"]) and b["rate"] > 0:
                    items.append(f"{name} {signed_percent(a['rate'] / b['rate'] - 1)}")
        if items:
            sentences.append(_t("bonnie.versus", lang, system=system,
                                items=", ".join(items) if lang == "en" else "、".join(items)))
    return sentences
