"""Your runs beside an article's systems: measured results in the shape of :func:`iolab.analysis.reference.load`.

``iolab report RUN ... --reference dedicated-server-2013`` puts the user's
Bonnie++, tiobench and sql-bench runs into the article's tables as extra
columns, so a server measured today reads beside the 2013 figures (same tests,
same units: Bonnie++ K/sec and µs, tiobench MB/s and ms, sql-bench seconds).

Each measured row keeps what the report must say about it: the engine's
``flags`` of the rows it comes from (``v1_writeback``, ``cache_suspect``...)
and ``cache_isolated`` (False for a run with isolation ``none``), so the
article's commentary states the same caveats as the run's own report.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.report import i18n, sections
from iolab.analysis import reference
from iolab.analysis.reference import REFERENCE_COLUMNS
from iolab.analysis.stats import split_flags
from iolab.report.sections.sqlbench import is_sqlbench

#: The columns of a measured row: the article's, plus the flags of the rows it comes from.
COLUMNS = REFERENCE_COLUMNS + ["flags"]

#: iolab's Bonnie++ test -> the article's test name.
BONNIE = {"putc": "seq_write_per_chr", "put_block": "seq_write_block", "rewrite": "rewrite",
          "getc": "seq_read_per_chr", "get_block": "seq_read_block", "seeks": "random_seek"}
#: iolab's tiobench test -> the article's test name.
TIOBENCH = {"SeqWrite": "seq_write", "SeqRead": "seq_read", "RandWrite": "random_write", "RandRead": "random_read"}


def _row(article, benchmark, test, metric, unit, system, value, note="", isolated=True, flags="") -> dict:
    return {"article": article, "benchmark": benchmark, "test": test, "metric": metric, "unit": unit,
            "system": system, "device": "", "memory": "", "cache_isolated": isolated,
            "value": value, "note": note, "flags": flags}


def _provenance(rows: pd.DataFrame) -> dict:
    """What a measured figure carries from its rows: their flags, once each, and whether the cache was isolated."""
    flags = ";".join(dict.fromkeys(f for v in rows.get("flags", pd.Series(dtype=object)) for f in split_flags(v)))
    isolated = not (rows["isolation"].astype(str) == "none").any() if "isolation" in rows.columns else True
    return {"flags": flags, "isolated": isolated}


def _bonnie(results: pd.DataFrame, article: str) -> list[dict]:
    rows = []
    figures = sections.bonnie_results(results)
    data = results[results["test"].isin(BONNIE)]
    tools = data["tool"].astype(str).map(lambda t: "bonnie++" if t == "bonnie++" else "iolab") \
        if "tool" in data.columns else pd.Series("iolab", index=data.index)
    for _, r in figures.iterrows():
        name = BONNIE.get(r["test"])
        if name is None:
            continue
        system = r["system"] if r["tool"] == "iolab" else f"{r['system']} ({r['tool']})"
        note = "+++++" if r["plus"] else ""
        kept = _provenance(data[(data["system"] == r["system"]) & (data["test"] == r["test"]) & (tools == r["tool"])])
        if r["test"] == "seeks":
            rows.append(_row(article, "bonnie++", name, "rate", "seeks/s", system, r["rate"], note, **kept))
        else:
            rows.append(_row(article, "bonnie++", name, "throughput", "KB/s", system, r["rate"], note, **kept))
        rows.append(_row(article, "bonnie++", name, "latency_max", "us", system, r["lat_us"], **kept))
    return rows


def _tiobench(results: pd.DataFrame, article: str) -> list[dict]:
    rows = []
    data = results[results["test"].isin(TIOBENCH)]
    for (system, test), sub in data.groupby(["system", "test"], sort=False):
        name = TIOBENCH[test]
        mean = lambda column: float(pd.to_numeric(sub[column], errors="coerce").mean()) if column in sub else math.nan
        peak = float(pd.to_numeric(sub["lat_max_us"], errors="coerce").max()) if "lat_max_us" in sub else math.nan
        kept = _provenance(sub)
        rows.append(_row(article, "tiobench", name, "throughput", "MB/s", system, mean("bw_mbps"), **kept))
        rows.append(_row(article, "tiobench", name, "latency_avg", "ms", system, mean("lat_mean_us") / 1000, **kept))
        rows.append(_row(article, "tiobench", name, "latency_max", "ms", system, peak / 1000, **kept))
    return rows


def _sqlbench(results: pd.DataFrame, article: str) -> list[dict]:
    """sql-bench's elapsed seconds per test (Table 10), the test names as the article's.

    Three significant digits (17.2, 4.37, 0.607 s): the article's table prints
    each figure as it stands, and a mean of timings has no more to say.
    """
    data = results[is_sqlbench(results)]
    return [_row(article, "sql-bench", r["test"], "elapsed", "s", r["system"],
                 float(f"{r['elapsed_s']:.3g}") if math.isfinite(r["elapsed_s"]) else math.nan,
                 **_provenance(data[(data["system"] == r["system"]) & (data["test"].astype(str) == r["test"])]))
            for _, r in sections.sqlbench_results(results).iterrows()]


def _with_system(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with a ``system`` column: the run's label where the selection named none (no rows: as given)."""
    if "system" in results.columns or results.empty:
        return results
    return results.assign(system=results["label"].astype(str))


