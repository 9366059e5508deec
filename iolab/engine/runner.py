"""Run a recipe on one or more targets and keep everything in a run directory.

This is the engine behind ``iolab run`` and the measure notebook::

    run_dir = iolab.engine.runner.run("quick", ["/mnt/scratch"], RunOptions(label="ssd"))

Order of work: check the recipe, the targets and fio *before* anything runs; create the run directory
(manifest, recipe as run, job files checked with ``fio --parse-only``); then run every step (test x
direction), repetition and target, interleaved per step so drift hits all targets alike, inside the chosen
cache isolation. Each pass's raw fio output (and fio's logs: :mod:`iolab.engine.timelogs`) and the growing
results.csv are written as soon as they exist; the manifest ends ``completed``, ``failed`` or ``interrupted``.

Faults: a test whose fio aborts a job, does no I/O, exits non-zero, is killed by a signal (``fio killed by
SIGKILL``) or is stopped by the per-test watchdog (:mod:`iolab.engine.watchdog`: SIGINT, then SIGKILL after
:data:`STOP_GRACE_S`) is ``failed`` with that reason and is not repeated, and the run goes on with the next test;
the run then ends ``failed`` (exit code 1). Only an interrupt (Ctrl-C, SIGTERM) or an error outside fio (e.g. the
test file cannot be laid out) stops the run early.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
from pathlib import Path

import pandas as pd
import yaml

from iolab.engine import (fio, ioengines, memlock, reaper, recipes, registry, runinput, sysinfo,
                          targets as targets_mod, timelogs, watchdog)
from iolab.engine.fio import process as fioproc
from iolab.engine.jobfile import gate as jobgate
from iolab.engine.runoptions import RunOptions
from iolab.engine.interface import Engine
from iolab.engine.timelogs import keep_pass, with_logs
from iolab.core import progress as progress_
from iolab.core.errors import IolabError
from iolab.core.signals import sigterm_raises
from iolab.engine.devicewatch import NoWatch, watching
from iolab.engine.fio.outcome import fio_reason, judge, killed_by
from iolab.engine.fio import job_options, passes
from iolab.engine.fio.passes import STOP_GRACE_S, expected_seconds, pass_suffix  # noqa: F401 (also runner's names)
from iolab.engine.simultaneous import Simultaneous
from iolab.engine.fio.spread import client_fairness, latency_over
from iolab.analysis.stats import HIGH_VARIANCE_COV, flag_results, needs_more
from iolab.analysis import mixfigure
from iolab.isolation import confine, contention
from iolab.isolation.sandbox import flag_cache_suspect, open_sandbox
from iolab.isolation.resident import kept_resident
from iolab.engine.store import Run, utcnow
from iolab.devices.latency import emulation_flag
from iolab.core.units import fio_size

log = logging.getLogger(__name__)

class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is so that every cleanup runs as for Ctrl-C."""


def sigterm_interrupts():
    """Turn SIGTERM into :class:`Terminated` while the block runs (main thread only)."""
    return sigterm_raises(Terminated)


@dataclasses.dataclass
class RunResult:
    path: Path
    manifest: dict
    results: pd.DataFrame


def plan(recipe, target_specs, options: RunOptions | None = None, **keywords):
    """Load and check the recipe and targets; nothing is created or run. ``options`` (or the keywords
    of a :class:`~iolab.engine.runoptions.RunOptions`) as :func:`run` takes them."""
    return _checked_plan(recipe, target_specs, RunOptions.of(options, **keywords))[:2]


