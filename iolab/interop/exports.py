"""``iolab export``: a run written the way other tools read it.

``fio-plot``: fio-plot reads a folder of fio JSON files, one per (rw, iodepth, numjobs), and takes
those three from each file's ``job options`` (bench-fio's layout names the files after them:
``<bs>/<rw>-<iodepth>-<numjobs>.json``). A run of N passes holds N files per test, which one fio-plot
folder cannot tell apart (fio-plot's issue #116), so each pass gets its folder (``warmup``, ``pass-1``
... ``pass-N``) and ``best`` holds, per test, the pass with the highest bandwidth (CrystalDiskMark's
statistic). Each file is fio's last JSON document of that pass (text fio printed around it left out)
with its ``job options`` completed by fio's own defaults where the job file did not set them
(``rw=read``, ``iodepth=1``, ``numjobs=1``, ``bs=4k``): fio-plot skips files without them. A run of
several targets gets one such tree per target. A ``--simultaneous`` run (:mod:`iolab.engine.simultaneous`)
holds one fio JSON per pass with one job per target (``<step>@<target>``): each target's tree gets its own
job only (its best pass is its own), and a folder ``total-<a+b>`` holds the whole JSON of each pass, which
fio-plot reads as the targets together (it adds up their bandwidth and IOPS, as iolab's total row does, but
averages their mean latencies unweighted where iolab weights them by IOPS; the README says so). A run with
``--log-interval`` kept fio's bw/iops/lat logs
of each pass (:mod:`iolab.engine.timelogs`): they are copied beside that pass's JSON under bench-fio's
names, ``<rw>-iodepth-<iodepth>-numjobs-<numjobs>_bw.1.log`` ..., which ``fio-plot -g`` reads.

``cdm-text``: the run's figures in CrystalDiskMark 8's text layout (:mod:`iolab.interop.cdmtext`),
one file per target (a ``--simultaneous`` run's total row is no drive and gets no file: each target's text
says which others ran beside it, and a warning says the total was left out): the best pass (or the mean of
the passes) of each test, MB/s = 10^6 B/s, latency = iolab's mean total latency (fio's ``lat``). A mixed
test gets one line under ``[Mix]``, the figure CrystalDiskMark 8 shows as far as is known: the TOTAL of its reads and writes (CrystalDiskMark
runs one DiskSpd ``-w<write %>`` job per mixed row, and DiskSpd's single figure for it is the total),
i.e. read + write MB/s and IOPS and their IOPS-weighted mean latency, computed from fio's read and
write rows of each pass. It is not the figure of results.csv's ``mix`` row (KDiskMark's
``(read x R + write x (100 - R)) / 100``, :mod:`iolab.analysis.mixfigure`; that row's
``bw_total_mbps``/``iops_total`` are this export's figures); the ``mix`` row is never added in (it
would count the test twice). A line under the text's header says which figure it holds. A run that
holds only ``mix`` rows (an imported text export) is written with the figure those rows hold, and
the header line says that instead.
"""
from __future__ import annotations

import glob
import json
import logging
import re
import shutil
from pathlib import Path

import pandas as pd

from iolab import __version__
from iolab.core.errors import IolabError
from iolab.core.files import atomic_write
from iolab.core.units import human_size
from iolab.engine import simultaneous, store
from iolab.engine.fio.text import scan_documents
from iolab.interop import cdmtext

log = logging.getLogger(__name__)

FORMATS = ("fio-plot", "cdm-text")
#: fio's defaults for what fio-plot needs from ``job options``
FIO_DEFAULTS = {"rw": "read", "iodepth": "1", "numjobs": "1", "bs": "4k"}
_RAW = re.compile(r"^(?P<step>.+)-(?P<rep>warmup|\d+)\.json$")
#: a time-series log's name after its stem (iolab.engine.timelogs)
_LOG = re.compile(r"^_(bw|iops|lat|clat|slat)\.\d+\.log$")
#: the fio-plot folder of a simultaneous run's total (``total-sda+sdb``: no target name holds a ``+``)
TOTAL_FOLDER = "total-{}"