def as_reference(results: pd.DataFrame, *, article: str) -> pd.DataFrame:
    """Measured Bonnie++, tiobench and sql-bench results as article rows (other recipes have no column to join)."""
    if results.empty:
        return pd.DataFrame(columns=COLUMNS)
    results = _with_system(results)
    rows = _bonnie(results, article) + _tiobench(results, article) + _sqlbench(results, article)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    return frame


def beside(published: pd.DataFrame, results: pd.DataFrame, *, article: str) -> pd.DataFrame:
    """The article's rows with the measured systems' rows appended (the article's test order kept)."""
    mine = as_reference(results, article=article)
    mine = mine[mine.set_index(["benchmark", "test", "metric"]).index.isin(
        published.set_index(["benchmark", "test", "metric"]).index)]
    return pd.concat([published, mine], ignore_index=True)


def as_summary(part: pd.DataFrame) -> pd.DataFrame:
    """:func:`iolab.analysis.reference.as_summary` with the measured rows' flags kept (the article's rows have none)."""
    summary = reference.as_summary(part)
    if "flags" in part.columns:
        summary["flags"] = [";".join(split_flags(v)) for v in part["flags"]]
    return summary


def left_out(published: pd.DataFrame, results: pd.DataFrame, *, article: str) -> list[str]:
    """The measured systems none of whose results has a place in the article's tables (a quick or fio run beside
    the 2013 article): the report says so instead of dropping them silently."""
    if results.empty:
        return []
    results = _with_system(results)
    shown = set(beside(published, results, article=article)["system"].astype(str)) - set(published["system"])
    return [s for s in dict.fromkeys(results["system"].astype(str))
            if not any(k == s or k.startswith(f"{s} (") for k in shown)]


def left_out_note(published: pd.DataFrame, results: pd.DataFrame, *, article: str, lang: str = "en") -> str:
    """One sentence naming the runs left out of the article's tables, and why ('' when every run is shown)."""
    results = _with_system(results)  # once, for left_out and for the recipes named here
    missing = left_out(published, results, article=article)
    if not missing:
        return ""
    recipes = results.loc[results["system"].astype(str).isin(missing), "recipe"].astype(str) \
        if "recipe" in results.columns else pd.Series(dtype=str)
    return i18n.text("text.beside_left_out", lang, systems=i18n.join(missing, lang),
                     recipes=i18n.join(list(dict.fromkeys(recipes)), lang),
                     benchmarks=i18n.join(list(dict.fromkeys(published["benchmark"].astype(str))), lang))
