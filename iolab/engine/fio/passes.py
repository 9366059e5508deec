"""What every measured fio pass needs besides its job file: its name on the progress line, how long fio runs, how
long it gets to stop, the byte counters of the device under a target, and what the pass measured
(:class:`Measured`). One pass is one fio process, measured by :meth:`iolab.engine.runner.FioEngine.fio_pass` for one
target (a run's targets one after another) or for every target at once (:mod:`iolab.engine.simultaneous`)."""
from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.engine import watchdog
from iolab.engine.fio import process as fioproc
from iolab.isolation import contention
from iolab.isolation.sandbox import drop_caches

log = logging.getLogger(__name__)

#: How long fio gets to stop after SIGINT before it is killed.
STOP_GRACE_S = 10
#: the CPU figures of the one fio process of a pass over several targets: the first target's probe samples them,
#: every target's rows repeat them
CPU_FIGURES = ("cpu_s", "cpu_wait_s", "cpu_got_pct", "cpu_pct", "cpu_want_pct")


@dataclasses.dataclass
class Measured:
    """One pass, measured: how fio ended (:class:`iolab.engine.fio.process.Finished`), its rows (every target's,
    fio's job names), and per target (in the pass's order) the device's byte counts, the sandbox's evidence with
    the contention probe's figures, and the drives' temperatures (:meth:`iolab.engine.devicewatch.DeviceWatch.test`)."""
    done: object
    frame: object
    devices: list
    evidence: list
    temperatures: list


def pass_label(step, rep: int, repeat: int, where: str | None = None) -> str:
    """A pass's name on the progress line: ``seq-read @sda 2/3``, ``... warm-up`` (``rep`` 0); ``where``: the
    target(s) measured, when the run has several."""
    return step.id + (f" @{where}" if where else "") + (" warm-up" if rep == 0 else f" {rep}/{repeat}")


def temperature_files(raw: Path, targets) -> list[Path]:
    """Where each target's drive temperatures of a pass go: beside ``raw`` (one target), else one per target
    (``<step>-1.<target>.json``'s ``.temp.csv``)."""
    return [raw] if len(targets) == 1 else [raw.with_name(f"{raw.stem}.{t.name}.json") for t in targets]


def evidence(sandbox, probes) -> list[dict]:
    """Per target, the sandbox's evidence after a pass with the target's contention figures (its probe's); with
    several targets the one fio's CPU figures (the first probe's) on every one."""
    common = sandbox.test_evidence()
    figures = [probe.finish() for probe in probes]
    cpu = {k: figures[0].get(k) for k in CPU_FIGURES} if len(figures) > 1 else {}
    return [{**common, **f, **cpu} for f in figures]


def pass_suffix(rep: int) -> str:
    """The end of a pass's raw output's name: ``-warmup.json`` for the unrecorded warm-up (``rep`` 0), else ``-N.json``."""
    return "-warmup.json" if rep == 0 else f"-{rep}.json"


def expected_seconds(recipe, step) -> float | None:
    """How long fio runs ``step`` (its runtime and the recipe's ramp_time), for progress; None: not timed."""
    runtime = step.options.get("runtime")
    if runtime is None:
        return None
    return watchdog.fio_seconds(runtime) + recipe.ramp_time


def device_counter(target):
    """Byte counters of the block device serving the target (None: no block device, e.g. tmpfs)."""
    from iolab.isolation.blockstat import BlockCounter
    path = target.filename
    if path and not os.path.exists(path):  # fio lays the test file out itself
        path = os.path.dirname(path)
    try:
        return BlockCounter.for_path(path) if path else None
    except IolabError as exc:
        log.info("no block device counters for %s: %s", path, exc)
        return None


def prepare_cache(sandbox, step) -> None:
    """The page cache as ``step`` must find it before a pass: dropped for a cold test (whatever the isolation),
    the sandbox's own emptied for an isolated one."""
    if step.cache == "cold":
        drop_caches()
    elif step.cache == "isolation":
        sandbox.prepare_test()


def measured_run(sandbox, popen, argv, targets, raw, *, label, expected, limit, show_progress, drop_empty, cwd,
                 grace=STOP_GRACE_S):
    """Run ``argv`` (started by ``popen``, in ``sandbox``; its stdout in ``raw``; ``grace``: its time to stop after
    SIGINT) with each target's device counted and a contention probe per target (CPU starved? device shared?): how
    it ended (:class:`iolab.engine.fio.process.Finished`), per target the device's byte counts and the evidence."""
    counters = [device_counter(t) for t in targets]
    before = [c.snapshot() if c else None for c in counters]
    probes = [contention.Probe(c.device if c else None, sandbox) for c in counters]
    done = fioproc.run(argv, raw, popen=probes[0].watching(popen), label=label, expected=expected, limit=limit,
                       show_progress=show_progress, grace=grace, drop_empty=drop_empty, cwd=cwd)
    devices = [c.delta(b) if c else {} for c, b in zip(counters, before)]
    return done, devices, evidence(sandbox, probes)
