"""``iolab run ... --simultaneous``: a run's targets measured at the same time (e.g. all members of an array).

Each step (test x direction) and pass is **one fio process** running one job per target, in one job
file ``jobs/<step>.fio`` (``[global]`` the recipe's, then a section ``[<step>@<target>]`` per target
with its own ``filename`` and ``new_group``, so fio reports every target apart) and one raw output
``raw/<step>-<rep>.json``. fio starts every job together (no ``stonewall`` between them), inside the
run's one confinement, which already names every target of the run and nothing more.

Rows: each target keeps its own rows as in a run one target after another (``target`` its name, the
job renamed back to the step), and each pass gains a **total** row per direction: ``target`` is the
targets' names joined by ``+`` (``sda+sdb``; no target name can hold a ``+``, :func:`total_name`), the
new column ``simultaneous`` is ``total`` there and ``target`` on the targets' rows, so a reader tells
them apart without knowing the names, and its flags hold ``simultaneous_total`` (a flag that describes,
as ``fleet_aggregate``: reports leave the row out of the systems they set side by side). Throughput and
IOPS are the targets' I/O over the longest runtime, the rule of a row whose jobs fio reported one by one
(:mod:`iolab.engine.fio.parse`): the sum of the rates when the jobs ran for the same time (time-based), less
when one ended first; bytes and CPU are sums; the mean latency is weighted by each target's I/Os; the
maximum latency is the largest, and percentiles stay empty (a percentile of a union is not found from the
parts' percentiles). A total over a target with an error carries the error.
The manifest's ``simultaneous`` says which targets ran together and the total's name.

Refused (naming the option): one target, a recipe whose engine is not fio, a ``.fio`` job file (its
jobs are its own), ``--log-interval`` (each job's logs would share the step's name), and ``--hosts``
(:mod:`iolab.cli.run`).
"""
from __future__ import annotations

import logging
import os

import pandas as pd

from iolab.analysis import together
from iolab.core.errors import IolabError, run_option
from iolab.engine import fio, ioengines, targets as targets_mod
from iolab.engine.fio.passes import pass_suffix
from iolab.engine.fio import job_options
from iolab.engine.fio.outcome import empty_frame
from iolab.isolation import contention

log = logging.getLogger(__name__)

WHERE = run_option("simultaneous")
#: joins the targets' names into the total row's ``target`` (never part of a target's own name)
SEPARATOR = "+"
#: the ``simultaneous`` column: a target's own row, or the total of all
TARGET_ROW, TOTAL_ROW = "target", "total"
#: the flag of a total row: a row that describes, as ``fleet_aggregate`` does; reports leave it out of the systems
#: they set side by side (:func:`iolab.report.sections.common.without_aggregates`)
TOTAL_FLAG = "simultaneous_total"
#: options that would make fio run the jobs one after another
SERIALISING = ("stonewall", "wait_for")
#: figures that add up over targets measured at once
_SUMMED = ("io_bytes", "cpu_usr_pct", "cpu_sys_pct", "dev_read_bytes", "dev_write_bytes")
#: rates: the targets' I/O over the longest runtime (iolab.analysis.together)
_RATES = ("bw_mbps", "iops", "bw_total_mbps", "iops_total")


def check(recipe, targets: list, options) -> None:
    """Refuse a ``--simultaneous`` run that cannot measure its ``targets`` (specs or resolved) together; nothing
    when not asked."""
    if not options.simultaneous:
        return
    if len(targets) < 2:
        raise IolabError(f"needs two or more --target, got {len(targets)}: one target is measured alone anyway",
                         context=WHERE)
    specs = [t if isinstance(t, str) else t.spec for t in targets]
    real = [os.path.realpath(s) for s in specs if not s.startswith(targets_mod.EMULATED_PREFIX)]
    twice = sorted({path for path in real if real.count(path) > 1})
    if twice:  # each emulated:PROFILE is a device of its own; a path twice would be one file written by two jobs
        raise IolabError(f"names {twice[0]} twice: two jobs would write one file at once and the total would "
                         "count it twice", context=WHERE)
    if recipe.engine != "fio":
        raise IolabError(f"the recipe {recipe.name!r} runs on the {recipe.engine} engine, which runs its tests "
                         "its own way; only fio recipes measure targets together", context=WHERE)
    if recipe.jobfile is not None:
        raise IolabError("a .fio job file names its own jobs and files; write one section per target in it "
                         "instead", context=WHERE)
    if options.log_interval_ms is not None or recipe.log_interval_ms:
        raise IolabError("does not go with --log-interval yet: every target's job would log under the "
                         "step's one name", context=WHERE)