def _checked_plan(recipe, target_specs, options: RunOptions):
    """:func:`plan`, the block devices the jobs write outside the targets (held while running), the engine choice."""
    if not isinstance(recipe, recipes.Recipe):
        recipe = recipes.load(recipe)
    if options.mix is not None:  # each chosen test's mixed row too (MIX-<test>), added by with_options
        recipe = recipe.with_mix(options.mix)
    recipe = timelogs.applied(recipe, options.log_interval_ms)  # fio's bw/iops/lat logs of every pass, in raw/
    recipe = recipe.with_options(options)
    fio.fio_binary()  # fio missing: say how to install it, before anything else
    runinput.check(recipe, target_specs)  # bad input: refused before a run directory exists
    Simultaneous.check(recipe, list(target_specs), options)  # --simultaneous: refused where it cannot work
    recipe, engine_choice = ioengines.choose(recipe, options.ioengine)  # --ioengine, or io_uring where preferred
    largest = max([recipe.size] + [t.size for t in recipe.tests if t.size])
    # sustained-write, steady-state without --size write a block device's own capacity: it holds what they write
    fills = not recipe.size_declared and getattr(registry.engine_class(recipe.engine), "fills_capacity", False)
    device_size = max((t.size for t in recipe.tests if t.size), default=0) if fills else None
    resolved = targets_mod.resolve(list(target_specs), size=largest, writes=False, confirm=options.confirm,
                                   device_size=device_size, probe_ceiling=options.ceiling_probe)
    accesses = jobgate.check(recipe, resolved, confirm=options.confirm, allow=options.allow)
    return recipe, resolved, jobgate.devices_outside_targets(accesses, resolved), engine_choice


def relpath(kind: str, step_id: str, target, multi: bool, suffix: str) -> str:
    """A step's file in the run directory: ``jobs/<step>.fio``, ``raw/<target>/<step>-1.json`` (several targets)."""
    return f"{kind}/{target.name}/{step_id}{suffix}" if multi else f"{kind}/{step_id}{suffix}"


def run(recipe, target_specs, options: RunOptions | None = None, **keywords) -> RunResult:
    """Run ``recipe`` on ``target_specs`` with ``options`` and return the run directory and its results.

    ``run(recipe, targets, size="1G", label="ssd")`` is the same as ``run(recipe, targets,
    RunOptions(size="1G", label="ssd"))``: keywords are :class:`~iolab.engine.runoptions.RunOptions`
    fields, put on top of ``options``.
    """
    options = RunOptions.of(options, **keywords)
    reaper.reap_before_run(options.data_dir)  # what dead iolab processes left: devices, cgroups, pages, runs
    recipe, targets, outside, engine_choice = _checked_plan(recipe, target_specs, options)
    engine_type = SimultaneousEngine if options.simultaneous else registry.engine_class(recipe.engine)
    # confined or refused (without bwrap, unless --unconfined), decided before a run directory exists
    unconfined_reason = confine.decide(options.unconfined) if engine_type.confined else None
    # --allow-path split into places and devices once: one the confinement cannot bind is refused here,
    # before the run directory, and the same split is what the confinement binds
    allowed = confine.allowed(options.allow.paths) if engine_type.confined and unconfined_reason is None else ([], [])
    run_ = _create(recipe, targets, options, engine_choice)
    try:
        engine = engine_type(recipe, targets, run_, mem_limit=recipe.mem_limit, progress=options.progress,
                             scratch_dir=options.scratch_dir or _scratch_dir())
        engine.allowed_paths, engine.allowed_split = options.allow.paths, allowed
        engine.unconfined_reason, engine.keep_serials = unconfined_reason, options.keep_serials
        with targets_mod.held_exclusively(outside, confirm=options.confirm):
            engine.execute()
    except KeyboardInterrupt as exc:
        how = "SIGTERM" if isinstance(exc, Terminated) else "the user (Ctrl-C)"
        run_.interrupt(f"interrupted by {how}; results so far are kept")
        raise
    except IolabError as exc:
        run_.finish("failed", str(exc))
        exc.hint = exc.hint or f"what it measured is kept in {run_.path}"  # e.g. EIO while laying out
        raise
    except Exception as exc:  # keep the evidence, then let it surface
        run_.finish("failed", f"internal error: {exc!r}")
        raise
    failed = [t for t in run_.manifest["tests"] if t["status"] != "completed"]
    if failed:
        run_.finish("failed", "; ".join(f"{t['name']}: {t.get('error') or t['status']}" for t in failed))
    else:
        run_.finish("completed")
    return RunResult(run_.path, run_.manifest, run_.results)


