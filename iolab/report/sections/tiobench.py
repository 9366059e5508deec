"""tiobench.pl's tables: Sequential and Random Writes and Reads, rate, CPU, latency, slow operations."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from iolab.report import figures, i18n, reasons
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import (
    Figure, Section, numeric, usable_rows, with_system, unique_in_order, small_percent, number_or_dash,
    winner_lines)

_t = i18n.scoped("sections")

TIOBENCH_TESTS = ("SeqWrite", "RandWrite", "SeqRead", "RandRead")



def tiobench_results(data: pd.DataFrame) -> pd.DataFrame:
    """tiobench.pl's figures per system and test.

    Columns: ``system, test, n, threads``, ``rate`` (MB/s, decimal; mean of the
    repetitions), ``cpu`` (usr + sys %), ``lat_avg_ms`` (mean), ``lat_max_ms``
    (maximum over the repetitions), ``over_2s`` and ``over_10s`` (% of
    operations slower than 2 s and 10 s, means), ``cpu_eff`` (rate / CPU
    share, tiobench's "CPU Eff").
    """
    data = usable_rows(with_system(data))
    rows = []
    for (system, test), sub in data.groupby(["system", "test"], sort=False):
        rate = float(numeric(sub, "bw_mbps").mean())
        cpu = float((numeric(sub, "cpu_usr_pct") + numeric(sub, "cpu_sys_pct")).mean())
        rows.append({"system": system, "test": test, "n": len(sub),
                     "threads": (int(numeric(sub, "numjobs").max()) if numeric(sub, "numjobs").notna().any()
                                 else math.nan),
                     "rate": rate, "cpu": cpu, "lat_avg_ms": float(numeric(sub, "lat_mean_us").mean()) / 1000,
                     "lat_max_ms": float(numeric(sub, "lat_max_us").max()) / 1000,
                     "over_2s": float(numeric(sub, "over_2s_pct").mean()),
                     "over_10s": float(numeric(sub, "over_10s_pct").mean()),
                     "cpu_eff": rate / (cpu / 100) if cpu and np.isfinite(cpu) and cpu > 0 else math.nan})
    frame = pd.DataFrame(rows, columns=["system", "test", "n", "threads", "rate", "cpu", "lat_avg_ms", "lat_max_ms",
                                        "over_2s", "over_10s", "cpu_eff"])
    known = {t: i for i, t in enumerate(TIOBENCH_TESTS)}
    tests = {t: known.get(t, len(known) + i) for i, t in enumerate(unique_in_order(frame["test"]))}
    return frame.sort_values("test", key=lambda s: s.map(tests), kind="stable").reset_index(drop=True)


def _chart_rows(data: pd.DataFrame, results: pd.DataFrame, test_name) -> pd.DataFrame:
    """The rates as :func:`iolab.report.figures.summary_chart` draws them: system, test, x, value, and the rows'
    flags (a page cache's inflated rates go on their own axis)."""
    rows = usable_rows(with_system(data))
    flags = rows.groupby(["system", "test"], sort=False)["flags"].agg(
        lambda f: ";".join(str(v) for v in f.dropna())) if "flags" in rows.columns else pd.Series(dtype=str)
    return pd.DataFrame({"system": results["system"], "test": results["test"], "direction": "",
                         "x": [test_name(t) for t in results["test"]], "value": results["rate"],
                         "flags": [flags.get((s, t), "") for s, t in zip(results["system"], results["test"])]})


def _tio_pct(value: float) -> str:
    return f"{value:.5f}" if np.isfinite(value) else DASH


def tiobench_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """tiobench.pl's tables: Sequential Writes, Random Writes, Sequential Reads, Random Reads.

    One table per test, rows = systems, columns as tiobench.pl prints them:
    threads, Rate (MB/s), CPU %, average and maximum latency (ms), % of
    operations over 2 s and over 10 s, CPU efficiency. A bar chart of the rates;
    findings: the winner per test and the slow operations.
    """
    i18n.check_lang(lang)
    results = tiobench_results(data)
    if results.empty:
        return None
    section = Section("tiobench", _t("tio.heading", lang), lang, intro=_t("tio.intro", lang))
    heads = [("threads", "tio.col_threads", 0), ("rate", "tio.col_rate", None), ("cpu", "tio.col_cpu", 1),
             ("lat_avg_ms", "tio.col_avg", None), ("lat_max_ms", "tio.col_max", None),
             ("over_2s", "tio.col_2s", "pct"), ("over_10s", "tio.col_10s", "pct"), ("cpu_eff", "tio.col_eff", 0)]

    def test_name(test):
        key = f"sections.tio.test_{test}"
        return i18n.text(key, lang) if i18n.has(key, lang) else test

    for test in unique_in_order(results["test"]):
        part = results[results["test"] == test].set_index("system")
        shown, numbers = {}, {}
        for column, key, digits in heads:
            values = part[column].astype(float)
            numbers[_t(key, lang)] = values.to_numpy()
            shown[_t(key, lang)] = [_tio_pct(v) if digits == "pct" else number_or_dash(v, digits) for v in values]
        index = pd.Index(part.index, name=i18n.text("labels.system", lang))
        section.tables.append(Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                                    caption=test_name(test)))
    # rates a page cache served (rows flagged cache_inflated) on an axis of their own, beside the device's
    fig = figures.summary_chart(_chart_rows(data, results, test_name), unit="MB/s", ylabel=_t("tio.col_rate", lang),
                                lang=lang, legend_title=i18n.text("labels.system", lang))
    if fig is not None:  # one rate: the table says it, no lone bar
        section.figures.append(Figure(fig, alt=_t("tio.alt", lang),
                                      caption=figures.with_split_note(_t("tio.alt", lang), fig, lang)))
    summary = pd.DataFrame({"system": results["system"], "test": [test_name(t) for t in results["test"]],
                            "direction": "", "metric": "rate", "unit": "MB/s", "value": results["rate"],
                            "n": results["n"]})
    section.sentences += winner_lines(summary, lang)
    slow = results[results["over_2s"].fillna(0) > 0]
    for _, row in slow.iterrows():
        key = "tio.slow_10s" if row["over_10s"] > 0 else "tio.slow_2s"
        section.sentences.append(_t(key, lang, system=row["system"], test=test_name(row["test"]),
                                    pct2=small_percent(row["over_2s"]), pct10=small_percent(row["over_10s"]),
                                    worst=i18n.number(row["lat_max_ms"] / 1000, digits=1)))
    # the maximum latency column: one operation each, an anecdote (named once, with the widest factor)
    section.sentences += reasons.sentences(reasons.single_max(pd.DataFrame({
        "system": results["system"], "test": results["test"], "metric": "lat_max_us", "unit": "ms",
        "value": results["lat_max_ms"], "n": results["n"]})), lang=lang)
    if slow.empty and results["over_2s"].notna().any():
        worst = results.loc[results["lat_max_ms"].idxmax()]
        section.sentences.append(_t("tio.none_slow", lang, ms=number_or_dash(worst["lat_max_ms"]),
                                    system=worst["system"], test=test_name(worst["test"])))
    return section
