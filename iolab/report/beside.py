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

from iolab.report import comparisons, environment, i18n, sections
from iolab.analysis import reference
from iolab.analysis.reference import REFERENCE_COLUMNS
from iolab.analysis.stats import split_flags
from iolab.report.sections.sqlbench import is_sqlbench

#: The columns of a measured row: the article's, plus the flags of the rows it comes from, ``measured`` (True:
#: the article's own rows have none), sql-bench's ``scale`` and what the page cache could hold of the test file
#: (``file_bytes`` against ``cache_bytes``, the memory the test could use, of the machine's ``ram_bytes``).
COLUMNS = REFERENCE_COLUMNS + ["flags", "measured", "scale", "file_bytes", "cache_bytes", "ram_bytes"]

#: iolab's Bonnie++ test -> the article's test name.
BONNIE = {"putc": "seq_write_per_chr", "put_block": "seq_write_block", "rewrite": "rewrite",
          "getc": "seq_read_per_chr", "get_block": "seq_read_block", "seeks": "random_seek"}
#: iolab's tiobench test -> the article's test name.
TIOBENCH = {"SeqWrite": "seq_write", "SeqRead": "seq_read", "RandWrite": "random_write", "RandRead": "random_read"}


def _row(article, benchmark, test, metric, unit, system, value, note="", isolated=True, flags="",
         scale=math.nan) -> dict:
    return {"article": article, "benchmark": benchmark, "test": test, "metric": metric, "unit": unit,
            "system": system, "device": "", "memory": "", "cache_isolated": isolated,
            "value": shown(value), "note": note, "flags": flags, "measured": True, "scale": scale}


def shown(value) -> float:
    """A measured figure as the report prints it (:func:`iolab.report.i18n.number`: 0.359 ms, 16.8 ms, 2,650 ms),
    so the table, the findings and the chart beside the article's figures carry no raw float (0.358512...)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    if not math.isfinite(value):
        return math.nan
    return float(i18n.number(value).replace(",", ""))


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
        # the original tool's column: 'HDD (emulated, bonnie++)', one bracket (not 'HDD (emulated) (bonnie++)')
        system = r["system"] if r["tool"] == "iolab" else i18n.with_note(r["system"], r["tool"], "en")
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
                 scale=float(r["scale"]) if pd.notna(r["scale"]) else math.nan,
                 **_provenance(data[(data["system"] == r["system"]) & (data["test"].astype(str) == r["test"])]))
            for _, r in sections.sqlbench_results(results).iterrows()]


def _with_system(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with a ``system`` column: the run's label where the selection named none (no rows: as given)."""
    if "system" in results.columns or results.empty:
        return results
    return results.assign(system=results["label"].astype(str))


def as_reference(results: pd.DataFrame, *, article: str, manifests: pd.DataFrame | None = None,
                 lang: str = "en") -> pd.DataFrame:
    """Measured Bonnie++, tiobench and sql-bench results as article rows (other recipes have no column to join).

    With the runs' ``manifests`` (:func:`iolab.report.notebooks.select`), each row also says what the article's
    environment table does of its systems (``device``, ``memory``, in ``lang``) and how big the test file was
    against the memory the page cache could use (``file_bytes``, ``cache_bytes``, ``ram_bytes``).
    """
    if results.empty:
        return pd.DataFrame(columns=COLUMNS)
    results = _with_system(results)
    rows = _bonnie(results, article) + _tiobench(results, article) + _sqlbench(results, article)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    if manifests is not None and len(frame):
        frame = _with_environment(frame, results, manifests, lang)
    return frame


#: Which result rows each benchmark's figures come from.
_TESTS = {"bonnie++": lambda r: r["test"].isin(BONNIE), "tiobench": lambda r: r["test"].isin(TIOBENCH),
          "sql-bench": is_sqlbench}


def _base_system(system: str, systems: set) -> str:
    """'HDD (emulated, bonnie++)' -> 'HDD (emulated)', 'HDD (bonnie++)' -> 'HDD': the original tool's column ran on
    the same system."""
    if system in systems:
        return system
    return next((s for s in systems if system.startswith(f"{s} (")
                 or (s.endswith(")") and system.startswith(s[:-1] + ", "))
                 or (s.endswith("）") and system.startswith(s[:-1] + "、"))), system)  # a ja page's name (i18n.with_note)


def _cache_bytes(manifest: dict) -> tuple[float, float]:
    """(memory the page cache could use for the test, the machine's RAM): the cgroup's limit where the run had one."""
    ram = environment.field(manifest, "system", "ram_bytes")
    ram = float(ram) if ram else math.nan
    mode = environment.field(manifest, "isolation", "mode")
    limit = environment.field(manifest, "isolation", "mem_limit") or environment.field(manifest, "options", "mem_limit")
    if mode in ("cgroup", "hugepages") and limit:
        return float(limit), ram
    return ram, ram


