"""Your runs beside an article's systems: measured results in the shape of :func:`iolab.analysis.reference.load`.

``iolab report RUN ... --reference dedicated-server-2013`` puts the user's
Bonnie++, tiobench and sql-bench runs into the article's tables as extra
columns, so a server measured today reads beside the 2013 figures (same tests,
same units: Bonnie++ K/sec and µs, tiobench MB/s and ms, sql-bench seconds).
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.report import sections
from iolab.analysis.reference import REFERENCE_COLUMNS

#: iolab's Bonnie++ test -> the article's test name.
BONNIE = {"putc": "seq_write_per_chr", "put_block": "seq_write_block", "rewrite": "rewrite",
          "getc": "seq_read_per_chr", "get_block": "seq_read_block", "seeks": "random_seek"}
#: iolab's tiobench test -> the article's test name.
TIOBENCH = {"SeqWrite": "seq_write", "SeqRead": "seq_read", "RandWrite": "random_write", "RandRead": "random_read"}


def _row(article, benchmark, test, metric, unit, system, value, note="", isolated=True) -> dict:
    return {"article": article, "benchmark": benchmark, "test": test, "metric": metric, "unit": unit,
            "system": system, "device": "", "memory": "", "cache_isolated": isolated,
            "value": value, "note": note}


def _bonnie(results: pd.DataFrame, article: str) -> list[dict]:
    rows = []
    figures = sections.bonnie_results(results)
    for _, r in figures.iterrows():
        name = BONNIE.get(r["test"])
        if name is None:
            continue
        system = r["system"] if r["tool"] == "iolab" else f"{r['system']} ({r['tool']})"
        note = "+++++" if r["plus"] else ""
        if r["test"] == "seeks":
            rows.append(_row(article, "bonnie++", name, "rate", "seeks/s", system, r["rate"], note))
        else:
            rows.append(_row(article, "bonnie++", name, "throughput", "KB/s", system, r["rate"], note))
        rows.append(_row(article, "bonnie++", name, "latency_max", "us", system, r["lat_us"]))
    return rows


def _tiobench(results: pd.DataFrame, article: str) -> list[dict]:
    rows = []
    data = results[results["test"].isin(TIOBENCH)]
    for (system, test), sub in data.groupby(["system", "test"], sort=False):
        name = TIOBENCH[test]
        mean = lambda column: float(pd.to_numeric(sub[column], errors="coerce").mean()) if column in sub else math.nan
        peak = float(pd.to_numeric(sub["lat_max_us"], errors="coerce").max()) if "lat_max_us" in sub else math.nan
        rows.append(_row(article, "tiobench", name, "throughput", "MB/s", system, mean("bw_mbps")))
        rows.append(_row(article, "tiobench", name, "latency_avg", "ms", system, mean("lat_mean_us") / 1000))
        rows.append(_row(article, "tiobench", name, "latency_max", "ms", system, peak / 1000))
    return rows


def _sqlbench(results: pd.DataFrame, article: str) -> list[dict]:
    """sql-bench's elapsed seconds per test (Table 10), the test names as the article's.

    Three significant digits (17.2, 4.37, 0.607 s): the article's table prints
    each figure as it stands, and a mean of timings has no more to say.
    """
    return [_row(article, "sql-bench", r["test"], "elapsed", "s", r["system"],
                 float(f"{r['elapsed_s']:.3g}") if math.isfinite(r["elapsed_s"]) else math.nan)
            for _, r in sections.sqlbench_results(results).iterrows()]


def as_reference(results: pd.DataFrame, *, article: str) -> pd.DataFrame:
    """Measured Bonnie++, tiobench and sql-bench results as article rows (other recipes have no column to join)."""
    if results.empty:
        return pd.DataFrame(columns=REFERENCE_COLUMNS)
    results = results if "system" in results.columns else results.assign(system=results["label"].astype(str))
    rows = _bonnie(results, article) + _tiobench(results, article) + _sqlbench(results, article)
    frame = pd.DataFrame(rows, columns=REFERENCE_COLUMNS)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    return frame


def beside(published: pd.DataFrame, results: pd.DataFrame, *, article: str) -> pd.DataFrame:
    """The article's rows with the measured systems' rows appended (the article's test order kept)."""
    mine = as_reference(results, article=article)
    mine = mine[mine.set_index(["benchmark", "test", "metric"]).index.isin(
        published.set_index(["benchmark", "test", "metric"]).index)]
    return pd.concat([published, mine], ignore_index=True)