def export(run_dir, out_dir, *, fmt: str, statistic: str = "best") -> list[Path]:
    """Write ``run_dir`` as ``fmt`` into ``out_dir``; returns what was written (folders or files)."""
    run_dir = Path(run_dir)
    manifest = store.read_manifest(run_dir)
    if fmt == "fio-plot":
        return fio_plot(run_dir, Path(out_dir), manifest)
    if fmt == "cdm-text":
        return cdm_text(run_dir, Path(out_dir), manifest, statistic=statistic)
    raise IolabError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})", context="export")


# ------------------------------------------------------------------------------------- fio-plot

def _raw_files(run_dir: Path) -> list[tuple[str | None, str, str, Path]]:
    """(target or None, step, pass name, path) of every raw fio JSON file of the run."""
    found = []
    for path in sorted((run_dir / "raw").rglob("*.json")):
        match = _RAW.match(path.name)
        if not match:
            continue
        rel = path.relative_to(run_dir / "raw").parts
        target = rel[0] if len(rel) > 1 else None
        rep = match["rep"]
        found.append((target, match["step"], "warmup" if rep == "warmup" else f"pass-{int(rep)}", path))
    return found


def _document(path: Path) -> dict | None:
    docs = scan_documents(path.read_text(encoding="utf-8", errors="replace")).docs
    return docs[-1] if docs else None


def _completed(doc: dict) -> tuple[dict, dict]:
    """``doc`` with every job's options completed by fio's defaults; the first job's options."""
    doc = json.loads(json.dumps(doc))
    global_options = doc.get("global options") or {}
    jobs = doc.get("jobs") or doc.get("client_stats") or []
    first = {}
    for job in jobs:
        options = job.setdefault("job options", {})
        for key, value in FIO_DEFAULTS.items():
            if key not in options and key not in global_options:
                options[key] = value
        if not first:
            first = {**global_options, **options}
    if "client_stats" in doc:  # fio-plot reads client/server options from "global options"
        for key, value in FIO_DEFAULTS.items():
            global_options.setdefault(key, first.get(key, value))
        doc["global options"] = global_options
    return doc, first


def fio_plot(run_dir: Path, out_dir: Path, manifest: dict) -> list[Path]:
    files = _raw_files(run_dir)
    if not files:
        raise IolabError("no raw fio JSON files (raw/<test>-<rep>.json) in the run", context=str(run_dir))
    written: dict[Path, str] = {}
    best: dict[tuple, tuple[float, Path, dict, str]] = {}
    for target, step, pass_name, path, doc in _passes(files, manifest.get("simultaneous")):
        doc, options = _completed(doc)
        name = f"{options['rw']}-{options['iodepth']}-{options['numjobs']}.json"
        where = (Path(target) if target else Path()) / pass_name / str(options["bs"]) / name
        _put(out_dir, where, doc, step, written)
        _copy_logs(path, out_dir / where.parent, options)
        if pass_name.startswith("pass-"):
            bw = _bandwidth(doc)
            key = (target, step)
            if key not in best or bw > best[key][0]:
                best[key] = (bw, where, doc, step)
    for (target, _), (_, where, doc, step) in best.items():
        stat = (Path(target) if target else Path()) / "best" / Path(*where.parts[-2:])
        _put(out_dir, stat, doc, step, written)
        _copy_logs(out_dir / where, out_dir / stat.parent, None)
    together = manifest.get("simultaneous")
    if together:
        log.info("simultaneous run: one folder per target (its own fio job); %s holds each pass's whole fio "
                 "JSON, whose latency fio-plot averages unweighted (iolab's total row weights it by IOPS)",
                 TOTAL_FOLDER.format(together["total"]))
    atomic_write(out_dir / "README.txt", _readme(manifest))
    return sorted({out_dir / p.parent for p in written})


