"""The ``steadystate`` engine: the ``steady-state`` recipe (SNIA PTS style) with a loop of its own.

Like :mod:`iolab.classic.sustained` the tests are plain fio jobs, run, confined and annotated
exactly as by :class:`iolab.engine.runner.FioEngine` (``self.measure_step``); what differs is the order:

1. **purge** (:func:`purge_plan`): only a real block device given with ``--confirm`` whose queue
   supports discard is purged (``blkdiscard`` of the whole device); anything else is skipped and
   the reason recorded (files, directories and emulated devices are never purged);
2. **preconditioning**: the ``precondition`` test (128 KiB sequential writes) moves twice the test
   area (``options.precondition: 2x``), a declared size, or nothing (``0``): fio's ``io_size``;
3. **rounds**: the ``round`` test again and again, each ``defaults.runtime`` seconds (``--runtime``),
   one results row a round (``rep`` and ``round`` the round's number), until every target's last
   five rounds meet the PTS criteria (:mod:`iolab.analysis.steadystate`), ``options.max_rounds``
   or ``options.max_time`` (seconds from the start of preconditioning; a round that would not fit
   is not started).

No layout pass: preconditioning writes the test file. The verdict per target goes into every round
row (:data:`STEADY_COLUMNS`, ``steady_window`` True for the rounds of the measurement window) and
into ``steadystate.json`` in the run directory, with each round's figure and the purge's record.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time

from iolab.analysis.steadystate import WINDOW, steady_state
from iolab.classic.sustained import record_emulated_cliffs
from iolab.core.errors import IolabError
from iolab.core.units import fio_size, parse_size
from iolab.engine.runner import FioEngine
from iolab.engine.store import utcnow

log = logging.getLogger(__name__)

PRECONDITION, ROUND = "precondition", "round"
FIGURES = ("iops", "bw_mbps")
#: the verdict's columns in each round row
STEADY_COLUMNS = ("steady_reached", "steady_round", "steady_mean", "steady_range_pct", "steady_slope_pct",
                  "steady_why_not")
OPTIONS = {"precondition", "max_rounds", "max_time", "figure"}


def precondition_bytes(value, area: int, context: str) -> int:
    """How many bytes preconditioning writes: ``Nx`` times the test area, a size, or 0 (none)."""
    text = str(value if value is not None else "2x").strip().lower()
    if text.endswith("x"):
        try:
            factor = float(text[:-1])
        except ValueError:
            raise IolabError(f"{value!r} is neither a size nor a multiple of the test area (2x)",
                             context=context) from None
        if factor < 0:
            raise IolabError(f"{value!r}: a negative multiple", context=context)
        return int(factor * area)
    if text in ("0", "none", "no"):
        return 0
    return parse_size(value, context=context)


def _discard_supported(device: str) -> tuple[bool, str]:
    name = os.path.basename(os.path.realpath(device))
    sys_dir = f"/sys/class/block/{name}"
    queue = f"{sys_dir}/queue" if os.path.isdir(f"{sys_dir}/queue") else f"{sys_dir}/../queue"
    try:
        with open(f"{queue}/discard_max_bytes") as f:
            limit = int(f.read().strip() or 0)
    except (OSError, ValueError) as exc:
        return False, f"cannot read the device's discard limit ({exc})"
    return (limit > 0, "" if limit > 0 else f"{name} does not support discard (queue/discard_max_bytes is 0)")


def purge_plan(target) -> tuple[list[str] | None, str]:
    """The purge command for ``target`` (None: skipped) and what happens, in words."""
    if target.kind == "emulated":
        return None, "skipped: an emulated device starts empty (a new loop device); no purge"
    if target.kind != "block":
        return None, f"skipped: a {target.kind} on a file system is not a device; only a whole block device is purged"
    if not target.confirm:
        return None, "skipped: purging a device needs --confirm for it"
    supported, why = _discard_supported(target.path)
    if not supported:
        return None, f"skipped: {why}"
    if shutil.which("blkdiscard") is None:
        return None, "skipped: blkdiscard (util-linux) is not installed"
    return (["blkdiscard", "--force", target.path],
            "blkdiscard of the whole device (a TRIM of every block; not a PTS secure erase or sanitize)")


class Engine(FioEngine):
    """Runs an ``engine: steadystate`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    def __init__(self, recipe, targets, run_, **kwargs):
        super().__init__(recipe, targets, run_, **kwargs)
        ctx = recipe.name
        tests = {t.name: t for t in recipe.tests}
        for name in (PRECONDITION, ROUND):
            if name not in tests:
                raise IolabError(f"the steadystate engine needs a test named {name!r}", context=ctx)
        if len(recipe.tests) != 2 or any(len(t.rw) != 1 or len(t.iodepth) != 1 or len(t.numjobs) != 1
                                         for t in recipe.tests):
            raise IolabError("the steadystate engine runs two tests, precondition and round, each one fio job "
                             "(one rw, one iodepth, one numjobs)", context=ctx)
        unknown = set(recipe.options) - OPTIONS
        if unknown:
            raise IolabError(f"unknown option(s) {sorted(unknown)}", context=f"{ctx}: options",
                             hint=f"known: {', '.join(sorted(OPTIONS))}")
        opts = recipe.options
        self.round_s = float(tests[ROUND].runtime or recipe.runtime or 0)
        if self.round_s <= 0:
            raise IolabError("a round needs a runtime (defaults.runtime or --runtime)", context=ctx)
        self.max_rounds = int(opts.get("max_rounds", 25))
        if self.max_rounds < WINDOW:
            raise IolabError(f"max_rounds {self.max_rounds}: the measurement window needs {WINDOW} rounds",
                             context=f"{ctx}: options.max_rounds")
        self.max_time = float(opts.get("max_time") or 0)
        if self.max_time < 0:
            raise IolabError(f"max_time {self.max_time}: negative", context=f"{ctx}: options.max_time")
        self.figure = str(opts.get("figure", "iops"))
        if self.figure not in FIGURES:
            raise IolabError(f"figure {self.figure!r}: one of {', '.join(FIGURES)}", context=f"{ctx}: options.figure")
        self.precondition = precondition_bytes(opts.get("precondition"), recipe.size,
                                               f"{ctx}: options.precondition")
        # the round's runtime belongs to the round only: preconditioning moves its bytes, however long
        tests[ROUND].runtime = self.round_s
        recipe.defaults["runtime"] = None
        tests[PRECONDITION].runtime = None
        if self.precondition:
            tests[PRECONDITION].fio = {**tests[PRECONDITION].fio, "io_size": fio_size(self.precondition)}
        recipe.defaults["repeat"] = self.max_rounds  # a round's label reads "round 3/25": at most 25

    # -- the run ---------------------------------------------------------------------------------
    def execute(self) -> None:
        with self.session(buffered=False, direct_ok=True) as sandbox:
            self.run.update(isolation={**sandbox.describe(), "forced_o_direct": False})
            jobs = self.prepare(False)
            started = time.monotonic()
            purges = [self._purge(target) for target in self.targets]
            try:
                self._precondition(sandbox, jobs)
                figures, stopped = self._rounds(sandbox, jobs, started)
            finally:
                self._record_emulated_cliffs()
        self.flag()
        self._verdict(figures, stopped, purges)

    def _purge(self, target) -> dict:
        argv, what = purge_plan(target)
        record = {"target": target.name, "purged": False, "what": what}
        if argv is None:
            log.info("purge of %s %s", target.name, what)
            return record
        log.info("purging %s: %s", target.name, " ".join(argv))
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise IolabError(f"the purge failed: {(proc.stderr or proc.stdout).strip() or proc.returncode}",
                             context=target.path, hint="run without purging: the recipe cannot skip it by itself")
        return {**record, "purged": True, "command": argv}

    def _record(self, step_id):
        return next(r for r in self.run.manifest["tests"] if r["name"] == step_id)

    def _precondition(self, sandbox, jobs) -> None:
        step = next(s for s in self.recipe.steps() if s.test == PRECONDITION)
        record = self._record(step.id)
        if not self.precondition:
            record.update(status="skipped", error="options.precondition is 0: no preconditioning")
            self.run.save_manifest()
            return
        record.update(status="running", started=utcnow())
        self.run.save_manifest()
        errors = []
        for target in self.targets:
            log.info("preconditioning %s: %s of 128 KiB sequential writes", target.name, fio_size(self.precondition))
            frame = self.measure_step(sandbox, step, target, 1, jobs[(step.id, target.name)])
            self.store(frame)
            errors += [e for e in frame["error"].dropna().unique() if e]
        record.update(status="failed" if errors else "completed", reps=1, ended=utcnow(),
                      error="; ".join(dict.fromkeys(errors)) or None)
        self.run.save_manifest()
        if errors:
            raise IolabError(f"preconditioning failed: {record['error']}", context=self.recipe.name)

    def _rounds(self, sandbox, jobs, started) -> tuple[dict, str | None]:
        step = next(s for s in self.recipe.steps() if s.test == ROUND)
        record = self._record(step.id)
        record.update(status="running", started=utcnow())
        self.run.save_manifest()
        figures = {t.name: [] for t in self.targets}
        stopped, errors = None, []
        for number in range(1, self.max_rounds + 1):
            elapsed = time.monotonic() - started
            if self.max_time and elapsed + self.round_s > self.max_time:
                stopped = f"max_time {self.max_time:g} s: {elapsed:.0f} s gone, no time for round {number}"
                break
            for target in self.targets:  # interleaved: drift hits every target alike
                frame = self.measure_step(sandbox, step, target, number, jobs[(step.id, target.name)])
                frame["round"] = number
                self.store(frame)
                errors += [e for e in frame["error"].dropna().unique() if e]
                figures[target.name].append(frame[self.figure].sum(min_count=1))
            record["reps"] = number
            self.run.save_manifest()
            if errors:
                stopped = f"round {number} failed"
                break
            verdicts = {name: steady_state(values) for name, values in figures.items()}
            log.info("round %d: %s", number, ", ".join(
                f"{name} {values[-1]:.6g} {self.figure}" + (" (steady)" if verdicts[name].reached else "")
                for name, values in figures.items()))
            if all(v.reached for v in verdicts.values()):
                break
        else:
            stopped = f"max_rounds {self.max_rounds} reached"
        record.update(status="failed" if errors else "completed", ended=utcnow(),
                      error="; ".join(dict.fromkeys(errors)) or None)
        self.run.save_manifest()
        return figures, stopped

    # -- the verdict -----------------------------------------------------------------------------
    def _verdict(self, figures, stopped, purges) -> None:
        table = self.run.results
        added = STEADY_COLUMNS + ("steady_window", "round")
        for column in added:
            if column not in table:
                table[column] = None
        table = table.astype({c: object for c in added})
        found = {}
        for target in self.targets:
            values = figures.get(target.name) or []
            try:
                verdict = steady_state(values)
            except IolabError as exc:  # a failed round has no figure
                log.warning("no steady-state verdict for %s: %s", target.name, exc)
                found[target.name] = {"reached": False, "why_not": str(exc), "rounds": len(values)}
                continue
            result = verdict.as_dict()
            if not verdict.reached and stopped:
                result["why_not"] = f"{stopped}; {result['why_not']}"
            found[target.name] = result
            rows = table["target"].eq(target.name) & table["test"].eq(ROUND)
            table.loc[rows, "steady_reached"] = verdict.reached
            table.loc[rows, "steady_round"] = verdict.round
            table.loc[rows, "steady_mean"] = None if verdict.mean is None else round(verdict.mean, 6)
            table.loc[rows, "steady_range_pct"] = None if verdict.range_pct is None else round(verdict.range_pct, 3)
            table.loc[rows, "steady_slope_pct"] = None if verdict.slope_pct is None else round(verdict.slope_pct, 3)
            table.loc[rows, "steady_why_not"] = result["why_not"]
            table.loc[rows, "steady_window"] = table.loc[rows, "rep"].isin(verdict.window)
            log.info("%s: steady state %s", target.name,
                     f"reached at round {verdict.round}" if verdict.reached else f"not reached: {result['why_not']}")
        if not table.empty:
            self.run.set_results(table)
        self.run.write("steadystate.json", json.dumps({
            "figure": self.figure, "window": WINDOW, "max_range_pct": 20, "max_slope_pct": 10,
            "round_s": self.round_s, "max_rounds": self.max_rounds, "max_time_s": self.max_time or None,
            "precondition_bytes": self.precondition, "stopped": stopped, "purge": purges,
            "targets": {name: {**found.get(name, {}), "figures": [float(v) for v in values]}
                        for name, values in figures.items()}}, indent=2, default=str))

    # -- as the sustained engine -----------------------------------------------------------------
    def _record_emulated_cliffs(self) -> None:
        record_emulated_cliffs(self.run, self.targets)

    def floor_bps(self, target) -> float:
        """The watchdog's slowest rate: an emulated device's rate after its cliff, when it has one."""
        floor = super().floor_bps(target)
        cliff = getattr(getattr(target.emulated, "profile", None), "cliff", None)
        return min(floor, cliff.write_bps) if cliff is not None else floor
