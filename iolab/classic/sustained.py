"""The ``sustained`` engine: the ``sustained-write`` recipe's fio jobs, then the write-cliff finding.

The tests are plain fio jobs (run, confined and annotated exactly as by
:class:`iolab.engine.runner.FioEngine`, through ``self.popen(sandbox)``); each writes fio's
per-second bandwidth log (``write_bw_log`` + ``log_avg_msec=1000``) beside its raw output
in ``raw/`` (fio runs there). Two things differ from the fio engine:

* no layout pass: the sustained write itself makes the test file, and a layout would
  fill a drive's cache before the measurement starts;
* the sustained write moves the target's capacity (:mod:`iolab.classic.capacity`: a block
  device's size, an emulated device's, a file target's size; a directory: ``--size``), or
  ``--size`` when the command line declares it; the write after the idle pause lasts
  ``options.recovery_s`` at the burst rate just measured, bounded
  (:func:`iolab.classic.sustained_options.recovery_size`), its job file written again just
  before it runs. Both, and why, are in the manifest (``sustained``);
* afterwards :mod:`iolab.analysis.cliff` reads the ``sustained`` test's series and adds
  the finding to its row (:data:`iolab.analysis.cliff.CLIFF_COLUMNS`: burst rate, bytes
  before the cliff, rate after it, and the ``recovery`` test's rate after the idle pause,
  which is the recipe's pause between tests, ``--pause``); an emulated device's cliff
  record (what was declared, when it was applied) goes into the manifest's target entry.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import re
from pathlib import Path

from iolab.analysis.cliff import CLIFF_COLUMNS, cliff_columns, find_cliff, parse_bw_log, series_text
from iolab.classic.capacity import sustained_amount
from iolab.classic.sustained_options import FALLBACK_BYTES, parse_options, recovery_size
from iolab.core.errors import IolabError
from iolab.core.units import fio_size
from iolab.engine import fio
from iolab.engine.runner import FioEngine, relpath

log = logging.getLogger(__name__)

SUSTAINED, RECOVERY = "sustained", "recovery"


class Engine(FioEngine):
    """Runs an ``engine: sustained`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    #: without ``--size`` a block device is written to its own capacity: the run checks it holds no more
    fills_capacity = True

    def __init__(self, recipe, targets, run_, **kwargs):
        super().__init__(recipe, targets, run_, **kwargs)
        names = {step.test for step in recipe.steps()}
        if SUSTAINED not in names:
            raise IolabError(f"the sustained engine needs a test named {SUSTAINED!r}", context=recipe.name)
        if recipe.repeat > 1:  # a second pass would start with the cache full: not a repetition
            raise IolabError(f"--repeat {recipe.repeat}: a sustained write runs once (a second pass starts "
                             "with the drive's cache still full)", context=recipe.name, hint="run it again later")
        self.options = parse_options(recipe)
        #: a size the recipe's own recovery test declares wins over the one measured from the burst
        self.declared_recovery = next((t.size for t in recipe.tests if t.name == RECOVERY and t.size), None)
        self.amounts: dict = {}    # target name -> capacity.Amount, once the targets are open
        self.recoveries: dict = {}  # target name -> sustained_options.RecoverySize, once measured

    def execute(self) -> None:
        with self.session(buffered=False, direct_ok=True) as sandbox:
            self.run.update(isolation={**sandbox.describe(), "forced_o_direct": False})
            jobs = self.prepare(False)
            try:
                self.measure_steps(sandbox, jobs)  # no _layout: see the module's text
            finally:  # also for a failed or interrupted run: when the cliff was applied is evidence
                self._record_emulated_cliffs()
        self._add_findings()

    def _record_emulated_cliffs(self) -> None:
        record_emulated_cliffs(self.run, self.targets)

    # -- how much each write moves -----------------------------------------------------------------
    def prepare(self, force_direct: bool) -> dict:
        """The amounts (the targets are open: an emulated device's size is known), then the job files."""
        self.amounts = {t.name: sustained_amount(t, self.recipe) for t in self.targets}
        for name, amount in self.amounts.items():
            log.info("%s: the sustained write moves %s (%s; capacity %s from the %s)", name, fio_size(amount.bytes),
                     amount.why, fio_size(amount.capacity.bytes), amount.capacity.source)
        self._record_sizes()
        return super().prepare(force_direct)

    def _record_sizes(self) -> None:
        self.run.update(sustained={
            "amount": {name: amount.record() for name, amount in self.amounts.items()},
            "recovery": {name: size.record() for name, size in self.recoveries.items()},
            "recovery_declared": self.declared_recovery,
            "options": {"recovery_s": self.options.recovery_s, "cache_share": self.options.cache_share}})

    def _step_bytes(self, step, target) -> int | None:
        amount = self.amounts.get(target.name)
        if step.test == SUSTAINED:
            return amount.bytes if amount else None
        if step.test == RECOVERY and not self.declared_recovery:
            measured = self.recoveries.get(target.name)
            if measured is not None:
                return measured.bytes
            return min(FALLBACK_BYTES, amount.bytes) if amount else None  # until the burst is measured
        return None

    def job_text(self, step, target, force_direct: bool) -> str:
        size = self._step_bytes(step, target)
        if size is not None:
            step = dataclasses.replace(step, options={**step.options, "size": fio_size(size)})
        return super().job_text(step, target, force_direct)

    def measure_step(self, sandbox, step, target, rep, jobfile):
        if step.test == RECOVERY and not self.declared_recovery and target.name in self.amounts:
            self._size_recovery(step, target, jobfile)
        return super().measure_step(sandbox, step, target, rep, jobfile)

    def _size_recovery(self, step, target, jobfile) -> None:
        """The recovery write sized from the burst rate just measured; its job file written again and checked."""
        burst, cliff_bytes = self._burst(target)
        size = recovery_size(burst, cliff_bytes, self.amounts[target.name].bytes, self.options)
        self.recoveries[target.name] = size
        log.info("%s: the write after the idle pause moves %s (%s)", target.name, fio_size(size.bytes), size.why)
        Path(jobfile).write_text(self.job_text(step, target, False))
        fio.check_job(jobfile)
        self._record_sizes()

    def _burst(self, target) -> tuple[float | None, float | None]:
        """The sustained write's burst rate (bytes/s) and bytes before its cliff (None: no cliff): from its
        per-second series, or its mean rate when the series is too short for the detector."""
        try:
            cliff = find_cliff(*parse_bw_log(self._bw_log(SUSTAINED, target).read_text()))
            return cliff.burst_bps, cliff.cliff_bytes if cliff.found else None
        except (OSError, IolabError) as exc:
            log.info("%s: burst rate from the sustained write's mean rate (%s)", target.name, exc)
        table = self.run.results
        if table.empty or "bw_mbps" not in table:
            return None, None
        mine = table["target"].eq(target.name) & table["test"].eq(SUSTAINED) & table["direction"].eq("write")
        rate = table.loc[mine, "bw_mbps"].sum(min_count=1)
        return (float(rate) * 1e6, None) if math.isfinite(float(rate)) else (None, None)

    def _bw_log(self, step_id: str, target):
        raw = self.run.path / relpath("raw", step_id, target, self.multi, "-1.json")
        return raw.parent / f"{step_id}_bw.1.log"

    def _add_findings(self) -> None:
        table = self.run.results
        if table.empty:
            return
        added = CLIFF_COLUMNS + ("idle_s", "cliff_error", "series_s", "series_mbps")
        for column in added:
            if column not in table:
                table[column] = None
        table = table.astype({c: object for c in added})
        for target in self.targets:
            mine = table["target"].eq(target.name) & table["direction"].eq("write")
            rows = table.index[mine & table["test"].eq(SUSTAINED)]
            if rows.empty:
                continue
            recovered = table.loc[mine & table["test"].eq(RECOVERY), "bw_mbps"].dropna()
            try:
                times, rates = parse_bw_log(self._bw_log(SUSTAINED, target).read_text())
                table.loc[rows, "series_s"] = series_text(times)  # the chart's data, kept in the row
                table.loc[rows, "series_mbps"] = series_text(round(r / 1e6, 3) for r in rates)
                cliff = find_cliff(times, rates)
            except (OSError, IolabError) as exc:
                log.warning("no cliff finding for %s: %s", target.name, exc)
                table.loc[rows, "cliff_error"] = str(exc)
                continue
            found = cliff_columns(cliff, recovered.iloc[0] * 1e6 if not recovered.empty else None)
            found["idle_s"] = self._idle_seconds(target)
            for column, value in found.items():
                table.loc[rows, column] = value
            log.info("%s: %s", target.name, found)
        self.run.set_results(table)

    def _idle_seconds(self, target) -> float:
        """How long the device was idle before the recovery write: from fio's own clocks (each raw
        output's ``timestamp_ms`` is when that fio ended; ``job_runtime`` how long it wrote), so the
        sandbox's set-up and other targets' turns count; the recipe's pause when they are missing."""
        def clock(step_id, field):
            raw = self.run.path / relpath("raw", step_id, target, self.multi, "-1.json")
            found = re.search(rf'"{field}"\s*:\s*(\d+)', raw.read_text()) if raw.exists() else None
            return int(found.group(1)) if found else None
        ended, recovery_end, recovery_ran = (clock(SUSTAINED, "timestamp_ms"), clock(RECOVERY, "timestamp_ms"),
                                             clock(RECOVERY, "job_runtime"))
        if None in (ended, recovery_end, recovery_ran):
            return self.recipe.pause
        return round((recovery_end - recovery_ran - ended) / 1000, 3)

    def floor_bps(self, target) -> float:
        """The watchdog's slowest rate: an emulated device's rate after its cliff, when it has one."""
        floor = super().floor_bps(target)
        cliff = getattr(getattr(target.emulated, "profile", None), "cliff", None)
        return min(floor, cliff.write_bps) if cliff is not None else floor


def record_emulated_cliffs(run, targets) -> None:
    """The emulated devices' cliff records as they stand after the tests (before the devices go), in the
    manifest's target entries: when a cliff was applied is evidence, also for a failed or interrupted run."""
    described = run.manifest.get("targets") or []
    for target in targets:
        watch = getattr(target.emulated, "cliff_watch", None)
        for entry in described:
            if watch is not None and entry.get("name") == target.name and entry.get("emulated"):
                entry["emulated"]["cliff"] = watch.describe()
    run.update(targets=described)