def _passes(files, together: dict | None):
    """(folder, step, pass name, raw path, fio's JSON document) of each raw file; a simultaneous run's
    (``together``: the manifest's ``simultaneous``) file once per target with that target's job only, and
    once whole in the total's folder."""
    for target, step, pass_name, path in files:
        doc = _document(path)
        if doc is None:
            log.warning("%s: no complete fio JSON document; left out of the export", path)
            continue
        if not together:
            yield target, step, pass_name, path, doc
            continue
        for name in together.get("targets") or []:
            jobs = [job for job in doc.get("jobs") or [] if _target_of(job) == name]
            if jobs:
                yield name, step, pass_name, path, {**doc, "jobs": jobs}
            else:
                log.warning("%s: no job of target %s (%s@%s); left out of its folder", path, name, step, name)
        yield TOTAL_FOLDER.format(together["total"]), step, pass_name, path, doc


def _target_of(job: dict) -> str:
    """The target of a simultaneous run's fio job ``<step>@<target>`` (:func:`iolab.engine.simultaneous.job_name`;
    a target's name holds no ``@``)."""
    return str(job.get("jobname", "")).rpartition("@")[2]


def _put(out_dir: Path, where: Path, doc: dict, step: str, written: dict) -> None:
    if where in written:
        raise IolabError(f"tests {written[where]!r} and {step!r} have the same rw, iodepth, numjobs and bs: "
                         "fio-plot could not tell them apart", context=str(out_dir / where))
    written[where] = step
    atomic_write(out_dir / where, json.dumps(doc, indent=2) + "\n")


def _copy_logs(source: Path, dest: Path, options: dict | None) -> None:
    """The time-series logs kept beside ``source`` (raw ``<step>-<rep>.json``: ``<step>-<rep>_bw.1.log`` ...;
    an exported JSON: bench-fio's names) copied into ``dest`` under bench-fio's names."""
    stem = source.name.removesuffix(".json")
    if options is not None:
        name = f"{options['rw']}-iodepth-{options['iodepth']}-numjobs-{options['numjobs']}"
    else:  # <rw>-<iodepth>-<numjobs>.json of an exported pass, copied to best/
        rw, iodepth, numjobs = stem.rsplit("-", 2)
        stem = name = f"{rw}-iodepth-{iodepth}-numjobs-{numjobs}"
    for log_file in sorted(source.parent.glob(f"{glob.escape(stem)}_*.log")):
        found = _LOG.match(log_file.name[len(stem):])
        if found:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log_file, dest / f"{name}{found.group(0)}")


def _bandwidth(doc: dict) -> float:
    jobs = doc.get("jobs") or doc.get("client_stats") or []
    return float(sum(job.get(d, {}).get("bw_bytes", 0) for job in jobs for d in ("read", "write", "trim")
                     if job.get("jobname") != "All clients"))


def _readme(manifest: dict) -> str:
    return (f"fio-plot folders of iolab run {manifest['run_id']} ({manifest.get('label')}), written by iolab "
            f"{__version__}.\nOne folder per pass (warmup, pass-1 ...) and best (per test, the pass with the "
            "highest bandwidth); below each, bench-fio's <bs>/<rw>-<iodepth>-<numjobs>.json.\n"
            "Each file is fio's JSON of that pass with job options completed by fio's defaults "
            "(rw=read, iodepth=1, numjobs=1, bs=4k) where the job file did not set them.\n"
            "Example: fio-plot -i best/4k -T title -l -r randread -d 1 32 -n 1\n"
            "With --log-interval, each folder also holds fio's logs under bench-fio's names "
            "(<rw>-iodepth-<iodepth>-numjobs-<numjobs>_bw.1.log ...), for fio-plot -g.\n"
            + _simultaneous_readme(manifest))


def _simultaneous_readme(manifest: dict) -> str:
    together = manifest.get("simultaneous")
    if not together:
        return ""
    total = TOTAL_FOLDER.format(together["total"])
    return (f"\nThe targets {', '.join(together.get('targets') or [])} were measured at the same time (iolab run "
            "--simultaneous: one fio per pass, one job per target).\nEach target's folder holds its own job "
            f"only; its best is its own best pass.\n{total}/ holds each pass's whole fio JSON (every target's "
            "job): fio-plot adds their bandwidth and IOPS up, as iolab's total row does, but its latency is the "
            "plain mean of the targets' mean latencies (iolab's total weights them by IOPS); its best is the "
            "pass with the highest total bandwidth.\n")