def _create(recipe, targets, options: RunOptions, engine_choice) -> Run:
    """The run directory: its manifest (the recipe's statistic, the options as run) and the recipe as run."""
    run_ = Run.create(options.data_dir, recipe=recipe.name, label=options.label,
                      recipe_description=recipe.description, tool=recipe.tool,
                      statistic=recipe.statistic,  # how the tool combines passes: what every table shows first
                      system=sysinfo.system(), versions=sysinfo.versions(),
                      argv=None if options.argv is None else list(options.argv),
                      options={"size": recipe.size, "runtime": recipe.runtime, "repeat": recipe.repeat,
                               "preset": recipe.preset, "mem_limit": recipe.mem_limit,
                               "with_original": options.with_original, "warmup": recipe.warmup,
                               "pause": recipe.pause, "log_interval_ms": recipe.log_interval_ms,
                               "simultaneous": options.simultaneous},
                      targets=[{"spec": t.spec, "kind": t.kind} for t in targets],
                      safety=options.allow.record(options.confirm), ioengine=engine_choice,
                      tests=[{"name": s.id, "test": s.test, "rw": s.rw, "status": "pending", "reps": 0}
                             for s in recipe.steps()])
    run_.write("recipe.yaml", yaml.safe_dump(recipe.to_dict(), sort_keys=False, allow_unicode=True))
    log.info("run directory %s", run_.path)
    return run_


def _scratch_dir() -> str | None:
    """Where emulated devices keep their backing files: $TMPDIR when the user set it, else None
    (the emulated module's /var/tmp: disk-backed, unlike a /tmp that may live in RAM)."""
    return os.environ.get("TMPDIR") or None


