"""What each figure of a CrystalDiskMark run is, said next to its table (issue 24 item 3).

Readers hold iolab's crystaldiskmark rows beside CrystalDiskMark's and KDiskMark's own
screens, and the three differ in ways no column header shows:

- statistic: CrystalDiskMark shows the best of N passes (max MB/s and IOPS, min latency);
  KDiskMark's default preset shows the mean of its passes;
- latency: iolab's ``lat_mean_us`` is fio's total latency ``lat`` (submission +
  completion); KDiskMark shows fio's completion latency ``clat``, slightly lower;
- unit: iolab's MB/s is 10^6 bytes/s; KDiskMark's is fio's KiB/s / 1000 (1,024,000
  bytes/s, though labelled 10^6 B/s), so its figure for the same run is ours x
  1000/1024 (:data:`KDISKMARK_FACTOR`, 2.3 % lower);
- mix: results.csv's ``mix`` row is KDiskMark's weighted figure (read x R + write x
  (100 - R)) / 100; CrystalDiskMark's figure (reads + writes) is ``bw_total_mbps``.

:func:`facts` derives what applies from the run's rows and manifests (pass count,
statistic, mix rows and their ratio, an example figure); :func:`markdown` words it in
en or ja. Runs brought in by ``iolab import`` are the other tools' own figures: nothing
is said of them here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from iolab.core.errors import IolabError
from iolab.engine.fio.text import scan_documents
from iolab.report import i18n

log = logging.getLogger(__name__)

#: KDiskMark's MB/s per iolab MB/s: (bytes/s / 1024 / 1000) / (bytes/s / 10^6).
KDISKMARK_FACTOR = 1e6 / (1024 * 1000)
#: The recipe whose runs these notes are about.
RECIPE = "crystaldiskmark"
STATISTICS = ("best", "mean", "median")

_t = i18n.scoped("cdm_notes")


@dataclass
class Facts:
    """What the notes say of one recipe's measured rows (computed, nothing worded)."""
    n: int                      #: passes per test (most of any test)
    shown: str                  #: the statistic of the tool's own table: best or mean
    others: str                 #: the statistic of the other tables on the page
    latency: bool               #: a mean latency is in the rows
    example: dict | None = None  #: one figure and its KDiskMark equivalent: test, direction, system, mbps, kdiskmark
    mixes: list[dict] = field(default_factory=list)  #: per mixed test: test, read, write, weighted, total (MB/s)
    latency_gap: tuple[float, float] | None = None  #: least and most share by which fio's mean clat is below lat


def measured_rows(results: pd.DataFrame, manifests: pd.DataFrame) -> pd.DataFrame:
    """The rows iolab measured itself with the crystaldiskmark recipe (imported runs left out)."""
    if results.empty or "recipe" not in results:
        return results.iloc[0:0]
    rows = results[results["recipe"].astype(str) == RECIPE]
    if "imported" in manifests and "run_id" in manifests:
        imported = manifests.loc[manifests["imported"].apply(lambda v: isinstance(v, dict) and bool(v)), "run_id"]
        rows = rows[~rows["run_id"].isin(set(imported))]
    return rows


def facts(results: pd.DataFrame, manifests: pd.DataFrame, *, shown: str, others: str = "mean") -> Facts | None:
    """What applies to this recipe's measured crystaldiskmark rows, or None when there are none.

    ``shown`` is the statistic of the tool's own table on the page (``best`` when the
    best-of table is shown), ``others`` that of the page's other tables.
    """
    for name, value in (("shown", shown), ("others", others)):
        if value not in STATISTICS:
            raise IolabError(f"unknown statistic {value!r}", context=f"cdm notes, {name}",
                             hint="use one of " + ", ".join(STATISTICS))
    rows = measured_rows(results, manifests)
    if rows.empty:
        return None
    passes = rows[rows["rep"] > 0] if "rep" in rows else rows  # rep 0: a warm-up, where it is kept
    if passes.empty:
        passes = rows
    n = int(passes.groupby(["run_id", "test", "direction"])["rep"].nunique().max()) if "rep" in passes else 1
    bw = pd.to_numeric(passes["bw_mbps"], errors="coerce")
    latency = "lat_mean_us" in passes and pd.to_numeric(passes["lat_mean_us"], errors="coerce").notna().any()
    found = Facts(n=n, shown=shown, others=others, latency=bool(latency))
    if latency and "run_dir" in manifests:
        measured = manifests[manifests["run_id"].isin(set(passes["run_id"]))]
        found.latency_gap = latency_gap(measured["run_dir"].dropna())
    plain = passes[(passes["direction"] != "mix") & bw.notna()]
    if not plain.empty:  # the first test's first figure in the statistic shown, and KDiskMark's for it
        first = plain.iloc[0]
        same = plain[(plain["test"] == first["test"]) & (plain["direction"] == first["direction"])
                     & (plain["run_id"] == first["run_id"])]
        value = _statistic(pd.to_numeric(same["bw_mbps"], errors="coerce"), shown)
        found.example = {"test": first["test"], "direction": first["direction"], "mbps": value,
                         "system": first.get("system", first.get("label", first["run_id"])),
                         "kdiskmark": value * KDISKMARK_FACTOR}
    mix = passes[passes["direction"] == "mix"]
    for test in dict.fromkeys(mix["test"]):
        rows_of = mix[mix["test"] == test]
        ratios = sorted({int(r) for r in pd.to_numeric(rows_of.get("rwmixread"), errors="coerce").dropna()})
        if len(ratios) != 1:
            log.info("%s: mix rows with read shares %s, no ratio named", test, ratios)
        weighted = pd.to_numeric(rows_of["bw_mbps"], errors="coerce")
        total = pd.to_numeric(rows_of["bw_total_mbps"], errors="coerce") if "bw_total_mbps" in rows_of else None
        found.mixes.append({
            "test": test, "read": ratios[0] if len(ratios) == 1 else None,
            "weighted": _statistic(weighted, shown),
            "total": _statistic(total, shown) if total is not None and total.notna().any() else None})
    return found


