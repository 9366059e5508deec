"""Why the numbers are what they are: a small rule base that attaches the reason a reader needs, naming its evidence.

The commentary (:mod:`iolab.report.commentary`, :mod:`iolab.report.narrative`) says who wins and by how much; these
rules say *why*, where the data shows it, from what storage engineers know:

* ``flushes``: a test bound by cache flushes: the ``dev_flushes`` the sqlbench and pgbench engines record
  (``commit_flushes``: a pgbench mode flushing at every commit, per transaction); published
  (``flushes_published``): sql-bench's create far apart while insert ties (MyISAM syncs a table's files at CREATE
  TABLE and flushes nothing at commit, ``recipes/sqlbench.yaml``).
* ``interface``: a throughput above the link (:mod:`iolab.report.interfaces`); ``rated``: above the
  vendor's rating (``data/reference/rated-specs.csv``); ``striping``: a RAID0 of N drives above one drive's rating.
  A measured drive is held against the link its run recorded (:func:`above_measured_link`, shown by
  :func:`iolab.report.ceilings.markdown`); an emulated device's declared limits are :mod:`iolab.report.ceilings`'
  business: its rows are left to it.
* ``queue_depth``: a test's deepest ``Q{n}T1`` against its ``Q1T1``, a gain of :data:`QD_GAIN` or more.
* ``cpu_bound``: Bonnie++'s per-character tests close while the block tests differ (and the %CP where known).
* ``memory_read``: hdparm -T's cached reads measure the machine's memory and CPU, not the disk.
* ``file_vs_ram``: the test file against the RAM of a system not isolated from the page cache.
* ``single_max``: a maximum latency is one operation of one run: an anecdote, not a typical figure.

The rules return a tidy frame, one row per reason (:data:`COLUMNS`); :func:`sentences` and :func:`markdown` word it.
"""
from __future__ import annotations

import logging
import math
import re

import pandas as pd

from iolab.core.errors import IolabError
from iolab.report import i18n, interfaces, verdicts
from iolab.report.commentary_base import MEMORY_TESTS, checked_summary

log = logging.getLogger(__name__)

COLUMNS = ("rule", "system", "test", "direction", "value", "unit", "against", "ratio", "detail", "extra")

#: A test with at least this many cache flushes (``dev_flushes``, per run) waits on them.
MIN_FLUSHES = 50
#: A pgbench mode with at least this many cache flushes per transaction flushes at (nearly) every commit.
COMMIT_FLUSH_SHARE = 0.5
#: The deepest queue giving at least this many times the QD1 figure is explained as parallelism.
QD_GAIN = 2.0
#: Bonnie++'s per-character tests and its block tests, by the names the reference and the sections use.
PER_CHAR = ("seq_write_per_chr", "seq_read_per_chr", "putc", "getc")
BLOCK = ("seq_write_block", "rewrite", "seq_read_block", "put_block", "get_block")
#: Test files the benchmarks make: a fixed size (bytes, how) or a multiple of the RAM.
FILE_SIZES = {"tiobench": ("fixed", 1024**3, "8 × 128 MiB"), "bonnie++": ("ram", 2.0, "2 × RAM")}

_QD = re.compile(r"^(?P<prefix>.+?)-?Q(?P<q>\d+)T(?P<t>\d+)(?P<rest>.*)$")


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=list(COLUMNS))


def _frame(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return _empty()
    return pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=list(COLUMNS))


