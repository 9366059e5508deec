"""``iolab run --log-interval MS``: fio's bandwidth, IOPS and latency logs of every test pass, kept in ``raw/``.

Each job file then asks fio for its logs (``write_bw_log``, ``write_iops_log``, ``write_lat_log``
named after the step, ``log_avg_msec=MS``: each sample is the mean over MS milliseconds). fio runs
in the run's ``raw/`` directory (``raw/<target>/`` for several targets), the one directory the
confinement lets it write besides the targets, so it writes ``<step>_bw.1.log`` there (one file per
job, ``.2.log`` ... for numjobs > 1; ``write_lat_log`` writes ``lat``, ``clat`` and ``slat``). After
each pass :func:`keep_pass` renames them beside the pass's JSON, ``<step>-<rep>_bw.1.log``
(``-warmup`` for the warm-up), so no pass overwrites another. ``iolab export --format fio-plot``
copies them under fio-plot's names (:mod:`iolab.interop.exports`); :func:`bandwidth_series` reads
them for the report's over-time chart.
"""
from __future__ import annotations

import copy
import logging
import re
from pathlib import Path

import pandas as pd

from iolab.analysis.fiolog import FIO_LOG_UNIT, read_log
from iolab.core.errors import IolabError, run_option

log = logging.getLogger(__name__)

#: the logs fio writes for the three options (``write_lat_log`` writes three)
KINDS = ("bw", "iops", "lat", "clat", "slat")
#: a log as fio names it (``<step>_bw.1.log``) and as iolab keeps it (``<step>-<rep>_bw.1.log``)
_KEPT = re.compile(r"^(?P<step>.+)-(?P<rep>warmup|\d+)_(?P<kind>bw|iops|lat|clat|slat)\.(?P<job>\d+)\.log$")


def interval_ms(value) -> int | None:
    """``--log-interval``: whole milliseconds, at least 1; None when not given."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise IolabError(f"--log-interval {value!r}: give whole milliseconds, e.g. 500",
                         context=run_option("log_interval")) from None
    if number <= 0:
        raise IolabError(f"--log-interval {value!r}: the interval must be at least 1 ms",
                         context=run_option("log_interval"))
    return number


def check_recipe(recipe, ms: int) -> None:
    """Refuse what cannot log per test: engines that run fio their own way, job files, tests with own logs."""
    where = run_option("log_interval")
    if recipe.engine != "fio":
        raise IolabError(f"--log-interval {ms}: the {recipe.engine} engine runs its tests its own way "
                         "(the sustained-write recipe keeps its own per-second log)", context=where)
    if recipe.jobfile is not None:
        raise IolabError(f"--log-interval {ms}: a .fio job file names its own logs (write_bw_log=...)",
                         context=where)
    for step in recipe.steps():
        own = [k for k in ("write_bw_log", "write_iops_log", "write_lat_log", "log_avg_msec")
               if k in step.options or k in recipe.fio]
        if own:
            raise IolabError(f"--log-interval {ms}: test {step.test!r} sets {', '.join(own)} itself",
                             context=where)


def applied(recipe, value):
    """``recipe`` with ``--log-interval`` (checked) in its defaults; ``recipe`` itself when not given."""
    ms = interval_ms(value)
    if ms is None:
        return recipe
    check_recipe(recipe, ms)
    recipe = copy.deepcopy(recipe)
    recipe.defaults["log_interval_ms"] = ms  # recorded in the manifest's options (iolab.engine.runner)
    return recipe


def fio_options(step_id: str, ms: int) -> dict:
    """The job options that make fio write ``<step_id>_{bw,iops,lat,clat,slat}.<job>.log`` in its directory."""
    return {"write_bw_log": step_id, "write_iops_log": step_id, "write_lat_log": step_id, "log_avg_msec": ms}


def with_logs(recipe, step, options: dict) -> dict:
    """A step's job options plus the log options when the run has ``--log-interval``.

    Added to the job file the run writes, not to the one :mod:`iolab.engine.jobfile.gate` checks: the logs
    are iolab's own files, in the run's ``raw/`` (fio's working directory), which the gate cannot
    place before the run directory exists and the confinement lets fio write anyway."""
    ms = recipe.log_interval_ms
    return {**options, **fio_options(step.id, int(ms))} if ms else options


def keep_pass(recipe, directory: Path, step_id: str, rep: int) -> list[Path]:
    """Rename the logs fio just wrote for ``step_id`` to the pass's names (nothing without ``--log-interval``)."""
    if not recipe.log_interval_ms:
        return []
    pass_name = "warmup" if rep == 0 else str(rep)
    written = re.compile(rf"^{re.escape(step_id)}_(?P<kind>{'|'.join(KINDS)})\.(?P<job>\d+)\.log$")
    kept = []
    for path in sorted(Path(directory).iterdir()):
        found = written.match(path.name)
        if not found:
            continue
        target = path.with_name(f"{step_id}-{pass_name}_{found['kind']}.{found['job']}.log")
        path.replace(target)
        kept.append(target)
    if not kept:
        log.warning("fio wrote no time-series log for %s pass %s in %s", step_id, pass_name, directory)
    return kept


def kept_logs(run_dir) -> list[dict]:
    """Every kept log of a run: target (None for a one-target run), step, rep (0: warm-up), kind, job, path."""
    raw = Path(run_dir) / "raw"
    found = []
    if not raw.is_dir():
        return found
    for path in sorted(raw.rglob("*.log")):
        match = _KEPT.match(path.name)
        if not match:
            continue
        rel = path.relative_to(raw).parts
        found.append({"target": rel[0] if len(rel) > 1 else None, "step": match["step"],
                      "rep": 0 if match["rep"] == "warmup" else int(match["rep"]),
                      "kind": match["kind"], "job": int(match["job"]), "path": path})
    return found


def bandwidth_series(run_dir) -> pd.DataFrame:
    """MB/s (10^6 B/s) over seconds of every measured pass (warm-up left out), jobs of a pass summed per
    sample (their n-th samples): columns target, step, rep, direction, sample, t_s, mbps. Empty without logs."""
    frames = []
    for entry in kept_logs(run_dir):
        if entry["kind"] != "bw" or entry["rep"] == 0:
            continue
        try:
            frame = read_log(entry["path"].read_text(), context=str(entry["path"]))
        except (OSError, IolabError) as exc:
            log.warning("bandwidth log left out: %s", exc)
            continue
        frame["mbps"] = frame.pop("value") * FIO_LOG_UNIT / 1e6
        frame["sample"] = frame.groupby("direction").cumcount()  # the n-th sample of each job: summed across jobs
        frames.append(frame.assign(target=entry["target"], step=entry["step"], rep=entry["rep"]))
    columns = ["target", "step", "rep", "direction", "sample", "t_s", "mbps"]
    if not frames:
        return pd.DataFrame(columns=columns)
    joined = pd.concat(frames, ignore_index=True)
    summed = joined.groupby(["target", "step", "rep", "direction", "sample"], dropna=False,
                            as_index=False).agg(t_s=("t_s", "mean"), mbps=("mbps", "sum"))
    return summed[columns].sort_values(["target", "step", "rep", "t_s"], na_position="first").reset_index(drop=True)
