"""``iolab import``: other tools' results as runs in the store, with their provenance.

Each run lands in ``<data>/<host>/<run_id>/`` like a measured one: ``manifest.json`` (status
``completed``, ``imported``: where from, which tool measured it, which files, what each figure is),
``results.csv`` with the contract columns, and ``raw/`` holding the imported files byte for byte.
Nothing is made up: a field the source does not give stays empty (no isolation, no device, no
repetitions beyond what the source states). The manifest's ``provenance`` sentence says
"imported from <path>, measured by <tool>, not by iolab"; reports show it.

Runs per argument: a fio JSON file or a folder of them is one run; a bench-fio tree is one run per
target directory; a CrystalDiskMark/KDiskMark text export is one run.

A text export's ``[Mix]`` line becomes a row with direction ``mix``, as a measured mixed test's one
figure (:mod:`iolab.analysis.mixfigure`), with ``rwmixread`` from the section's heading. What its
figure is depends on who wrote the text, and only partly matches a measured ``mix`` row:

* KDiskMark: ``bw_mbps``/``iops`` are ``(read x R + write x (100 - R)) / 100``, the same figure as a
  measured ``mix`` row's ``bw_mbps``/``iops``; its total (``bw_total_mbps``) is unknown, left empty.
* CrystalDiskMark and iolab's own ``cdm-text`` export: the figure is reads + writes (DiskSpd's
  total). ``bw_mbps``/``iops`` keep it as printed (so they are NOT a measured row's weighted figure)
  and ``bw_total_mbps``/``iops_total`` hold it too: compare those with a measured run's.

The imported text holds no read/write split, so neither figure can be made from the other.
"""
from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pandas as pd

from iolab import __version__
from iolab.core.errors import IolabError
from iolab.engine import store
from iolab.interop import cdmtext, fioimport

log = logging.getLogger(__name__)

#: host directory of imports whose machine is not named (``--host``)
UNKNOWN_HOST = "imported"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc


def _is_text_export(path: Path) -> bool:
    if path.suffix.lower() == ".json" or not path.is_file():
        return False
    return cdmtext.looks_like(_read_text(path)[:4000])


def import_paths(paths, *, data_dir="data", label=None, host=None) -> list[Path]:
    """Import each of ``paths`` (files or trees); returns the new run directories, in order.

    Everything is read and checked before anything is written, so a bad file leaves no run behind.
    """
    plans = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise IolabError("no such file or directory", context=str(path))
        if _is_text_export(path):
            plans.append(_cdm_plan(path, label=label, host=host))
        else:
            plans.extend(_fio_plans(path, label=label, host=host))
    return [_write(plan, data_dir) for plan in plans]


# ------------------------------------------------------------------------------------------- fio

def _fio_plans(path: Path, *, label, host) -> list[dict]:
    files = []
    for file, relpath in fioimport.find_files(path):
        text = _read_text(file)
        if not fioimport.is_fio_output(text):
            if path.is_file():
                raise IolabError("neither fio JSON output nor a CrystalDiskMark/KDiskMark text export",
                                 context=str(file))
            log.warning("%s: not fio JSON output; left out of the import", file)
            continue
        files.append(fioimport.read_file(file, relpath))
    if not files:
        raise IolabError("no fio JSON output at or below it", context=str(path))
    groups: dict = {}
    for item in files:  # bench-fio: one run per target directory
        groups.setdefault(item.target, []).append(item)
    return [_fio_plan(path, group, target, label=label, host=host) for target, group in groups.items()]


def _fio_plan(path: Path, files, target, *, label, host) -> dict:
    names = fioimport.test_names(files)
    frames = []
    for item in files:
        frame = item.frame.copy()
        frame["test"] = [names[(item.relpath, job)] for job in frame["job"]]
        frame["rep"] = 1
        frame["raw"] = f"raw/{item.relpath}"
        frame["target"] = target
        frames.append(frame)
    results = pd.concat(frames, ignore_index=True)
    bench = any(item.bench_fio for item in files)
    versions = sorted({item.fio_version for item in files if item.fio_version})
    stamps = [item.timestamp_ms for item in files if item.timestamp_ms]
    tool = "bench-fio" if bench else "fio"
    fio_versions = "fio " + ", ".join(versions) if versions else "fio"
    measured_by = f"bench-fio with {fio_versions}" if bench else fio_versions
    times = [pd.Timestamp(t, unit="ms", tz="UTC").isoformat() for t in (min(stamps), max(stamps))] if stamps else None
    return {
        "recipe": "bench-fio" if bench else "fio", "tool": measured_by, "source": path,
        "description": f"{tool} output ({len(files)} fio JSON file{'s' if len(files) != 1 else ''}), imported",
        "label": label or target or (path.stem if path.is_file() else path.name),
        "host": host, "results": results, "copies": [(item.path, item.relpath) for item in files],
        "manifest": {
            "started": None, "ended": None,  # fio records when each output was written, not when a run began
            "versions": {"fio": ", ".join(f"fio-{v}" for v in versions) or None},
            "targets": [{"spec": target, "kind": "bench-fio target"}] if target else [],
            "imported": {"format": sorted({f"fio {item.output_format}" for item in files}),
                         "fio_output_times": times,  # fio's own timestamps: the first and last output written
                         "figures": "as iolab.engine.fio.parse_output reads fio's JSON: bw_mbps 10^6 B/s, "
                                    "latency lat_ns (total) in us, percentiles of lat or clat as fio recorded"},
        },
    }


# ------------------------------------------------------------------------------ CrystalDiskMark