def _file_bytes(manifest: dict, benchmark: str) -> float:
    """The test file's size: Bonnie++'s own record (2x the RAM it saw), else the run's --size (tiobench's 8 files)."""
    size = environment.field(manifest, "bonnie", "file_size") if benchmark == "bonnie++" else None
    size = size or environment.field(manifest, "options", "size")
    return float(size) if size else math.nan


def memory_text(manifest: dict, lang: str) -> str:
    """The environment table's memory cell for a measured system: '512.0 MiB cgroup limit of 32.0 GiB RAM'."""
    cache, ram = _cache_bytes(manifest)
    if math.isnan(ram):
        return ""
    if cache < ram:
        return i18n.text("text.beside_memory_limited", lang, limit=environment.size_text(cache),
                         ram=environment.size_text(ram))
    return i18n.text("text.beside_memory", lang, ram=environment.size_text(ram))


def device_text(manifest: dict, lang: str = "en") -> str:
    """The environment table's device cell: the device's model (the kit's own descriptions in ``lang``,
    :func:`iolab.report.i18n.device_description`) and the file system the test files were on."""
    target = (manifest.get("targets") or [{}])[0] or {}
    model = (i18n.device_description(environment.field(target, "device", "model"), lang)
             or target.get("spec") or target.get("path") or "")
    return i18n.comma_list([p for p in (model, target.get("filesystem")) if p], lang)


def _with_environment(frame: pd.DataFrame, results: pd.DataFrame, manifests: pd.DataFrame, lang: str) -> pd.DataFrame:
    by_run = {str(m.get("run_id")): m for m in manifests.to_dict("records")}
    systems = set(results["system"].astype(str))
    frame = frame.copy()
    for column in ("file_bytes", "cache_bytes", "ram_bytes"):
        frame[column] = math.nan
    for (system, benchmark), rows in frame.groupby(["system", "benchmark"], sort=False):
        base = _base_system(str(system), systems)
        mine = results[(results["system"].astype(str) == base) & _TESTS[benchmark](results)]
        runs = [by_run[r] for r in dict.fromkeys(mine["run_id"].astype(str)) if r in by_run] \
            if "run_id" in mine.columns else []
        if not runs:
            continue
        manifest = runs[0]
        cache, ram = _cache_bytes(manifest)
        frame.loc[rows.index, ["file_bytes", "cache_bytes", "ram_bytes"]] = [_file_bytes(manifest, benchmark), cache, ram]
        frame.loc[rows.index, "device"] = " / ".join(dict.fromkeys(device_text(m, lang) for m in runs))
        frame.loc[rows.index, "memory"] = " / ".join(dict.fromkeys(memory_text(m, lang) for m in runs))
    return frame


def beside(published: pd.DataFrame, results: pd.DataFrame, *, article: str, manifests: pd.DataFrame | None = None,
           lang: str = "en") -> pd.DataFrame:
    """The article's rows with the measured systems' rows appended (the article's test order kept)."""
    mine = as_reference(results, article=article, manifests=manifests, lang=lang)
    mine = mine[mine.set_index(["benchmark", "test", "metric"]).index.isin(
        published.set_index(["benchmark", "test", "metric"]).index)]
    return pd.concat([published, mine], ignore_index=True)


def is_measured(part: pd.DataFrame) -> pd.Series:
    """Which rows are measured (the user's runs), not the article's."""
    if "measured" not in part.columns:
        return pd.Series(False, index=part.index)
    return part["measured"].fillna(False).astype(bool)


def _scaled(part: pd.DataFrame) -> pd.Series:
    """Measured rows at a scale other than the article's (sql-bench at 0.01: smaller loops, not its seconds)."""
    if "scale" not in part.columns:
        return pd.Series(False, index=part.index)
    scale = pd.to_numeric(part["scale"], errors="coerce")
    return is_measured(part) & scale.notna() & (scale != 1.0)


def comparable_groups(part: pd.DataFrame) -> list[tuple[float | None, pd.DataFrame]]:
    """The rows that may be compared with each other: the article's with runs at its own scale (``None``), then
    each other scale's runs among themselves; a figure at scale 0.01 never enters a factor against the article's."""
    scaled = _scaled(part)
    groups = [(None, part[~scaled])]
    scales = pd.to_numeric(part["scale"], errors="coerce") if "scale" in part.columns else None
    for scale in sorted(set(scales[scaled])) if scales is not None else []:
        groups.append((float(scale), part[scaled & (scales == scale)]))
    return groups