def total_name(targets) -> str:
    """The total row's ``target``: the names joined by ``+`` (target names keep only letters, digits and
    ``._-``: :func:`iolab.engine.targets._name`, so no target can be called this)."""
    return SEPARATOR.join(t.name for t in targets)


def job_name(step, target) -> str:
    """The fio job (section) of ``step`` on ``target`` in the step's one job file."""
    return f"{step.id}@{target.name}"


def _section(name: str, options: dict) -> str:
    text = fio.render_job(name, options)
    return text[text.index(f"[{name}]"):]


def job_text(recipe, step, targets, *, force_direct: bool) -> str:
    """One job file for ``step``: the recipe's ``[global]``, then one section per target started together."""
    sections, shared = [], None
    for target in targets:
        global_options, options = job_options(recipe, step, target, force_direct=force_direct)
        own = {"filename": global_options.pop("filename", None)}
        if target.emulated is not None:  # the device's own needs, not the other targets'
            for key in target.emulated.fio_options:
                own[key] = global_options.pop(key)
                if key in recipe.fio:  # the recipe's own value stays for the other targets
                    global_options[key] = recipe.fio[key]
        if shared is None:
            shared = global_options
        options = {k: v for k, v in options.items() if k not in SERIALISING}
        sections.append((job_name(step, target), {**own, **options, "new_group": 1}))
    first = fio.render_job(*sections[0], shared)
    return first + "".join("\n" + _section(name, options) for name, options in sections[1:])


def total_rows(frames: list[pd.DataFrame], name: str) -> pd.DataFrame:
    """Per direction, the targets' rows of one pass added up into the total row (see the module's docstring)."""
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["direction"].notna()]
    out = []
    for direction, part in rows.groupby("direction", sort=False):
        row = part.iloc[0].copy()
        for column in _SUMMED:
            if column in part:
                row[column] = pd.to_numeric(part[column], errors="coerce").sum(min_count=1)
        for column in [c for c in _RATES if c in part]:
            row[column] = together.total_rate(part[column], part["runtime_s"])
        row["lat_mean_us"] = together.mean_latency(part["lat_mean_us"], part["iops"], part["runtime_s"])
        row["lat_max_us"] = pd.to_numeric(part["lat_max_us"], errors="coerce").max()
        for column in ("lat_p50_us", "lat_p99_us", "lat_p999_us"):
            row[column] = float("nan")
        row["runtime_s"] = pd.to_numeric(part["runtime_s"], errors="coerce").max()
        for column in ("bs", "iodepth", "numjobs"):
            if part[column].nunique(dropna=False) > 1:
                row[column] = pd.NA
        errors = [f"{t}: {e}" for t, e in zip(part["target"], part["error"]) if pd.notna(e) and e]
        row["error"] = "; ".join(errors) or None
        row["valid"] = bool(part["valid"].fillna(False).astype(bool).all()) if "valid" in part else not errors
        flags = [f for value in part.get("flags", pd.Series(dtype=object)).dropna() for f in str(value).split(";")]
        row["flags"] = ";".join(dict.fromkeys([f for f in flags if f] + [TOTAL_FLAG]))
        if "temp_max_c" in part:  # the hottest drive of the pass
            row["temp_max_c"] = pd.to_numeric(part["temp_max_c"], errors="coerce").max()
        for column in [c for c in contention.COLUMNS if c.startswith("dev_") and c in part]:
            row[column] = pd.to_numeric(part[column], errors="coerce").sum(min_count=1)
        row["target"], row["simultaneous"] = name, TOTAL_ROW
        out.append(row.to_dict())
    return pd.DataFrame(out, columns=rows.columns)