class FioEngine(Engine):
    """The ``fio`` engine (:class:`iolab.engine.interface.Engine`): a job file per step and target."""

    confined = True
    #: ``--allow-path`` paths (written by the job on purpose): bound into the confinement too, as
    #: :func:`iolab.isolation.confine.allowed` split them when the run started (places, devices)
    allowed_paths: tuple = ()
    allowed_split: tuple | None = None  # None: split when the confinement is made
    #: why the run goes unconfined (``--unconfined`` where bubblewrap cannot run), None: it is confined
    unconfined_reason: str | None = None
    #: the run's confinement, set when the session opens (None: unconfined)
    confinement = None
    keep_serials, watch = False, NoWatch()  # --keep-serials; the drives' health and temperature

    def __init__(self, recipe, targets, run_, *, mem_limit, progress, scratch_dir):
        self.recipe, self.targets, self.run = recipe, targets, run_
        self.mem_limit, self.progress, self.scratch_dir = mem_limit, progress, scratch_dir
        self.multi = len(targets) > 1

    @contextlib.contextmanager
    def session(self, *, buffered: bool, direct_ok: bool):
        """Open every target (emulated devices made, test file names chosen) and the cache
        isolation around them; everything is undone on the way out, also on errors and Ctrl-C."""
        with contextlib.ExitStack() as stack:
            for target in self.targets:
                stack.enter_context(targets_mod.opened(
                    target, run_id=self.run.run_id, size=self.recipe.size,
                    filesystem=self.recipe.filesystem, scratch_dir=self.scratch_dir))
            self.run.update(targets=[t.describe(keep_serials=self.keep_serials) for t in self.targets])
            self.watch = stack.enter_context(watching(self.run, self.targets))  # health before/after
            throttles = [th for t in self.targets if t.emulated is not None for th in t.emulated.throttles]
            box = stack.enter_context(open_sandbox(self.recipe.isolation, mem_limit=self.mem_limit,
                                                   throttles=throttles, buffered=buffered, direct_ok=direct_ok))
            self.confinement = self._confine()
            stack.enter_context(kept_resident([fio.fio_binary(), "--parse-only", "-"], mode=box.mode))
            yield box  # fio's files stay cached across each test's cache drop (direct mode)

    def _confine(self):
        """The kernel's boundary for every process this run starts (:func:`iolab.isolation.confine.for_run`)."""
        (raw := self.run.path / "raw").mkdir(parents=True, exist_ok=True)
        confinement, record = confine.for_run(self.targets, raw_dir=str(raw.absolute()),
                                              allowed_split=self.allowed_split,
                                              unconfined_reason=self.unconfined_reason)
        self.run.update(confinement=record)
        return confinement

    def popen(self, sandbox):
        """How this run starts a measured process: in the sandbox's cgroups, confined."""
        return functools.partial(sandbox.popen, confinement=self.confinement)

    def execute(self) -> None:
        with memlock.raised(), self.session(buffered=self.recipe.buffered, direct_ok=self.recipe.direct_ok) as sandbox:
            force_direct = sandbox.mode == "direct" and self.recipe.isolation != "direct"
            self.run.update(isolation={**sandbox.describe(), "forced_o_direct": force_direct and self.recipe.buffered})
            jobs = self.prepare(force_direct)
            self._layout(sandbox)
            self.measure_steps(sandbox, jobs)  # a job file's files are in each target's run_dir, removed with it

    @staticmethod
    def _job_dir(target) -> str | None:
        """Where a user's job file makes its files (the --directory iolab passes): the run's own directory
        in the target, which iolab removes with everything in it (targets.opened); None for a file or device."""
        return target.run_dir

    def _layout(self, sandbox) -> None:
        """Write each test file once, inside the isolation, before any test is timed.

        Like CrystalDiskMark's preparation pass: no read test ever times fio
        laying its file out, and a cold test really starts cold.
        """
        if self.recipe.jobfile is not None:
            return
        for target in self.targets:
            if not target.test_file or (os.path.exists(target.test_file)
                                        and os.path.getsize(target.test_file) >= self.recipe.size):
                continue
            # real data, written through to the device: a fallocated file reads back as
            # zeros without any device I/O, which would fake every read test
            options = {"filename": target.test_file, "size": fio_size(self.recipe.size), "rw": "write",
                       "bs": "1m", "ioengine": "psync", "end_fsync": 1}
            if target.emulated is not None:
                options.update(target.emulated.fio_options)
            rel = relpath("jobs", "_layout", target, self.multi, ".fio")
            path = self.run.write(rel, fio.render_job("layout", options))
            fio.check_job(path)
            raw = self.run.path / relpath("raw", "_layout", target, self.multi, ".json")
            limit = watchdog.Limit(0.0, 0.0, self.recipe.size / self.floor_bps(target), self._margin())
            done = fioproc.run(fio.command(path), raw, popen=self.popen(sandbox), label=f"laying out {target.name}",
                               expected=None, limit=limit, show_progress=self.progress, grace=STOP_GRACE_S)
            if done.interrupt is not None:
                raise done.interrupt
            if done.returncode != 0 or done.stopped:
                raise IolabError(f"fio could not lay out the test file: {self._layout_failure(sandbox, done)}",
                                 context=target.test_file)

    @staticmethod
    def _layout_failure(sandbox, done) -> str:
        """Why laying out failed: the OOM killer (from the cgroup's memory events) first, then fio's words."""
        evidence = sandbox.test_evidence()
        if evidence.get("oom_killed"):
            return f"out of memory: {evidence.get('oom_reason') or 'the OOM killer killed fio'}"
        return (done.stopped or killed_by(done.returncode) or fio_reason(done.stderr)
                or f"fio exited with {done.returncode} and printed no reason")

    def floor_bps(self, target) -> float:
        """The slowest rate the watchdog assumes for ``target``: an emulated device's throttle if lower."""
        floor = watchdog.FLOOR_BPS
        profile = target.emulated.profile if target.emulated is not None else None
        if profile is not None:
            rates = [profile.read_bps, profile.write_bps] + [i * 4096 for i in (profile.read_iops,
                                                                                profile.write_iops) if i]
            floor = min([floor] + [r for r in rates if r])
        return floor

    def _margin(self) -> float:
        return self.recipe.watchdog_margin or watchdog.MARGIN_S

    def job_text(self, step, target, force_direct: bool) -> str:
        """The job file of ``step`` on ``target`` (what :meth:`prepare` writes and ``--dry-run`` shows)."""
        if self.recipe.jobfile is not None:
            return self.recipe.jobfile
        global_options, options = job_options(self.recipe, step, target, force_direct=force_direct)
        return fio.render_job(step.id, with_logs(self.recipe, step, options), global_options)

    def prepare(self, force_direct: bool) -> dict:
        """Render and check every job file before anything runs (:meth:`write_jobs`), and the confinement fio
        runs under: ``{(step id, target name): path}``, written again where the confinement changed the options."""
        jobs = self.write_jobs(force_direct)
        self.confinement, rewrite = ioengines.confine_jobs(self.run, self.recipe, getattr(self, "confinement", None),
                                                           jobs.values())
        return self.write_jobs(force_direct) if rewrite else jobs

    def write_jobs(self, force_direct: bool) -> dict:
        """Every job file (:meth:`job_files`) checked by fio, their commands and engines in the manifest."""
        jobs, commands = {}, {}
        for key, rel, text, target, step in self.job_files(force_direct):
            jobs[key] = path = self.run.write(rel, text)
            fio.check_job(path)
            commands[rel] = self._argv(path, target, step)
        self.run.update(commands=commands, tests=ioengines.with_engines(self.run.manifest["tests"], jobs))
        return jobs

    def job_files(self, force_direct: bool):
        """``((step id, target name), path in the run, text, target, step)``: one job file per step and target."""
        for step in self.recipe.steps():
            for target in self.targets:
                yield ((step.id, target.name), relpath("jobs", step.id, target, self.multi, ".fio"),
                       self.job_text(step, target, force_direct), target, step)

    def _argv(self, path, target, step) -> list[str]:
        extra = []
        output_format = self.recipe.output_format
        if int(step.options.get("numjobs", 1)) > 1:
            output_format = "json+"  # per-client histograms: exact merged percentiles
        if self.recipe.jobfile is not None:
            extra = [f"--{k}={v}" for k, v in fio.REPORTING_OPTIONS.items()]
            if self._job_dir(target):
                extra.append(f"--directory={self._job_dir(target)}")
        return fio.command(path, output_format=output_format, extra=extra)

    def measure_steps(self, sandbox, jobs) -> None:
        """Every step in turn: a warm-up when asked, then its passes (adaptive repeats), interleaved over targets."""
        pause, warmup, cov_target = self.recipe.pause, self.recipe.warmup, self.recipe.cov_target
        min_n, max_n = self.recipe.repeat, self.recipe.max_repeat
        steps = self.recipe.steps()
        lines = progress_.StepLines(len(steps), self.progress)  # one line a test when stderr is a log, not a terminal
        for index, step in enumerate(steps):
            record = self.run.manifest["tests"][index]
            record.update(status="running", started=utcnow())
            self.run.save_manifest()
            if index and pause:
                time.sleep(pause)
            lines.start()
            if warmup:  # one unrecorded pass, as CrystalDiskMark's "Preparing..."
                for _ in self.measure_pass(sandbox, step, 0, jobs):
                    pass
            errors, values, rep = [], {}, 0
            # adaptive repeats: at least `repeat` passes, more while any target's CoV is high
            while rep < max_n and (rep < min_n or any(
                    needs_more(v, cov_target=cov_target, min_n=min_n, max_n=max_n) for v in values.values())):
                rep += 1
                for name, frame in self.measure_pass(sandbox, step, rep, jobs):  # each kept as soon as it exists
                    self.store(mixfigure.with_mix_row(frame, step))  # + a mix's one figure (KDiskMark's)
                    errors += [e for e in frame["error"].dropna().unique() if e]
                    values.setdefault(name, []).append(frame["bw_mbps"].sum(min_count=1))
                record["reps"] = rep
                self.run.save_manifest()
                if errors:  # a failing step does not get better by repeating it
                    break
            record.update(status="failed" if errors else "completed", ended=utcnow(),
                          error="; ".join(dict.fromkeys(errors)) or None)
            self.run.save_manifest()
            lines.done(index + 1, step.id)
        self.flag()

    def flag(self) -> None:
        """Mark CPU-bound, too short, high-variance and small-file results."""
        table = self.run.results
        if table.empty:
            return
        buffered = table["direct"].eq(0) if "direct" in table else None
        isolated = self.run.manifest.get("isolation", {}).get("mode") in ("cgroup", "hugepages")
        flagged = flag_results(table, cpu_count=os.cpu_count(), min_runtime_s=1.0,
                               mem_limit=self.mem_limit if isolated else None,
                               file_size=self.recipe.size or None, cov_threshold=HIGH_VARIANCE_COV,
                               buffered=buffered)
        flagged["flags"] = flagged["flags"].replace("", None)
        self.run.set_results(flagged)

    def measure_pass(self, sandbox, step, rep, jobs):
        """One pass of ``step`` (``rep`` 0: the warm-up) on every target, one after another (interleaved: drift
        hits every target alike): yields ``(target name, rows)`` as each is measured; :mod:`iolab.engine.simultaneous`
        measures them at once."""
        for target in self.targets:
            yield target.name, self.measure_step(sandbox, step, target, rep, jobs[(step.id, target.name)])

    def measure_step(self, sandbox, step, target, rep, jobfile) -> pd.DataFrame:
        """One pass of ``step`` on ``target`` (``rep`` 0: the warm-up), annotated; the caller stores it."""
        raw = self.run.path / relpath("raw", step.id, target, self.multi, pass_suffix(rep))
        measured = self.fio_pass(sandbox, step, rep, [target], jobfile, raw, where=target.name if self.multi else None)
        frame = self.pass_rows(measured, 0, measured.frame, step, target, rep, jobfile, sandbox)
        self.end_pass(measured.done, rep, [frame])
        return frame

    def fio_pass(self, sandbox, step, rep, targets, jobfile, raw, *, where=None) -> passes.Measured:
        """One fio process measuring a pass of ``step`` (``rep`` 0: the warm-up) over ``targets`` (one, or all at
        once) into ``raw``: page cache prepared, watchdog limit from the job file, each target's device counters,
        contention probe and temperatures around fio, its logs kept, its output parsed; ``where``: for the label."""
        # fio runs in the raw file's directory, inside the run: its side files by relative name
        # (exec_prerun's <job>.prerun.txt) stay with the run, not in the caller's working directory
        jobfile = os.path.abspath(jobfile)
        raw.parent.mkdir(parents=True, exist_ok=True)
        passes.prepare_cache(sandbox, step)
        limit = watchdog.jobfile_limit(Path(jobfile).read_text(), default_size=self.recipe.size,
                                       floor_bps=min(self.floor_bps(t) for t in targets), margin_s=self._margin())
        with contextlib.ExitStack() as stack:  # each target's drives sampled each second while fio runs
            temperatures = [stack.enter_context(self.watch.test(target, path))
                            for target, path in zip(targets, passes.temperature_files(raw, targets))]
            done, devices, evidence = passes.measured_run(
                sandbox, self.popen(sandbox), self._argv(jobfile, targets[0], step), targets, raw, limit=limit,
                label=passes.pass_label(step, rep, self.recipe.repeat, where), show_progress=self.progress,
                expected=expected_seconds(self.recipe, step), drop_empty=True, cwd=raw.parent.absolute(),
                grace=STOP_GRACE_S)  # runner's, read here: a test may shorten it
        keep_pass(self.recipe, raw.parent, step.id, rep)  # --log-interval: <step>-<rep>_bw.1.log ...
        frame = self._parse(fioproc.read_raw(raw), done, step)
        return passes.Measured(done, frame, devices, evidence, temperatures)

    def pass_rows(self, measured: passes.Measured, index: int, rows, step, target, rep, jobfile, sandbox):
        """``rows`` of a measured pass's ``index``-th target: :meth:`annotate`, temperatures, ioengine by job name."""
        frame = self.annotate(rows, step, target, rep, measured.devices[index], measured.evidence[index],
                              measured.done.elapsed, sandbox)
        frame = measured.temperatures[index].annotate(frame)
        return ioengines.mark(frame, jobfile, ram_backed=self._ram_backed(target))  # ioengine; engine_sync

    def end_pass(self, done, rep, frames) -> None:
        """After a pass stopped by Ctrl-C or SIGTERM: keep what fio wrote (not a warm-up's), then stop the run."""
        if done.interrupt is not None:
            for frame in frames if rep else ():
                self.store(frame)
            raise done.interrupt

    def measure_process(self, sandbox, argv, target, raw, label, expected, limit=None):
        """Run another tool's ``argv`` as a pass's fio runs (:func:`~iolab.engine.fio.passes.measured_run`), Ctrl-C
        going on up: how it ended, its stderr, byte counts, evidence and wall time (what :meth:`annotate` takes)."""
        done, devices, evidence = passes.measured_run(sandbox, self.popen(sandbox), argv, [target], raw, label=label,
                                                      expected=expected, limit=limit, show_progress=self.progress,
                                                      drop_empty=False, cwd=None, grace=STOP_GRACE_S)
        if done.interrupt is not None:
            raise done.interrupt
        return done, done.stderr, devices[0], evidence[0], done.elapsed

    def _parse(self, text, done, step) -> pd.DataFrame:
        frame = judge(text, done.stderr, done.returncode, job=step.id, stopped=done.stopped)
        if frame["direction"].isna().all():
            return frame
        if self.recipe.output_format == "json+":  # tiotest's share of slow operations
            slow = latency_over(text)
            if not slow.empty:
                frame = frame.merge(slow, on=["job", "direction"], how="left")
        fairness = client_fairness(text)  # numjobs > 1: how evenly the clients shared the device
        if not fairness.empty:
            frame = frame.merge(fairness.drop(columns="clients"), on=["job", "direction"], how="left")
        return frame

    def _ram_backed(self, target) -> bool:
        described = [t for t in self.run.manifest.get("targets") or [] if t.get("name") == target.name]
        return bool(described) and described[0].get("filesystem") in RAM_FILESYSTEMS

    def annotate(self, frame, step, target, rep, device, evidence, elapsed, sandbox) -> pd.DataFrame:
        m = self.run.manifest
        frame = frame.copy()
        frame.insert(0, "run_id", m["run_id"])
        frame["host"] = frame["host"].where(frame["host"].notna(), m["host"]) if "host" in frame else m["host"]
        frame["label"] = m["label"]
        frame["recipe"] = self.recipe.name
        frame["test"] = frame["job"] if self.recipe.jobfile is not None else step.test
        if step.sweep:
            frame["sweep"] = step.sweep
        if self.recipe.jobfile is None:  # fio's default is buffered I/O (direct=0)
            frame["direct"] = int(step.direct or bool(self.run.manifest["isolation"].get("forced_o_direct")))
        frame["rep"] = rep
        frame["isolation"] = sandbox.mode
        frame["target"] = target.name
        frame["tool"] = "fio"
        frame["dev_read_bytes"] = device.get("read_bytes")
        frame["dev_write_bytes"] = device.get("write_bytes")
        frame["cg_peak_bytes"] = evidence.get("cg_peak_bytes")
        frame["cg_cache_bytes"] = evidence.get("cg_cache_bytes")
        frame["wall_s"] = round(elapsed, 3)
        flags = []
        read_bytes = frame.loc[frame["direction"] == "read", "io_bytes"].sum()
        if device and read_bytes and flag_cache_suspect(read_bytes, device.get("read_bytes") or 0):
            flags.append("cache_suspect")
        if target.emulated is not None and target.emulated.profile.throttled:
            flags.append(emulation_flag(target.emulated, frame["direction"]))
        if self._ram_backed(target):
            flags.append("ram_backed")  # tmpfs/ramfs: the numbers are memory's, not a storage device's
        elif step.buffered and not m["isolation"].get("forced_o_direct") and "write" in set(
                frame["direction"].dropna()) and _io_cgroup_v1():  # v1: the flusher writes back outside the groups
            flags.append("v1_writeback")
        contention.annotate(frame, evidence, flags)  # cpu_got_pct, steal_pct, dev_foreign_bytes...; contended
        if evidence.get("oom_killed"):
            flags.append("oom_killed")
            reason = evidence.get("oom_reason") or "fio was killed by the OOM killer in the memory-limited cgroup"
            frame["error"] = frame["error"].where(frame["error"].notna(), reason)
        frame["flags"] = ";".join(flags) or None
        frame["valid"] = frame["error"].isna() & ("oom_killed" not in flags)
        return frame


#: File systems whose "device" is RAM.
RAM_FILESYSTEMS = ("tmpfs", "ramfs")


def _io_cgroup_v1() -> bool:
    """Block throttling comes from a cgroup v1 hierarchy (buffered writeback escapes it)."""
    from iolab.isolation.cgroups import detect
    where = detect().locate("io")
    return bool(where) and where[0] == "v1"


class SimultaneousEngine(Simultaneous, FioEngine):
    """``--simultaneous``: :class:`FioEngine` with each pass one fio for every target (:mod:`iolab.engine.simultaneous`)."""