#: The benchmarks whose figures depend on how much of their test file the page cache holds, as the reader knows them.
FILE_TOOLS = {"bonnie++": "Bonnie++", "tiobench": "tiobench"}


def column_name(system: str, scale: float, lang: str = "en") -> str:
    """A measured column at another scale than the article's, named with it in the system's own bracket
    (:func:`iolab.report.i18n.with_note`): 'HDD (emulated, scale 0.01)', 'HDD（エミュレート、規模0.01）', never a
    second bracket after the first."""
    return i18n.with_note(system, i18n.text("system_names.scale", lang, scale=f"{scale:g}"), lang)


def scaled_names(part: pd.DataFrame, lang: str = "en") -> dict[str, str]:
    """``{system: its column name}`` for the measured systems at another scale than the article's."""
    scaled = part[_scaled(part)]
    if scaled.empty:
        return {}
    return {str(s): column_name(str(s), float(v), lang)
            for s, v in zip(scaled["system"], pd.to_numeric(scaled["scale"]))}


def table_notes(part: pd.DataFrame, lang: str = "en") -> list[str]:
    """What the article's table says under it when measured columns stand beside the published ones: which columns
    are the article's and which are measured, sql-bench's scale where it is not the article's, and each measured
    system's test file against the memory its page cache could use ([] when no column is measured)."""
    measured = is_measured(part)
    if not measured.any():
        return []
    ours = list(dict.fromkeys(part.loc[measured, "system"].astype(str)))
    notes = [i18n.text("text.beside_columns", lang, measured=i18n.join(ours, lang))]
    scaled = _scaled(part)
    for scale in sorted(set(pd.to_numeric(part.loc[scaled, "scale"]))):
        systems = list(dict.fromkeys(part.loc[scaled & (pd.to_numeric(part["scale"]) == scale), "system"].astype(str)))
        notes.append(i18n.text("text.beside_scale", lang, systems=i18n.join(systems, lang), scale=f"{scale:g}",
                               percent=f"{scale * 100:g}"))
    benchmark = str(part["benchmark"].iloc[0])
    if {"file_bytes", "cache_bytes"} <= set(part.columns) and benchmark in FILE_TOOLS:
        sized = part[measured].dropna(subset=["file_bytes", "cache_bytes"]).drop_duplicates("system")
        # one sentence per file and memory: Bonnie++ and iolab's equivalent of it wrote the same size on one machine
        for _, same in sized.groupby(["file_bytes", "cache_bytes", "ram_bytes"], sort=False, dropna=False):
            row = same.iloc[0]
            ratio = row["file_bytes"] / row["cache_bytes"]
            key = "beside_file_fits" if ratio < 1 else "beside_file_partly" if ratio < 2 else "beside_file_exceeds"
            limited = row["cache_bytes"] < row["ram_bytes"]
            notes.append(i18n.text(f"text.{key}", lang, system=i18n.join(list(same["system"]), lang),
                                   tool=FILE_TOOLS[benchmark],
                                   file=environment.size_text(row["file_bytes"]),
                                   memory=environment.size_text(row["cache_bytes"]),
                                   ratio=i18n.factor(ratio),
                                   how=i18n.text("text.beside_limit_how", lang,
                                                 ram=environment.size_text(row["ram_bytes"]))
                                   if limited else i18n.text("text.beside_no_limit", lang)))
    return notes


def as_summary(part: pd.DataFrame, lang: str | None = None) -> pd.DataFrame:
    """:func:`iolab.analysis.reference.as_summary` with the measured rows' flags kept (the article's rows have none).

    With ``lang``, a system measured at another scale than the article's is named with its scale (for a chart's
    legend, as in the table's header: :func:`scaled_names`), and an article's comparison by its name in ``lang``."""
    summary = reference.as_summary(part)
    if "flags" in part.columns:
        summary["flags"] = [";".join(split_flags(v)) for v in part["flags"]]
    if lang is not None:  # an article's comparison (cache on / off) by its name in lang
        summary["system"] = summary["system"].replace({**scaled_names(part, lang), **comparisons.names(part, lang)})
    return summary


def intro(published: pd.DataFrame, lang: str = "en") -> str:
    """The page's first sentence: the article's figures alone, or with the measured systems beside them."""
    measured = is_measured(published)
    if not measured.any():
        return i18n.text("text.intro_reference", lang)
    return i18n.text("text.intro_reference_beside", lang,
                     systems=i18n.join(list(dict.fromkeys(published.loc[measured, "system"].astype(str))), lang))


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