# ------------------------------------------------------------------------------------- cdm-text

MIXED = ("rw", "randrw", "readwrite")
#: results.csv's direction of a mixed test's one (KDiskMark) figure
MIX_ROW = "mix"


def _rw_of(manifest: dict) -> dict[str, set]:
    """Each test's fio rw modes (a test's read and write steps are two entries of the manifest)."""
    found: dict[str, set] = {}
    for step in manifest.get("tests") or []:
        if isinstance(step, dict) and step.get("rw"):
            found.setdefault(step.get("test"), set()).add(str(step["rw"]))
    return found


def _random(test: str, modes: set) -> bool:
    """Random or sequential: iolab's CrystalDiskMark names say it (RND/SEQ), else the test's fio rw modes."""
    name = test.removeprefix("MIX-")
    if name.startswith(("RND", "SEQ")):
        return name.startswith("RND")
    return any(m.startswith("rand") for m in modes)


def _mix_of(run_dir: Path) -> dict[str, int]:
    import yaml
    try:
        recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return {t.get("name"): t.get("rwmixread") for t in recipe.get("tests") or []
            if isinstance(t, dict) and t.get("rwmixread") is not None}


def _per_pass(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per pass of a test: bandwidth and IOPS summed over directions, latency IOPS-weighted."""
    rows = rows.assign(weighted=rows["lat_mean_us"] * rows["iops"])
    per = rows.groupby("rep").agg(bw_mbps=("bw_mbps", "sum"), iops=("iops", "sum"), weighted=("weighted", "sum"))
    per["lat_mean_us"] = per["weighted"] / per["iops"]
    return per


def _figure(per: pd.DataFrame, statistic: str) -> dict:
    if statistic == "best":
        return per.loc[per["bw_mbps"].idxmax()].to_dict()
    return per.mean().to_dict()


def _sections_of(rows: pd.DataFrame, *, mixed: bool) -> list[tuple[str, pd.DataFrame]]:
    """(section, rows whose figure it shows) of one test. A mixed test (fio rw mode, or a ``mix`` row) has one
    ``Mix`` line from its read and write rows (their total, CrystalDiskMark's figure); its ``mix`` row, the
    weighted figure, is left out so nothing is counted twice. Only when there are no read/write rows (a run
    imported from a text export) is the ``mix`` row itself the line."""
    directions = rows["direction"].fillna("").astype(str)
    if mixed or (directions == MIX_ROW).any():
        parts = rows[directions.isin(("read", "write"))]
        return [("Mix", parts if not parts.empty else rows[directions == MIX_ROW])]
    return [(d.capitalize(), r) for d, r in rows.groupby(directions)]


def cdm_text(run_dir: Path, out_dir: Path, manifest: dict, *, statistic: str) -> list[Path]:
    if statistic not in ("best", "mean"):
        raise IolabError(f"statistic {statistic!r}: best or mean", context="export --statistic")
    results = store.load(run_dir)
    results = results[(results["rep"].fillna(0).astype(int) > 0) & results["valid"].fillna(True).astype(bool)]
    results = _without_total(results, manifest)
    results = results.dropna(subset=["bs", "iodepth", "numjobs", "bw_mbps"])
    if results.empty:
        raise IolabError("no result with a block size, queue depth and thread count to write", context=str(run_dir))
    rws, mixes = _rw_of(manifest), _mix_of(run_dir)
    written = []
    targets = results["target"].fillna("").unique() if "target" in results else [""]
    for target in targets:
        part = results[results["target"].fillna("") == target] if "target" in results else results
        sections = {"Read": [], "Write": [], "Mix": []}
        for test, rows in part.groupby("test", sort=False):
            modes = rws.get(test, set())
            groups = _sections_of(rows, mixed=bool(modes & set(MIXED)))
            for heading, group in groups:
                if heading not in sections:
                    continue
                first = group.iloc[0]
                figure = _figure(_per_pass(group), statistic)
                sections[heading].append(cdmtext.result_line(
                    random=_random(str(test), modes),
                    bs=first["bs"], iodepth=first["iodepth"], numjobs=first["numjobs"],
                    bw_mbps=figure["bw_mbps"], iops=figure["iops"], lat_us=figure["lat_mean_us"]))
        if any(sections.values()):
            copied = any(set(rows["direction"].dropna()) == {MIX_ROW} for _, rows in part.groupby("test"))
            note = MIX_COPIED if copied else MIX_NOTE
            written.append(_write_text(out_dir, manifest, target, sections, statistic, mixes, part, len(targets) > 1,
                                       note, _beside(manifest, target)))
    return written


def _without_total(results: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    """``results`` without a ``--simultaneous`` run's total rows (column ``simultaneous`` = ``total``, flag
    ``simultaneous_total``): the sum of several drives is no drive CrystalDiskMark's text could show."""
    total = pd.Series(False, index=results.index)
    if "simultaneous" in results:
        total |= results["simultaneous"].astype(str) == simultaneous.TOTAL_ROW
    if "flags" in results:
        total |= results["flags"].map(lambda v: isinstance(v, str) and simultaneous.TOTAL_FLAG in v.split(";"))
    if total.any():  # a warning: the CLI shows it by default
        names = sorted(set(results.loc[total, "target"].dropna().astype(str)))
        log.warning("simultaneous run: the total %s is left out of the CrystalDiskMark text (one file per drive; "
                    "iolab report shows it)", ", ".join(names) or (manifest.get("simultaneous") or {}).get("total"))
    return results[~total]


def _beside(manifest: dict, target: str) -> list[str]:
    """The header line of a simultaneous run's target: the drives measured at the same time."""
    others = [t for t in (manifest.get("simultaneous") or {}).get("targets") or [] if t != target]
    if not others:
        return []
    return [f"* Measured at the same time as {', '.join(others)} (iolab run --simultaneous);",
            "  figures are this drive's own, the total is not written"]


#: the header line of a text with a [Mix] section: which of the two tools' figures it holds
MIX_NOTE = ("* Mix = read + write MB/s and IOPS (latency IOPS-weighted), as CrystalDiskMark;\n"
            "  not KDiskMark's (read x R + write x (100 - R)) / 100")


MIX_COPIED = "* Mix = the figure of the imported text's [Mix] line, as the tool that measured it showed it"


def _write_text(out_dir, manifest, target, sections, statistic, mixes, part, several, mix_note=MIX_NOTE,
                more_notes=()) -> Path:
    mix = sorted({v for k, v in mixes.items() if k in set(part["test"])})
    headings = {"Read": "[Read]", "Write": "[Write]",
                "Mix": f"[Mix] Read {mix[0]}%/Write {100 - mix[0]}%" if len(mix) == 1 else "[Mix]"}
    sections = {headings[k]: v for k, v in sections.items()}
    options = manifest.get("options") or {}
    system = manifest.get("system") or {}
    tgt = next((t for t in manifest.get("targets") or [] if t.get("name") in (target, None) or not target), {})
    size = options.get("size")
    passes = int(part["rep"].max())
    footer = {
        "Profile": f"{manifest.get('recipe')} ({options.get('preset') or 'default'})",
        "Test": f"{human_size(size) if isinstance(size, (int, float)) else size or '?'} (x{passes}) "
                f"[{tgt.get('path') or tgt.get('spec') or target or '?'}]",
        "Mode": f"isolation {(manifest.get('isolation') or {}).get('mode') or '?'}",
        "Time": f"Measure {options.get('runtime') or '?'} sec / Interval {options.get('pause') or 0} sec",
        "Date": manifest.get("started"),
        "OS": f"{system.get('os') or '?'} [{system.get('kernel') or '?'}]",
    }
    notes = ([mix_note] if sections.get(headings["Mix"]) else []) + list(more_notes)
    text = cdmtext.render(sections, iolab_version=__version__, run_id=manifest["run_id"],
                          fio_version=(manifest.get("versions") or {}).get("fio"), statistic=statistic, footer=footer,
                          notes=notes)
    name = f"{manifest['run_id']}-{store.safe_name(target)}.txt" if several else f"{manifest['run_id']}.txt"
    path = Path(out_dir) / name
    atomic_write(path, text)
    return path
