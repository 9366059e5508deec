"""MySQL sql-bench in the 2013 article's Table 10 shape: tests x systems, elapsed seconds, lower is better.

The rows come from the ``sqlbench`` engine (:mod:`iolab.classic.sqlbench`, ``tool`` = ``sql-bench``): one per
test x repetition, ``runtime_s`` the test's elapsed seconds. With ``--reference dedicated-server-2013`` the same
figures join the article's own Table 10 as extra columns (:mod:`iolab.report.beside`).
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.classic.sqlbench_tests import TESTS as SQLBENCH_TESTS
from iolab.core import optional
from iolab.report import i18n, reasons
from iolab.report.tables import Table
from iolab.report.sections.common import (
    Figure, Section, about, numeric, number_or_dash, unique_in_order, with_system, usable_rows,
    winner_lines)

_t = i18n.scoped("sections")

#: The ``tool`` of the engine's rows.
SQLBENCH_TOOL = "sql-bench"


def is_sqlbench(data: pd.DataFrame) -> pd.Series:
    """Which rows are sql-bench's (by the engine's ``tool`` column)."""
    if "tool" not in data.columns:
        return pd.Series(False, index=data.index)
    return data["tool"].astype(str) == SQLBENCH_TOOL


def sqlbench_results(data: pd.DataFrame) -> pd.DataFrame:
    """sql-bench's elapsed seconds per system and test (the article's test order, then any other test).

    Columns: ``system, test, n`` (repetitions that ran without error),
    ``elapsed_s`` (their mean), ``scale`` and ``storage_engine`` (as the run
    recorded them: a scale under 1 runs smaller loops than sql-bench's own).
    """
    data = usable_rows(with_system(data))
    data = data[is_sqlbench(data)]
    rows = []
    for (system, test), sub in data.groupby(["system", "test"], sort=False):
        elapsed = numeric(sub, "runtime_s").dropna()
        rows.append({"system": system, "test": str(test), "n": len(elapsed),
                     "elapsed_s": float(elapsed.mean()) if len(elapsed) else math.nan,
                     "scale": float(numeric(sub, "scale").max()),
                     "storage_engine": (str(sub["storage_engine"].dropna().iloc[0])
                                        if "storage_engine" in sub.columns and sub["storage_engine"].notna().any()
                                        else None)})
    frame = pd.DataFrame(rows, columns=["system", "test", "n", "elapsed_s", "scale", "storage_engine"])
    known = {t: i for i, t in enumerate(SQLBENCH_TESTS)}
    order = {t: known.get(t, len(known) + i) for i, t in enumerate(unique_in_order(frame["test"]))}
    return frame.sort_values("test", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def sqlbench_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Table 10's shape: rows = the eight tests and their total, columns = systems, elapsed seconds.

    A bar chart of the seconds per test; findings: the fastest system per
    test (lower is better), the test that tells the systems apart most, and
    the scale and storage engine the runs used where they are not sql-bench's own.
    """
    i18n.check_lang(lang)
    results = sqlbench_results(data)
    if results.empty:
        return None
    section = Section("sqlbench", _t("sql.heading", lang), lang, intro=_t("sql.intro", lang))
    section.tables.append(_sqlbench_table(results, lang))
    section.figures.append(_sqlbench_figure(results, lang, section.tables[-1]))
    section.sentences += _sqlbench_sentences(results, lang) + _sqlbench_reasons(data, results, lang)
    section.notes += _sqlbench_notes(results, lang)
    return section


def _sqlbench_reasons(data: pd.DataFrame, results: pd.DataFrame, lang: str) -> list[str]:
    """Why a test waits on the device: the cache flushes the kernel counted (``dev_flushes``); for runs without the
    counter, on MyISAM only, create far apart while insert ties (:func:`iolab.report.reasons.flushes_published`)."""
    rows = usable_rows(with_system(data))
    rows = rows[is_sqlbench(rows)]
    if "dev_flushes" in rows.columns and numeric(rows, "dev_flushes").notna().any():
        return reasons.sentences(reasons.flushes(rows), lang=lang)
    if set(results["storage_engine"].dropna()) != {"MyISAM"}:
        return []  # InnoDB flushes at every commit: insert ties on no evidence of ours
    summary = pd.DataFrame({"system": results["system"], "test": results["test"], "unit": "s",
                            "value": results["elapsed_s"]})
    return reasons.sentences(reasons.flushes_published(summary), lang=lang)


def _sqlbench_table(results: pd.DataFrame, lang: str) -> Table:
    systems = unique_in_order(results["system"])
    tests = unique_in_order(results["test"])
    seconds = results.pivot_table(index="test", columns="system", values="elapsed_s", aggfunc="first", sort=False)
    seconds = seconds.reindex(index=tests, columns=systems)
    complete = seconds.notna().all(axis=0)
    total = seconds.sum(axis=0).where(complete)  # a system that missed a test has no comparable total
    numbers = pd.concat([seconds, total.to_frame(_t("sql.total", lang)).T])
    numbers.index = pd.Index(list(tests) + [_t("sql.total", lang)], name=_t("sql.index", lang))
    numbers.columns = pd.Index(systems, name=i18n.text("labels.system", lang))
    shown = numbers.map(lambda v: number_or_dash(v, 1))
    return Table(shown, data=numbers, caption=_t("sql.caption", lang), notes=[_t("sql.note", lang)])


def _sqlbench_figure(results: pd.DataFrame, lang: str, table: Table) -> Figure:
    """Seconds per test and system; each bar labelled with the table's text for that cell (one rounding rule)."""
    from iolab.report import plot
    fig, ax = optional.pyplot().subplots(figsize=(9.0, 4.0))
    shown = [table.frame.loc[t, s] if pd.notna(v) else "" for t, s, v
             in zip(results["test"], results["system"], results["elapsed_s"])]
    plot.bars(results.assign(shown=shown), x="test", y="elapsed_s", hue="system", ax=ax, xlabel="",
              ylabel=_t("sql.chart_y", lang), legend_title=i18n.text("labels.system", lang), labels="shown")
    plot.tight(fig)
    return Figure(fig, alt=_t("sql.alt", lang))


def _sqlbench_sentences(results: pd.DataFrame, lang: str) -> list[str]:
    """The fastest system per test (fewest seconds), and the test whose seconds differ most between systems."""
    if results["system"].nunique() < 2:
        return []
    summary = pd.DataFrame({"system": results["system"], "test": results["test"], "direction": "",
                            "metric": "elapsed", "unit": "s", "value": results["elapsed_s"],
                            "n": results["n"].clip(lower=1)})
    sentences = winner_lines(summary, lang)
    spread = results.groupby("test", sort=False)["elapsed_s"].agg(["min", "max"])
    spread = spread[(spread["min"] > 0) & spread["max"].notna()]
    if len(spread):
        ratio = spread["max"] / spread["min"]
        test = ratio.idxmax()
        mine = results[results["test"] == test].set_index("system")["elapsed_s"]
        sentences.append(_t(i18n.magnitude_key("sql.widest", float(ratio[test])), lang, test=test,
                            factor=i18n.times(float(ratio[test]), lang),
                            fast=mine.idxmin(), fast_s=about(float(mine.min())),
                            slow=mine.idxmax(), slow_s=about(float(mine.max()))))
    return sentences


def _sqlbench_notes(results: pd.DataFrame, lang: str) -> list[str]:
    notes = []
    scales = sorted({s for s in results["scale"].dropna() if s != 1.0})
    if scales:
        notes.append(_t("sql.scaled", lang, scale=", ".join(f"{s:g}" for s in scales)))
    engines = sorted({e for e in results["storage_engine"].dropna()})
    if engines:
        notes.append(_t("sql.engine", lang, engine=", ".join(engines)))
    return notes