def _num(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce")


def _need(frame: pd.DataFrame, columns, rule: str) -> None:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise IolabError("frame lacks columns " + ", ".join(sorted(missing)), context=f"reasons, {rule}")


def _isolated(frame: pd.DataFrame) -> pd.Series:
    if "cache_isolated" not in frame.columns:
        return pd.Series(True, index=frame.index)
    return frame["cache_isolated"].map(lambda v: True if pd.isna(v) else bool(v))


def _emulated(frame: pd.DataFrame) -> pd.Series:
    """Rows of an emulated device: its declared limits are ceilings (:mod:`iolab.report.ceilings` explains them)."""
    if "flags" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["flags"].fillna("").astype(str).map(lambda v: any(f.startswith("emulated") for f in v.split(";")))


def flushes(rows: pd.DataFrame) -> pd.DataFrame:
    """Tests that wait on the disk's cache flushes, from the ``dev_flushes`` the sqlbench and pgbench engines record.

    ``rows``: one row per test x repetition with ``system, test, runtime_s, dev_flushes``. A (system, test) whose
    mean flushes per run reach :data:`MIN_FLUSHES` gives a row: ``value`` its mean seconds, ``against`` its mean
    flushes, ``ratio`` the milliseconds per flush at most (seconds / flushes).
    """
    if rows.empty or "dev_flushes" not in rows.columns:
        return _empty()
    _need(rows, ("system", "test", "runtime_s"), "flushes")
    data = rows.assign(_s=_num(rows, "runtime_s"), _f=_num(rows, "dev_flushes"))
    out = []
    for (system, test), part in data.groupby(["system", "test"], sort=False):
        count, seconds = part["_f"].mean(), part["_s"].mean()
        if pd.isna(count) or pd.isna(seconds) or count < MIN_FLUSHES:
            continue
        out.append({"rule": "flushes", "system": system, "test": test, "direction": "", "value": seconds,
                    "unit": "s", "against": count, "ratio": 1000 * seconds / count})
    return _frame(out)


def commit_flushes(rows: pd.DataFrame) -> pd.DataFrame:
    """pgbench modes whose commits wait on a cache flush each, from the ``dev_flushes`` the engine records.

    ``rows``: one row per mode x client count x repetition with ``system, test, runtime_s, dev_flushes`` and
    ``transactions`` (else ``tps`` x ``runtime_s``), the client count in ``clients`` (else ``numjobs``). A mode
    counts at its fewest clients, where a commit has no other to share its flush with: when its mean flushes per
    run reach :data:`MIN_FLUSHES` and :data:`COMMIT_FLUSH_SHARE` per transaction, a row: ``value`` its mean
    seconds, ``against`` its mean flushes, ``ratio`` the milliseconds per flush at most, ``extra`` the flushes
    per transaction, ``detail`` the client count."""
    if rows.empty or "dev_flushes" not in rows.columns:
        return _empty()
    _need(rows, ("system", "test", "runtime_s"), "commit_flushes")
    seconds = _num(rows, "runtime_s")
    done = _num(rows, "transactions")
    clients = _num(rows, "clients")
    data = rows.assign(_s=seconds, _f=_num(rows, "dev_flushes"),
                       _x=done.where(done.notna(), _num(rows, "tps") * seconds),
                       _c=clients.where(clients.notna(), _num(rows, "numjobs")).fillna(1))
    out = []
    for (system, test), part in data.groupby(["system", "test"], sort=False):
        part = part[part["_c"] == part["_c"].min()]
        count, seconds, done = part["_f"].mean(), part["_s"].mean(), part["_x"].mean()
        if pd.isna(count) or pd.isna(seconds) or not done > 0 or count < MIN_FLUSHES:
            continue
        if count / done >= COMMIT_FLUSH_SHARE:
            out.append({"rule": "commit_flushes", "system": system, "test": test, "direction": "", "value": seconds,
                        "unit": "s", "against": count, "ratio": 1000 * seconds / count, "extra": count / done,
                        "detail": int(part["_c"].iloc[0])})
    return _frame(out)


def flushes_published(summary: pd.DataFrame, *, tolerance: float = 0.05, apart: float = 5.0) -> pd.DataFrame:
    """sql-bench's published seconds: ``create`` ``apart`` times or more between systems while ``insert`` is within
    ``tolerance`` on all of them: create waits on a flush per CREATE TABLE, insert's commits on none.

    One row per system slower at create by ``apart`` or more: ``value`` its seconds, ``against`` the fastest's,
    ``ratio`` the factor, ``detail`` the fastest system, ``extra`` insert's spread (a fraction)."""
    frame = summary[_isolated(summary)]
    if frame.empty or not {"create", "insert"} <= set(frame["test"]) or "dev_flushes" in frame.columns:
        return _empty()
    if str(frame["unit"].iloc[0]) != "s":
        return _empty()
    create = frame[frame["test"] == "create"].dropna(subset=["value"]).set_index("system")["value"]
    insert = frame[frame["test"] == "insert"].dropna(subset=["value"])["value"]
    if len(create) < 2 or len(insert) < 2 or not create.min() > 0:
        return _empty()
    spread = (insert.max() - insert.min()) / insert.max()
    if spread > tolerance:
        return _empty()
    fast = create.idxmin()
    return _frame([{"rule": "flushes_published", "system": system, "test": "create", "direction": "",
                    "value": value, "unit": "s", "against": create[fast], "ratio": value / create[fast],
                    "detail": fast, "extra": spread}
                   for system, value in create.items() if value / create[fast] >= apart])


def _throughput(frame: pd.DataFrame) -> pd.DataFrame:
    """Isolated, not emulated rows in a unit of throughput, with ``mbps``."""
    units = interfaces.TO_MB_S
    rows = frame[_isolated(frame) & ~_emulated(frame) & frame["unit"].isin(list(units))].copy()
    rows["mbps"] = pd.to_numeric(rows["value"], errors="coerce") * rows["unit"].map(units)
    return rows.dropna(subset=["mbps"])


def above_link(summary: pd.DataFrame, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Figures above the device's link, above its rating, or a RAID0's above one drive's rating
    (:func:`iolab.report.interfaces.above`): the ``interface``, ``rated`` and ``striping`` reasons."""
    if summary.empty:
        return _empty()
    _need(summary, ("system", "test", "value", "unit"), "interfaces")
    return _frame(interfaces.above(_throughput(summary), specs))


def above_measured_link(results: pd.DataFrame, manifests: pd.DataFrame, *, statistic: str = "mean") -> pd.DataFrame:
    """Measured throughputs above the link the run recorded for the target's drives: the ``interface`` reason
    (:func:`iolab.report.interfaces.above_measured`)."""
    return _frame(interfaces.above_measured(results, manifests, statistic=statistic))


def queue_depth(summary: pd.DataFrame) -> pd.DataFrame:
    """Per system, test family and direction (``RND4K``, read): the deepest ``Q{n}T1`` against ``Q1T1`` when it gives
    :data:`QD_GAIN` times or more. ``value`` the deep figure, ``against`` QD1's, ``ratio`` the gain, ``detail`` the
    QD1 test, ``extra`` the depth. Emulated devices are left to :mod:`iolab.report.ceilings`."""
    if summary.empty:
        return _empty()
    _need(summary, ("system", "test", "value"), "queue_depth")
    frame = summary[_isolated(summary) & ~_emulated(summary)]
    if "metric" in frame.columns:
        from iolab.analysis.metrics import higher_is_better
        frame = frame[frame["metric"].astype(str).map(lambda m: higher_is_better(m) if m else True)]
    if frame.empty:
        return _empty()
    out = []
    parsed = frame["test"].astype(str).str.extract(_QD)
    frame = frame.assign(_prefix=parsed["prefix"], _q=pd.to_numeric(parsed["q"]), _t=pd.to_numeric(parsed["t"]),
                         _rest=parsed["rest"].fillna(""))
    frame = frame[frame["_prefix"].notna() & (frame["_t"] == 1)]
    direction = frame["direction"].fillna("") if "direction" in frame.columns else pd.Series("", index=frame.index)
    for (system, prefix, rest, way), part in frame.groupby(["system", "_prefix", "_rest", direction], sort=False):
        part = part.dropna(subset=["value"])
        one, deep = part[part["_q"] == 1], part[part["_q"] == part["_q"].max()]
        if one.empty or deep.empty or deep["_q"].iloc[0] <= 1 or not one["value"].iloc[0] > 0:
            continue
        gain = deep["value"].iloc[0] / one["value"].iloc[0]
        if gain >= QD_GAIN:
            out.append({"rule": "queue_depth", "system": system, "test": deep["test"].iloc[0], "direction": way,
                        "value": deep["value"].iloc[0], "unit": str(deep["unit"].iloc[0]) if "unit" in deep else "",
                        "against": one["value"].iloc[0], "ratio": gain, "detail": one["test"].iloc[0],
                        "extra": int(deep["_q"].iloc[0])})
    return _frame(out)


def cpu_bound(summary: pd.DataFrame, *, tolerance: float = verdicts.PAR, per_char=PER_CHAR,
              block=BLOCK) -> pd.DataFrame:
    """Bonnie++'s per-character tests where the systems are close (within ``tolerance``, "close" in
    :mod:`iolab.report.verdicts`) while their block tests differ by 2x or more: one byte per call, the CPU sets
    the pace.

    ``summary``: ``system, test, value`` and optionally ``cpu`` (bonnie++'s %CP); ``per_char`` and ``block`` name
    the tests (the reference's names and the sections' by default). One row per per-char test:
    ``value``/``against`` the highest and lowest figure, ``ratio`` the block tests' widest factor, ``extra`` the
    least %CP (NaN without), ``detail`` the systems."""
    if summary.empty:
        return _empty()
    _need(summary, ("system", "test", "value"), "cpu_bound")
    frame = summary[_isolated(summary)].dropna(subset=["value"])
    block = frame[frame["test"].isin(list(block))]
    widest = max((g["value"].max() / g["value"].min() for _, g in block.groupby("test") if len(g) >= 2
                  and g["value"].min() > 0), default=math.nan)
    out = []
    for test, part in frame[frame["test"].isin(list(per_char))].groupby("test", sort=False):
        if len(part) < 2 or not part["value"].min() > 0:
            continue
        cpu = _num(part, "cpu").min()
        if (part["value"].max() - part["value"].min()) / part["value"].max() > tolerance or not widest >= 2:
            continue
        out.append({"rule": "cpu_bound", "system": ";".join(part["system"].astype(str)), "test": test,
                    "direction": "", "value": part["value"].max(), "unit": str(part["unit"].iloc[0])
                    if "unit" in part else "", "against": part["value"].min(), "ratio": widest,
                    "detail": ";".join(part["system"].astype(str)), "extra": cpu})
    return _frame(out)


def ram_bytes(name: str) -> float | None:
    """The RAM a system's name gives: ``mem=512M`` (a boot limit), ``16GB RAM``; None when it gives none."""
    m = re.search(r"mem=(\d+(?:\.\d+)?)([KMG])", name, flags=re.I)
    if m:
        return float(m.group(1)) * 1024 ** {"K": 1, "M": 2, "G": 3}[m.group(2).upper()]
    m = re.search(r"(\d+(?:\.\d+)?)\s*([MG])i?B\s+RAM", name, flags=re.I)
    if m:
        return float(m.group(1)) * 1024 ** {"M": 2, "G": 3}[m.group(2).upper()]
    return None


def file_vs_ram(summary: pd.DataFrame, benchmark: str | None = None) -> pd.DataFrame:
    """For each system not isolated from the page cache: the benchmark's test file against its RAM
    (:data:`FILE_SIZES`). ``value`` the file's bytes, ``against`` the RAM's, ``ratio`` file / RAM, ``detail`` the
    benchmark, ``extra`` ``fits`` (file at most the RAM: the cache holds it) or ``exceeds``."""
    if summary.empty:
        return _empty()
    if benchmark is None:
        names = set(summary["benchmark"].astype(str)) if "benchmark" in summary.columns else set()
        benchmark = next(iter(names)) if len(names) == 1 else None
    if benchmark not in FILE_SIZES:
        return _empty()
    if "metric" in summary.columns:  # said once per benchmark: beside its throughputs, not under its latencies or seeks
        if not summary["metric"].astype(str).isin(["throughput", "bw_mbps", "rate"]).all() or \
                not summary["unit"].astype(str).isin(list(interfaces.TO_MB_S)).all():
            return _empty()
    kind, size, _how = FILE_SIZES[benchmark]
    out = []
    for system in dict.fromkeys(summary.loc[~_isolated(summary), "system"]):
        ram = ram_bytes(str(system))
        if ram is None:
            continue
        file = size if kind == "fixed" else size * ram
        out.append({"rule": "file_vs_ram", "system": system, "test": "", "direction": "", "value": file, "unit": "B",
                    "against": ram, "ratio": file / ram, "detail": benchmark,
                    "extra": "fits" if file <= ram else "exceeds"})
    return _frame(out)


def memory_read(summary: pd.DataFrame) -> pd.DataFrame:
    """hdparm -T's cached reads (:data:`iolab.report.commentary_base.MEMORY_TESTS`, by the article's test names): figures of
    the machine's memory and CPU, not of its disk. One row per test, ``detail`` the systems."""
    if summary.empty:
        return _empty()
    _need(summary, ("system", "test", "value"), "memory_read")
    tests = summary["test"].astype(str)
    memory = summary[tests.map(lambda t: any(m in t for m in MEMORY_TESTS)) & summary["value"].notna()]
    return _frame([{"rule": "memory_read", "system": ";".join(part["system"].astype(str)), "test": test,
                    "direction": "", "value": part["value"].max(), "unit": str(part["unit"].iloc[0])
                    if "unit" in part else "", "against": part["value"].min(), "ratio": math.nan,
                    "detail": ";".join(part["system"].astype(str)), "extra": len(part)}
                   for test, part in memory.groupby("test", sort=False)])


def single_max(summary: pd.DataFrame) -> pd.DataFrame:
    """A metric that is a maximum (``latency_max``, ``lat_max``): each figure is one operation, of one run where
    ``n`` is 1. One row per metric: ``value``/``against`` the largest and smallest figure, ``ratio`` their factor,
    ``extra`` the most runs behind a figure."""
    if summary.empty or "metric" not in summary.columns:
        return _empty()
    out = []
    for metric, part in summary.dropna(subset=["value"]).groupby("metric", sort=False):
        if "max" not in str(metric).lower():
            continue
        keys = [c for c in ("test", "direction") if c in part.columns]
        widest = None
        for _, test in part.groupby(keys, sort=False) if keys else [("", part)]:
            if len(test) >= 2 and test["value"].min() > 0:
                ratio = test["value"].max() / test["value"].min()
                widest = test if widest is None or ratio > widest["value"].max() / widest["value"].min() else widest
        if widest is None:
            continue
        runs = _num(part, "n").max()
        out.append({"rule": "single_max", "system": "", "test": str(widest["test"].iloc[0]) if keys else "",
                    "direction": "", "value": widest["value"].max(),
                    "unit": str(part["unit"].iloc[0]) if "unit" in part else "", "against": widest["value"].min(),
                    "ratio": widest["value"].max() / widest["value"].min(), "detail": str(metric),
                    "extra": 1 if pd.isna(runs) else int(runs)})
    return _frame(out)


def rated_specs() -> pd.DataFrame:
    """``data/reference/rated-specs.csv`` (empty when the kit's data is not there)."""
    from iolab.analysis import reference
    try:
        return reference.rated_specs()
    except (IolabError, OSError) as err:
        log.info("no rated specs to hold figures against (%s)", err)
        return pd.DataFrame(columns=["device", "interface", "spec", "unit", "value", "note"])


def from_summary(summary: pd.DataFrame, *, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every rule that reads a summary frame (:func:`iolab.report.tables.summarize`,
    :func:`iolab.analysis.reference.as_summary`): flushes (published), interfaces and ratings, queue depth,
    CPU-bound tests, reads from memory (hdparm -T), file size against RAM, single-sample maxima."""
    if summary.empty:
        return _empty()
    specs = rated_specs() if specs is None else specs
    found = [flushes_published(summary), above_link(summary, specs), queue_depth(summary), cpu_bound(summary),
             memory_read(summary), file_vs_ram(summary), single_max(summary)]
    found = [f for f in found if not f.empty]
    return pd.concat(found, ignore_index=True) if found else _empty()


_t = i18n.scoped("reasons")


def _mbps(value: float, lang: str) -> str:
    return i18n.with_unit(i18n.number(value), i18n.unit("MB/s", lang))


def _figure(value: float) -> str:
    """A figure for prose: whole numbers without decimals (34 s, not 34.0 s)."""
    return i18n.number(value, digits=0) if float(value).is_integer() else i18n.number(value)


def _seconds(value: float, lang: str) -> str:
    return i18n.with_unit(_figure(value), i18n.unit("s", lang))


def _size(value: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2)):
        if value >= scale:
            return f"{i18n.number(value / scale, digits=0 if (value / scale).is_integer() else 1)} {unit}"
    return f"{i18n.number(value, digits=0)} B"


def _test(row, lang: str) -> str:
    return i18n.test_label(row["test"], row.get("direction", "") or "", lang)


def _flushes(rows: pd.DataFrame, lang: str) -> list[str]:
    out = []
    for test, part in rows.groupby("test", sort=False):
        items = [_t("flushes_item", lang, system=r["system"], flushes=i18n.number(r["against"], digits=0),
                    seconds=_seconds(r["value"], lang), ms=i18n.number(r["ratio"])) for _, r in part.iterrows()]
        out.append(_t("flushes", lang, test=i18n.label(test, lang, section="tests"), items=i18n.join(items, lang)))
    return out


def _commit_flushes(rows: pd.DataFrame, lang: str) -> list[str]:
    out = []
    for (test, clients), part in rows.groupby(["test", "detail"], sort=False):
        items = [_t("commit_flushes_item", lang, system=r["system"], per=i18n.number(r["extra"], digits=2),
                    flushes=i18n.number(r["against"], digits=0), seconds=_seconds(r["value"], lang),
                    ms=i18n.number(r["ratio"])) for _, r in part.iterrows()]
        out.append(_t("commit_flushes", lang, test=i18n.label(test, lang, section="tests"), n=int(clients),
                      items=i18n.join(items, lang)))
    return out


def _one(row, lang: str, again: bool = False) -> str:
    rule = row["rule"]
    if rule == "flushes_published":
        return ""  # said per test, all systems at once (_grouped)
    if rule == "interface":
        return _t("interface_raid" if (row["extra"] or 1) > 1 else "interface", lang, system=row["system"],
                  test=_test(row, lang), value=_mbps(row["value"], lang), interface=row["detail"],
                  ceiling=_mbps(row["against"], lang), drives=int(row["extra"] or 1))
    if rule == "rated":
        return _t("rated", lang, system=row["system"], test=_test(row, lang), value=_mbps(row["value"], lang),
                  device=row["detail"], rated=_mbps(row["against"], lang), factor=i18n.factor(row["ratio"]))
    if rule == "striping":  # within what N drives are rated for together, or beyond it (then no stripe explains it)
        beyond = row["ratio"] > row["extra"] * (1 + interfaces.NEAR)
        key = "striping" + ("_beyond" if beyond else "") + ("_again" if again else "")
        return _t(key, lang, system=row["system"], test=_test(row, lang), value=_mbps(row["value"], lang),
                  device=row["detail"], rated=_mbps(row["against"], lang), factor=i18n.factor(row["ratio"]),
                  drives=int(row["extra"]), together=_mbps(row["against"] * row["extra"], lang))
    if rule == "file_vs_ram":
        how = FILE_SIZES.get(row["detail"], ("", 0, ""))[2]
        return _t(f"file_{row['extra']}", lang, system=row["system"], benchmark=row["detail"],
                  file=_size(row["value"]) + (i18n.paren(how, lang) if how else ""), ram=_size(row["against"]),
                  factor=i18n.factor(row["ratio"]))
    if rule == "memory_read":
        return _t("memory_read", lang, test=i18n.label(row["test"], lang, section="tests"), n=int(row["extra"]))
    if rule == "single_max":
        key = "single_max_one" if row["extra"] <= 1 else "single_max"
        return _t(key, lang, metric=i18n.label(row["detail"], lang, section="metrics"),
                  factor=i18n.times(row["ratio"], lang), n=row["extra"])
    raise IolabError(f"no words for the rule {rule!r}", context="reasons")


def _grouped(rows: pd.DataFrame, lang: str) -> list[str]:
    """flushes_published: one sentence for the test, naming every slower system."""
    first = rows.iloc[0]
    slow = i18n.join(list(rows["system"]), lang)
    return [_t("flushes_published", lang, test=i18n.label(first["test"], lang, section="tests"), slow=slow,
               fast=first["detail"], factor=i18n.factor_range(rows["ratio"].min(), rows["ratio"].max()),
               fast_s=_seconds(first["against"], lang),
               slow_s=i18n.join([_seconds(v, lang) for v in rows["value"]], lang),
               pct=i18n.percent(first["extra"]), insert=i18n.label("insert", lang, section="tests"), n=len(rows))]


def _queue_depth(rows: pd.DataFrame, lang: str) -> list[str]:
    """queue_depth: one sentence per system and depth, each test's gain and figures named; why a depth helps is
    said once, with the first system it helps (each fact once per section)."""
    out = []
    explained = set()
    for (system, depth), part in rows.groupby(["system", "extra"], sort=False):
        items = []
        for _, row in part.iterrows():
            unit = i18n.unit(row["unit"], lang) if row["unit"] else ""
            items.append(_t("queue_item", lang, test=_test(row, lang), factor=i18n.factor(row["ratio"]),
                            shallow=i18n.test_label(row["detail"], row.get("direction", "") or "", lang),
                            value=i18n.with_unit(i18n.number(row["value"]), unit),
                            against=i18n.with_unit(i18n.number(row["against"]), unit)))
        out.append(_t("queue_depth_again" if depth in explained else "queue_depth", lang, system=system,
                      items=i18n.join(items, lang), depth=int(depth)))
        explained.add(depth)
    return out


def _cpu_bound(rows: pd.DataFrame, lang: str) -> list[str]:
    """cpu_bound: one sentence for the per-char tests of the same systems, each test's range named."""
    out = []
    for systems, part in rows.groupby("detail", sort=False):
        unit = i18n.unit(part["unit"].iloc[0], lang) if part["unit"].iloc[0] else ""
        spread = max((r["value"] - r["against"]) / r["value"] for _, r in part.iterrows())
        ranges = [f"{_figure(r['against'])}–{i18n.with_unit(_figure(r['value']), unit)}" for _, r in part.iterrows()]
        cpu = part["extra"].astype(float).min()
        out.append(_t("cpu_bound", lang, tests=i18n.join([i18n.label(t, lang, section="tests") for t in part["test"]],
                                                         lang),
                      systems=i18n.join(str(systems).split(";"), lang), pct=i18n.percent(spread),
                      ranges=i18n.join(ranges, lang), factor=i18n.factor(part["ratio"].max()), n=len(part),
                      cpu="" if pd.isna(cpu) else _t("cpu_pct", lang, cpu=i18n.number(cpu, digits=0))))
    return out


def sentences(found: pd.DataFrame, *, lang: str = "en") -> list[str]:
    """One sentence per reason found (flushes per test), each naming its evidence."""
    i18n.check_lang(lang)
    if found.empty:
        return []
    out = []
    for rule in dict.fromkeys(found["rule"]):
        rows = found[found["rule"] == rule]
        if rule == "flushes":
            out += _flushes(rows, lang)
        elif rule == "commit_flushes":
            out += _commit_flushes(rows, lang)
        elif rule == "flushes_published":
            out += _grouped(rows, lang)
        elif rule == "queue_depth":
            out += _queue_depth(rows, lang)
        elif rule == "cpu_bound":
            out += _cpu_bound(rows, lang)
        else:  # a second test of one system and rule: the why said once (RAID0's striping, x25v's read and write)
            seen: set = set()
            for _, r in rows.iterrows():
                out.append(_one(r, lang, again=r["system"] in seen))
                seen.add(r["system"])
    return list(dict.fromkeys(s for s in out if s))


def why(summary: pd.DataFrame, *, lang: str = "en", specs: pd.DataFrame | None = None, heading: bool = True) -> str:
    """The "**Why.**" paragraph of one recipe's summary (:func:`iolab.report.tables.summarize`): every rule
    :func:`from_summary` runs, worded; "" when none found a reason. The compare and report pages say it alike.
    ``heading`` False: the bullets alone (findings that are only reasons, under the findings' own heading)."""
    return markdown(from_summary(checked_summary(summary), specs=specs), lang=lang, heading=heading)


def markdown(found: pd.DataFrame, *, lang: str = "en", heading: bool = True) -> str:
    """"**Why.**" and a bullet per reason ("" when none was found; the bullets alone without ``heading``)."""
    said = sentences(found, lang=lang)
    if not said:
        return ""
    return (_t("heading", lang) + "\n" if heading else "") + "\n".join(f"- {s}" for s in said)
