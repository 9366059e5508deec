"""What every measured fio pass needs besides its job file: how long fio runs, how long it gets to stop, and the
byte counters of the device under a target. Shared by :class:`iolab.engine.runner.FioEngine` (a pass per target)
and :mod:`iolab.engine.simultaneous` (a pass for every target at once)."""
from __future__ import annotations

import logging
import os

from iolab.core.errors import IolabError
from iolab.engine import watchdog

log = logging.getLogger(__name__)

#: How long fio gets to stop after SIGINT before it is killed.
STOP_GRACE_S = 10


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
