"""The ``steadystate`` engine: the ``steady-state`` recipe (SNIA PTS style) with a loop of its own.

Like :mod:`iolab.classic.sustained` the tests are plain fio jobs, run, confined and annotated
exactly as by :class:`iolab.engine.runner.FioEngine` (``self.measure_step``); what differs is the order:

1. **purge** (:mod:`iolab.classic.purge`): only a real block device confirmed by its exact path
   (``--confirm``) whose queue takes discards is purged (``blkdiscard`` of the whole device);
   anything else is not, and the reason is recorded as a code (files, directories and emulated
   devices are never purged);
2. **preconditioning**: the ``precondition`` test (128 KiB sequential writes) moves twice the
   target's capacity (``options.precondition: 2x``, the PTS; :mod:`iolab.classic.capacity`: a block
   device's size, an emulated device's, a file target's size, a directory's test area), a declared
   size (``--precondition-size``, which wins), or nothing (``0``): fio's ``io_size`` over the whole
   capacity (``size``; at least the test area); under a time bound it stops in time for a
   measurement window of rounds (fio's ``runtime``, not time-based: whichever ends first). What each
   target got and why is in the manifest (``steady_state.precondition``) and ``steadystate.json``;
3. **rounds**: the ``round`` test again and again, each ``defaults.runtime`` seconds (``--runtime``),
   one results row a round (``rep`` and ``round`` the round's number), until every target's last
   five rounds meet the PTS criteria (:mod:`iolab.analysis.steadystate`), ``max_rounds`` or
   ``max_time`` (seconds from the start of preconditioning; a round that would not fit is not
   started). The bounds are :class:`iolab.classic.steady_options.Bounds`, from the recipe's
   options and the command line, recorded in the manifest (``steady_state.bounds``).

No layout pass: preconditioning writes the test file. The verdict per target goes into every round
row (:data:`STEADY_COLUMNS`: the steady-state figure, the verdict, why not, what a bound cut short
and the purge, the last three as reason codes; ``steady_window`` True for the rounds of the
measurement window), into the manifest and into ``steadystate.json`` in the run directory, with
each round's figure and the purge's record.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import time

from iolab.analysis.steadystate import WINDOW, Reason, encode, steady_state
from iolab.classic.capacity import capacity
from iolab.classic.purge import purge
from iolab.classic.steady_options import Bounds, Preconditioning, parse_options
from iolab.classic.sustained import record_emulated_cliffs
from iolab.core.errors import IolabError
from iolab.core.units import fio_size, parse_size
from iolab.engine.runner import FioEngine
from iolab.engine.store import utcnow

log = logging.getLogger(__name__)

PRECONDITION, ROUND = "precondition", "round"
#: the verdict's columns in each round row: the steady-state figure (the window's mean when steady, in
#: ``steady_metric``), the verdict, why not (reason codes), what a bound cut short and the purge (codes)
STEADY_COLUMNS = ("steady_figure", "steady_metric", "steady_reached", "steady_round", "steady_mean",
                  "steady_range_pct", "steady_slope_pct", "steady_why_not", "steady_cut", "steady_purge")


def _seconds(value: float) -> str:
    """fio's runtime, in whole milliseconds (fio reads a bare number as seconds, no fraction)."""
    return f"{max(1, round(value * 1000))}ms"