def _cdm_plan(path: Path, *, label, host) -> dict:
    export = cdmtext.parse(_read_text(path), context=str(path))
    rows = []
    for row in export.rows:
        latency = row.pop("latency_us")
        row.pop("line")
        if export.tool == "KDiskMark":
            row["clat_mean_us"] = latency  # fio's completion latency, as KDiskMark shows it
        else:
            row["lat_mean_us"] = latency
        if row["direction"] == "mix":
            row.update(_mix_columns(export, row))
        rows.append({**row, "rep": 1, "raw": f"raw/{path.name}", "target": export.drive, "tool": export.tool})
    results = pd.DataFrame(rows)
    recipe = "crystaldiskmark3" if export.layout == "3.x" else "crystaldiskmark"
    figures = ("MB/s = 10^6 B/s as the tool prints it; "
               + ("latency: fio's mean completion latency (clat), in clat_mean_us"
                  if export.tool == "KDiskMark" else "latency: the tool's mean latency per I/O, in lat_mean_us"
                  if export.layout == "7.x/8.x" else "no latency in this layout"))
    time = export.footer.get("Time", "")
    runtime = _seconds_in(time, "Measure") if time else _seconds_in(export.footer.get("Test", ""), "Measure")
    pause = _seconds_in(time or export.footer.get("Test", ""), "Interval")
    return {
        "recipe": recipe, "tool": export.name, "source": path, "host": host,
        "description": f"{export.name} text export, imported",
        "label": label or path.stem, "results": results, "copies": [(path, path.name)],
        "manifest": {
            "started": None, "ended": None,
            "versions": {"fio": export.fio_version} if export.fio_version else {},
            "system": {"os": export.footer.get("OS")} if export.footer.get("OS") else {},
            "options": {"size": export.size, "repeat": export.passes, "runtime": runtime, "pause": pause,
                        "preset": export.footer.get("Profile")},
            "targets": [{"spec": export.drive, "kind": "drive"}] if export.drive else [],
            "imported": {"format": f"{export.tool} text export ({export.layout} layout)",
                         "statistic": export.statistic, "mix": export.mix, "footer": export.footer,
                         "date": export.footer.get("Date"), "source_run": export.source_run,
                         "figures": figures},
        },
    }


def _mix_columns(export: cdmtext.CdmText, row: dict) -> dict:
    """A ``[Mix]`` row's read share, and its total where the tool's figure is the total (module docstring)."""
    found = re.search(r"Read\s*(\d+)\s*%", export.mix or "")
    extra = {"rwmixread": int(found.group(1)) if found else None}
    if export.tool in ("CrystalDiskMark", "iolab"):  # reads + writes; KDiskMark's is the weighted figure
        extra.update(bw_total_mbps=row["bw_mbps"], iops_total=row["iops"])
    return extra


def _seconds_in(text: str, word: str) -> float | None:
    found = re.search(word + r"\s*[:=]?\s*(\d+(?:\.\d+)?)\s*sec", text or "")
    return float(found.group(1)) if found else None


# ------------------------------------------------------------------------------------- writing

def _write(plan: dict, data_dir) -> Path:
    source = plan["source"].resolve()
    if plan["tool"].startswith("iolab "):  # iolab's own text export read back: only the figures it shows
        provenance = (f"imported from {source}, a CrystalDiskMark-layout text export of the iolab run "
                      f"{plan['manifest']['imported'].get('source_run')} (only the figures it shows)")
    else:
        provenance = f"imported from {source}, measured by {plan['tool']}, not by iolab"
    # the fields a measured run has, present and empty where the source gives nothing (readers expect them)
    manifest = {"options": {}, "system": {}, "versions": {}, "targets": [], **plan["manifest"]}
    manifest["imported"] = {"from": str(source), "tool": plan["tool"], "by": f"iolab {__version__} import",
                            "at": store.utcnow(), "files": [rel for _, rel in plan["copies"]],
                            **manifest.get("imported", {})}
    # ``tool`` is the sentence: reports print a recipe's tool as what ran (iolab.report.toolnames)
    run = store.Run.create(data_dir, recipe=plan["recipe"], label=plan["label"], host=plan["host"] or UNKNOWN_HOST,
                           tool=provenance, provenance=provenance, recipe_description=plan["description"],
                           isolation={}, **manifest)
    try:
        for path, relpath in plan["copies"]:
            target = run.path / "raw" / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)  # byte for byte
        run.set_results(_result_frame(plan["results"], run.manifest))
        run.update(status="completed", reason=None)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)  # a half import is no run
        raise
    log.info("%s: %s", run.path, provenance)
    return run.path


def _result_frame(frame: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "run_id", manifest["run_id"])
    if "host" in frame:  # a client/server run keeps each client's host name
        frame["host"] = frame["host"].where(frame["host"].notna(), manifest["host"])
    else:
        frame["host"] = manifest["host"]
    frame["label"] = manifest["label"]
    frame["recipe"] = manifest["recipe"]
    frame["isolation"] = None
    if "tool" not in frame:
        frame["tool"] = "fio"
    frame["valid"] = frame["error"].isna() if "error" in frame else True
    frame["flags"] = None
    if "direction" in frame:
        frame["direction"] = frame["direction"].where(frame["direction"].notna(), None)
    return store.order_columns(frame.drop(columns=[c for c in ("groupid",) if c in frame]))


def describe(run_dir: Path) -> str:
    """One line for the CLI: the run directory and what it holds."""
    manifest = store.read_manifest(run_dir)
    rows = store.load(run_dir)
    tests = rows["test"].nunique() if not rows.empty else 0
    return f"{run_dir} ({tests} test{'s' if tests != 1 else ''}; {manifest['provenance']})"