def latency_gap(run_dirs) -> tuple[float, float] | None:
    """(least, most) share by which fio's mean ``clat`` is below its mean ``lat``, over the runs' recorded passes.

    Read from fio's own JSON in each run's ``raw/`` (warm-ups and the layout job left out),
    per job and direction that moved data; None when no file holds both means.
    """
    gaps = []
    for run_dir in run_dirs:
        for path in sorted((Path(run_dir) / "raw").rglob("*.json")):
            if path.name.startswith("_") or path.stem.endswith("warmup"):
                continue
            try:
                docs = scan_documents(path.read_text(encoding="utf-8", errors="replace")).docs
            except OSError as exc:
                log.info("%s: unreadable (%s), left out of the clat/lat comparison", path, exc)
                continue
            for job in (docs[-1].get("jobs") or []) if docs else []:
                for direction in ("read", "write"):
                    stats = job.get(direction) if isinstance(job, dict) else None
                    if not isinstance(stats, dict):
                        continue
                    lat = (stats.get("lat_ns") or {}).get("mean")
                    clat = (stats.get("clat_ns") or {}).get("mean")
                    if stats.get("io_bytes") and lat and clat is not None and lat > 0:
                        gaps.append(1 - float(clat) / float(lat))
    return (min(gaps), max(gaps)) if gaps else None


def _statistic(values: pd.Series, statistic: str) -> float:
    values = values.dropna()
    if values.empty:
        return float("nan")
    if statistic == "best":
        return float(values.max())
    return float(values.median() if statistic == "median" else values.mean())


def markdown(results: pd.DataFrame, manifests: pd.DataFrame, *, lang: str, shown: str,
             others: str = "mean") -> str:
    """The notes in ``lang`` as a Markdown list ('' when the rows hold no measured crystaldiskmark run)."""
    found = facts(results, manifests, shown=shown, others=others)
    if found is None:
        return ""
    return words(found, lang)


def words(found: Facts, lang: str) -> str:
    """:class:`Facts` worded: one line each for statistic, latency, unit, comparing with KDiskMark, mix."""
    lines = [_t("heading", lang)]
    statistic = i18n.label(found.others, lang, section="cdm_notes_statistics")
    if found.n <= 1:
        lines.append(_t("statistic_single", lang, n=found.n))
    elif found.shown == "best":
        others = "" if found.others == "best" else (  # every table holds the best pass: nothing more to say
            _t("statistic_others_mean", lang, n=found.n) if found.others == "mean"
            else _t("statistic_others", lang, statistic=statistic))
        lines.append(_joined([_t("statistic_best", lang, n=found.n), others], lang))
    else:
        lines.append(_t("statistic_mean", lang, n=found.n, statistic=statistic))
    if found.latency and found.latency_gap:
        low, high = (i18n.percent(max(g, 0.0)) for g in found.latency_gap)
        lines.append(_t("latency_run", lang, gap=low if low == high else f"{low}–{high}"))
    elif found.latency:
        lines.append(_t("latency", lang))
    lines.append(_t("unit", lang, factor=f"{KDISKMARK_FACTOR:.4f}", percent=i18n.percent(1 - KDISKMARK_FACTOR)))
    compare = [_t("compare", lang, factor=f"{KDISKMARK_FACTOR:.4f}")]
    if found.example and pd.notna(found.example["mbps"]):
        ex = found.example
        compare.append(_t("compare_example", lang, test=i18n.test_label(ex["test"], ex["direction"], lang),
                          system=ex["system"],
                          mbps=i18n.number(ex["mbps"]), kdiskmark=i18n.number(ex["kdiskmark"])))
    if found.n > 1 and found.shown == "best":
        compare.append(_t("compare_mean", lang))
    lines.append(_joined(compare, lang))
    for mix in found.mixes:
        read = mix["read"]
        share = _t("mix_share", lang, read=read, write=100 - read) if read is not None else ""
        line = _t("mix", lang, test=i18n.label(mix["test"], lang, section="tests"), share=share,
                  read=read if read is not None else "R", write=100 - read if read is not None else "100 - R")
        if mix["total"] is not None and pd.notna(mix["total"]) and pd.notna(mix["weighted"]):
            line += ("" if lang == "ja" else " ") + _t("mix_figures", lang, weighted=i18n.number(mix["weighted"]),
                             total=i18n.number(mix["total"]),
                             statistic=i18n.label(found.shown, lang, section="cdm_notes_statistics"))
        lines.append(line)
    return lines[0] + "\n\n" + "\n".join(f"- {line}" for line in lines[1:])


def _joined(sentences, lang: str) -> str:
    """Sentences one after another: a space between them in English, none in Japanese."""
    return ("" if lang == "ja" else " ").join(s for s in sentences if s)


def best_of_caption(results: pd.DataFrame, manifests: pd.DataFrame, caption: str, *, lang: str) -> str:
    """The best-of table's caption, saying that a mix row is KDiskMark's weighted figure when the table has one."""
    rows = measured_rows(results, manifests)
    if rows.empty or not (rows["direction"] == "mix").any():
        return caption
    return caption + _t("best_of_mix", lang)