class Engine(FioEngine):
    """Runs an ``engine: steadystate`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    #: without ``--size`` a block device is preconditioned over its own capacity and its rounds' test area is
    #: the recipe's 1G or the whole device if smaller: the run checks it holds no more (:meth:`job_text`)
    fills_capacity = True

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
        round_s = float(tests[ROUND].runtime or recipe.runtime or 0)
        if round_s <= 0:
            raise IolabError("a round needs a runtime (defaults.runtime or --runtime)", context=ctx)
        self.bounds: Bounds = parse_options(recipe, round_s)
        self.round_s, self.max_rounds, self.max_time = round_s, self.bounds.max_rounds, self.bounds.max_time
        self.figure, self.precondition = self.bounds.figure, self.bounds.precondition
        # the round's runtime belongs to the round only: preconditioning moves its bytes, within the time bound
        tests[ROUND].runtime = self.round_s
        recipe.defaults["runtime"] = None
        tests[PRECONDITION].runtime = None
        if self.precondition and self.bounds.precondition_s is not None:  # no time_based: whichever ends first
            tests[PRECONDITION].fio = {**tests[PRECONDITION].fio, "runtime": _seconds(self.bounds.precondition_s)}
        #: what preconditioning writes on each target (bytes, the PTS's amount, why), once the targets are open
        self.plans: dict[str, Preconditioning] = {}
        recipe.defaults["repeat"] = self.max_rounds  # a round's label reads "round 3/25": at most 25
        self.written: dict[str, int] = {}  # bytes preconditioning wrote, per target
        #: preconditioning's block: fio may stop short of io_size by less than a block without a time bound
        self.pre_bs = parse_size(tests[PRECONDITION].bs or "128k", context=f"{ctx}: tests.precondition.bs")

    # -- the run ---------------------------------------------------------------------------------
    def execute(self) -> None:
        with self.session(buffered=False, direct_ok=True) as sandbox:
            self.run.update(isolation={**sandbox.describe(), "forced_o_direct": False},
                            steady_state={"bounds": self.bounds.record()})
            jobs = self.prepare(False)
            started = time.monotonic()
            purges = [purge(target) for target in self.targets]
            self.run.update(steady_state={**self.run.manifest["steady_state"], "purge": purges})
            try:
                self._precondition(sandbox, jobs)
                figures, stopped = self._rounds(sandbox, jobs, started)
            finally:
                self._record_emulated_cliffs()
        self.flag()
        self._verdict(figures, stopped, purges)

    def _record(self, step_id):
        return next(r for r in self.run.manifest["tests"] if r["name"] == step_id)

    # -- how much preconditioning writes -----------------------------------------------------------
    def preconditioning(self, target) -> Preconditioning:
        """Preconditioning on ``target``: twice its capacity unless a size is declared (kept for the verdict)."""
        self.plans[target.name] = self.bounds.plan(capacity(target, self.recipe.size))
        return self.plans[target.name]

    def prepare(self, force_direct: bool) -> dict:
        """Each target's preconditioning (the targets are open: an emulated device's size is known), then the
        job files."""
        for target in self.targets:
            plan = self.preconditioning(target)
            log.info("%s: preconditioning writes %s (%s; twice the capacity: %s, from the %s)", target.name,
                     fio_size(plan.bytes) if plan.bytes else "nothing", plan.why, fio_size(plan.pts),
                     plan.capacity_source)
        self.run.update(steady_state={**self.run.manifest.get("steady_state", {}),
                                      "precondition": {name: p.record() for name, p in self.plans.items()}})
        return super().prepare(force_direct)

    def job_text(self, step, target, force_direct: bool) -> str:
        plan = self.plans.get(target.name)
        device = plan is not None and plan.capacity_source == "device"  # a block device: never past its end
        if step.test == PRECONDITION and plan is not None and plan.bytes:  # over the whole capacity
            region = plan.capacity if device else max(plan.capacity, self.recipe.size)
            step = dataclasses.replace(step, options={**step.options, "size": fio_size(region),
                                                      "io_size": fio_size(plan.bytes)})
        elif step.test == ROUND and device and self.recipe.size > plan.capacity:  # no --size: the whole device
            step = dataclasses.replace(step, options={**step.options, "size": fio_size(plan.capacity)})
        return super().job_text(step, target, force_direct)

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
            log.info("preconditioning %s: %s of 128 KiB sequential writes%s", target.name,
                     fio_size(self.plans[target.name].bytes),
                     "" if self.bounds.precondition_s is None else f", {self.bounds.precondition_s:g} s at most")
            frame = self.measure_step(sandbox, step, target, 1, jobs[(step.id, target.name)])
            self.store(frame)
            moved = frame["io_bytes"].sum(min_count=1) if "io_bytes" in frame else math.nan
            self.written[target.name] = int(moved) if math.isfinite(float(moved)) else 0
            errors += [e for e in frame["error"].dropna().unique() if e]
        record.update(status="failed" if errors else "completed", reps=1, ended=utcnow(),
                      error="; ".join(dict.fromkeys(errors)) or None)
        self.run.save_manifest()
        if errors:
            raise IolabError(f"preconditioning failed: {record['error']}", context=self.recipe.name)

    def _rounds(self, sandbox, jobs, started) -> tuple[dict, Reason | None]:
        step = next(s for s in self.recipe.steps() if s.test == ROUND)
        record = self._record(step.id)
        record.update(status="running", started=utcnow())
        self.run.save_manifest()
        figures = {t.name: [] for t in self.targets}
        stopped, errors = None, []
        for number in range(1, self.max_rounds + 1):
            elapsed = time.monotonic() - started
            if self.max_time and elapsed + self.round_s > self.max_time:
                stopped = Reason("max_time", {"limit_s": self.max_time, "elapsed_s": round(elapsed, 1),
                                              "rounds": number - 1})
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
                stopped = Reason("round_failed", {"round": number})
                break
            verdicts = {name: steady_state(values) for name, values in figures.items()}
            log.info("round %d: %s", number, ", ".join(
                f"{name} {values[-1]:.6g} {self.figure}" + (" (steady)" if verdicts[name].reached else "")
                for name, values in figures.items()))
            if all(v.reached for v in verdicts.values()):
                break
        else:
            stopped = Reason("max_rounds", {"rounds": self.max_rounds})
        record.update(status="failed" if errors else "completed", ended=utcnow(),
                      error="; ".join(dict.fromkeys(errors)) or None)
        self.run.save_manifest()
        if stopped is not None:
            log.info("the rounds stopped: %s", stopped)
        return figures, stopped

    # -- the verdict -----------------------------------------------------------------------------
    def cut_short(self, name: str, stopped: Reason | None, reached: bool) -> list[Reason]:
        """What a bound cut short for target ``name``: preconditioning (none, or a declared size under the PTS's
        twice the capacity: ``precondition_off`` / ``precondition_under``; the time bound), the rounds (the
        round or time limit before steady state)."""
        bounds, cut, plan = self.bounds, [], self.plans.get(name)
        if plan is not None and plan.bytes == 0:
            cut.append(Reason("precondition_off", {"pts": plan.pts}))
        elif plan is not None and plan.bytes < plan.pts:
            cut.append(Reason("precondition_under", {"bytes": plan.bytes, "pts": plan.pts}))
        written = self.written.get(name)
        if (bounds.precondition_s is not None and written is not None and plan is not None
                and written <= plan.bytes - self.pre_bs):
            cut.append(Reason("precondition_time", {"written": written, "planned": plan.bytes,
                                                    "limit_s": round(bounds.precondition_s, 3)}))
        if stopped is not None and stopped.code in ("max_rounds", "max_time") and not reached:
            cut.append(stopped)
        return cut

    def _judged(self, name: str, values: list, stopped: Reason | None) -> tuple[dict, object]:
        """(what steadystate.json keeps, the verdict or None when a round has no figure)."""
        missing = [i + 1 for i, v in enumerate(values) if not math.isfinite(float(v))]
        if missing:  # a failed round has no figure: nothing to judge
            reasons = [Reason("no_figure", {"round": missing[0]})]
            return {"reached": False, "why_not": encode(reasons), "rounds": len(values)}, None
        verdict = steady_state(values)
        result = verdict.as_dict()
        if stopped is not None and stopped.code == "round_failed" and not verdict.reached:
            result["why_not"] = encode([stopped, *verdict.reasons])
        return result, verdict

    def _verdict(self, figures, stopped, purges) -> None:
        table = self.run.results
        added = STEADY_COLUMNS + ("steady_window", "round")
        for column in added:
            if column not in table:
                table[column] = None
        table = table.astype({c: object for c in added})
        found, purged = {}, {p["target"]: p["code"] for p in purges}
        for target in self.targets:
            values = figures.get(target.name) or []
            result, verdict = self._judged(target.name, values, stopped)
            cut = self.cut_short(target.name, stopped, bool(result["reached"]))
            plan = self.plans.get(target.name)
            result.update(cut=encode(cut), purge=purged.get(target.name),
                          figure=round(verdict.mean, 6) if verdict is not None and verdict.reached else None,
                          precondition=plan.record() if plan else None,
                          precondition_written=self.written.get(target.name))
            found[target.name] = result
            rows = table["target"].eq(target.name) & table["test"].eq(ROUND)
            table.loc[rows, "steady_figure"] = result["figure"]
            table.loc[rows, "steady_metric"] = self.figure
            table.loc[rows, "steady_reached"] = bool(result["reached"])
            table.loc[rows, "steady_why_not"] = result["why_not"]
            table.loc[rows, "steady_cut"] = result["cut"]
            table.loc[rows, "steady_purge"] = result["purge"]
            if verdict is not None:
                table.loc[rows, "steady_round"] = verdict.round
                table.loc[rows, "steady_mean"] = None if verdict.mean is None else round(verdict.mean, 6)
                table.loc[rows, "steady_range_pct"] = _rounded(verdict.range_pct, 3)
                table.loc[rows, "steady_slope_pct"] = _rounded(verdict.slope_pct, 3)
                table.loc[rows, "steady_window"] = table.loc[rows, "rep"].isin(verdict.window)
            log.info("%s: steady state %s%s", target.name,
                     f"reached at round {verdict.round}" if result["reached"] else f"not reached: {result['why_not']}",
                     f"; cut short: {result['cut']}" if result["cut"] else "")
        if not table.empty:
            self.run.set_results(table)
        self.run.update(steady_state={**self.run.manifest.get("steady_state", {}),
                                      "stopped": None if stopped is None else str(stopped),
                                      "targets": {name: {k: found[name].get(k) for k in
                                                         ("reached", "round", "figure", "why_not", "cut")}
                                                  for name in found}})
        self.run.write("steadystate.json", json.dumps({
            "figure": self.figure, "window": WINDOW, "max_range_pct": 20, "max_slope_pct": 10,
            "round_s": self.round_s, "max_rounds": self.max_rounds, "max_time_s": self.max_time,
            "precondition": self.precondition,  # the setting: 2x (the capacity), a size, 0; each target's: below
            "stopped": None if stopped is None else str(stopped), "purge": purges,
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


def _rounded(value, digits: int):
    return None if value is None or not math.isfinite(value) else round(value, digits)
