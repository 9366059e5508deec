"""A ``--simultaneous`` run's directory, built without fio from a stored one-target run.

Written the way :mod:`iolab.engine.simultaneous` writes it: the manifest's ``simultaneous`` (targets, total
name) and ``options.simultaneous``; ``results.csv`` with each target's rows (column ``simultaneous`` =
``target``) and, per pass and step, the total rows made by the engine's own :func:`total_rows`; and one raw
``raw/<step>-<rep>.json`` per pass holding one fio job per target, named ``<step>@<target>``, with its own
``filename`` and ``new_group`` (the engine's job file). The jobs are a real fio job (``tests/fixtures/fio/
json_randread.out``) given the step's options and the target's figures of that pass from ``results.csv``.

The second target's pass ``r`` holds the first target's figures of the next pass (pass 1's in the last), so
each target's best pass differs and the totals differ from pass to pass.
"""
from __future__ import annotations

import configparser
import copy
import json
import shutil
from pathlib import Path

import pandas as pd

from iolab.engine import simultaneous

from cli_helpers import FIXTURES

SOURCE = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a"
REAL_JOB = FIXTURES / "fio" / "json_randread.out"
TARGETS = ("hdd", "hdd2")
TOTAL = simultaneous.total_name([type("T", (), {"name": n}) for n in TARGETS])


def _real_document() -> dict:
    text = REAL_JOB.read_text()
    return json.loads(text[text.index("{"):])


def _step_options(run_dir: Path, step: str) -> tuple[dict, dict]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string((run_dir / "jobs" / f"{step}.fio").read_text())
    return dict(parser["global"]), dict(parser[step])


def _job(template: dict, step: str, target: str, options: dict, row: pd.Series) -> dict:
    job = copy.deepcopy(template)
    job["jobname"] = simultaneous.job_name(type("S", (), {"id": step}), type("T", (), {"name": target}))
    job["job options"] = {**options, "filename": f"/srv/bench/{target}/iolab.dat", "new_group": "1"}
    measured, idle = job["read"], job["write"]
    measured.update(bw_bytes=int(row["bw_mbps"] * 1e6), bw=int(row["bw_mbps"] * 1e6 / 1024), iops=row["iops"],
                    io_bytes=int(row["io_bytes"]))
    measured["lat_ns"]["mean"] = row["lat_mean_us"] * 1000
    job["read"], job["write"] = (measured, idle) if row["direction"] == "read" else (idle, measured)
    return job


def build(dest: Path) -> Path:
    """The stored run made simultaneous on :data:`TARGETS`, in ``dest``; returns the run directory."""
    run_dir = dest / SOURCE.name
    shutil.copytree(SOURCE, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    first = manifest["targets"][0]
    manifest["targets"] = [{**first, "name": n, "spec": f"emulated:{n}", "path": f"/srv/bench/{n}"} for n in TARGETS]
    manifest["simultaneous"] = {"targets": list(TARGETS), "total": TOTAL}
    manifest["options"] = {**manifest.get("options", {}), "simultaneous": True}
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))

    rows = pd.read_csv(SOURCE / "results.csv")
    repeat = int(rows["rep"].max())
    second = rows.copy()
    mirrored = rows.set_index(["job", "rep"])
    for column in ("bw_mbps", "iops", "lat_mean_us", "io_bytes", "lat_max_us"):
        second[column] = [mirrored.loc[(job, rep % repeat + 1), column] for job, rep in zip(rows["job"], rows["rep"])]
    per_target = {TARGETS[0]: rows.assign(target=TARGETS[0]), TARGETS[1]: second.assign(target=TARGETS[1])}
    per_target = {n: frame.assign(simultaneous=simultaneous.TARGET_ROW) for n, frame in per_target.items()}
    out = []
    template = _real_document()
    for (job, rep), _ in rows.groupby(["job", "rep"], sort=False):
        frames = [f[(f["job"] == job) & (f["rep"] == rep)] for f in per_target.values()]
        out += frames + [simultaneous.total_rows(frames, TOTAL)]
        global_options, options = _step_options(run_dir, job)
        global_options.pop("filename", None)
        jobs = [_job(template["jobs"][0], job, name, options, frame.iloc[0])
                for name, frame in zip(TARGETS, frames)]
        doc = {**{k: v for k, v in template.items() if k != "jobs"}, "global options": global_options, "jobs": jobs}
        (run_dir / "raw" / f"{job}-{rep}.json").write_text(json.dumps(doc, indent=2))
    pd.concat(out, ignore_index=True).to_csv(run_dir / "results.csv", index=False)
    return run_dir