class Simultaneous:
    """What :class:`iolab.engine.runner.SimultaneousEngine` changes in :class:`~iolab.engine.runner.FioEngine` (its
    other base): one job file per step and each pass one fio for every target at once."""

    check = staticmethod(check)

    def prepare(self, force_direct: bool) -> dict:
        """The manifest's ``simultaneous`` (which targets run together, the total's name), then
        :meth:`~iolab.engine.runner.FioEngine.prepare`."""
        self.run.update(simultaneous={"targets": [t.name for t in self.targets], "total": total_name(self.targets)})
        return super().prepare(force_direct)

    def job_files(self, force_direct: bool):
        """One job file per step for all targets, keyed ``(step id, total name)`` (what
        :meth:`~iolab.engine.runner.FioEngine.write_jobs` writes and checks)."""
        total = total_name(self.targets)
        for step in self.recipe.steps():
            yield ((step.id, total), f"jobs/{step.id}.fio",
                   job_text(self.recipe, step, self.targets, force_direct=force_direct), self.targets[0], step)

    def measure_pass(self, sandbox, step, rep, jobs):
        """One pass of ``step`` on every target at once (one fio: :meth:`~iolab.engine.runner.FioEngine.fio_pass`):
        yields ``(target name, rows)`` per target, then ``(total name, total rows)``."""
        total = total_name(self.targets)
        jobfile = jobs[(step.id, total)]
        raw = self.run.path / "raw" / f"{step.id}{pass_suffix(rep)}"
        measured = self.fio_pass(sandbox, step, rep, self.targets, jobfile, raw, where=total)
        frames = {}
        for index, target in enumerate(self.targets):  # marked by fio's job name, then named for the step
            rows = self.pass_rows(measured, index, self._rows_of(measured.frame, step, target), step, target, rep,
                                  jobfile, sandbox)
            frames[target.name] = rows.assign(job=step.id, simultaneous=TARGET_ROW)
        summed = total_rows(list(frames.values()), total)
        if not summed.empty:  # no total of a pass that measured nothing (each target's row says why)
            frames[total] = summed
        self.end_pass(measured.done, rep, frames.values())
        yield from frames.items()

    @staticmethod
    def _rows_of(whole: pd.DataFrame, step, target) -> pd.DataFrame:
        """``target``'s rows of the pass; fio's failure (rows of no job) is every target's."""
        mine = whole[whole["job"] == job_name(step, target)]
        if not mine.empty:
            return mine.reset_index(drop=True)
        if whole["direction"].isna().all() and whole["error"].notna().any():
            return whole.assign(job=job_name(step, target)).reset_index(drop=True)
        return empty_frame(job_name(step, target), "fio reported nothing for this target's job")


def dry_run(recipe, targets) -> str:
    """``iolab run --simultaneous --dry-run`` of a planned run (:func:`iolab.engine.runner.plan`): the one job
    file per step every target shares; nothing is created."""
    lines = [f"# recipe {recipe.name}: {recipe.description}",
             f"# simultaneous: {', '.join(t.spec for t in targets)} measured at once (one fio per pass); "
             f"total row: {total_name(targets)}"]
    for target in targets:
        if target.kind == "dir":
            target.test_file = os.path.join(target.path, "iolab-<run_id>", targets_mod.TEST_FILE)
        elif target.kind == "emulated":
            target.test_file = f"<emulated {target.spec[len(targets_mod.EMULATED_PREFIX):]} device>"
    for step in recipe.steps():
        lines += [f"# --- {step.id}: fio --output-format={recipe.output_format} <job file>",
                  job_text(recipe, step, targets, force_direct=False)]
    return "\n".join(lines)
