"""Waiting for a benchmark process with a progress bar (tqdm: a terminal bar or a Jupyter widget),
and, where no bar is shown because stderr is a log (CI, ``2> file``), one line per finished test."""
from __future__ import annotations

import signal
import sys
import time
from typing import Callable

from iolab.core import processes

#: Outcomes of :func:`wait` other than the process ending by itself.
LIMIT, GONE = "limit", "gone"


def enabled(progress: bool | None) -> bool:
    """``None`` means: show bars on a terminal and in Jupyter (as widgets), not in logs."""
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def log_lines(progress: bool | None) -> bool:
    """One line per test instead of bars: progress not switched off and no terminal or Jupyter to draw in."""
    return progress is None and not enabled(None)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class StepLines:
    """``iolab: test 3/8 rnd4k-q1t1 done in 21 s; elapsed 1 min 05 s, ETA 1 min 48 s`` on stderr.

    The ETA assumes the tests still to come take as long as the mean of those
    done. Silent unless :func:`log_lines` (a terminal has the bars instead).
    """

    def __init__(self, total: int, progress: bool | None, *, stream=None, clock: Callable[[], float] = time.monotonic):
        self.total, self.on, self.clock = total, log_lines(progress), clock
        self.stream = stream
        self.started = self.test_started = clock()

    def start(self) -> None:
        """A test begins (pauses between tests count to the run, not to the test)."""
        self.test_started = self.clock()

    def done(self, number: int, name: str) -> str:
        """Log that test ``number`` (1-based) of ``total`` ended; returns the line."""
        now = self.clock()
        elapsed = now - self.started
        remaining = self.total - number
        eta = elapsed / number * remaining if number else 0.0
        line = (f"iolab: test {number}/{self.total} {name} done in {_duration(now - self.test_started)}; "
                f"elapsed {_duration(elapsed)}, ETA {_duration(eta)}")
        if self.on:
            stream = self.stream or sys.stderr
            stream.write(line + "\n")
            stream.flush()
        return line


def wait(proc, label: str, expected: float | None = None, *, progress: bool | None = None,
         limit: float | None = None, alive: Callable[[], bool] | None = None,
         poll: float = 0.2) -> str | None:
    """Wait for ``proc``; the bar fills over ``expected`` seconds (or counts up).

    Returns None when the process ended, :data:`LIMIT` when it still runs after
    ``limit`` seconds, :data:`GONE` when ``alive()`` (e.g. "the database server
    still runs") turned false first. Stopping the process is the caller's job.
    """
    from tqdm.auto import tqdm
    started = time.monotonic()
    with tqdm(total=round(expected, 1) if expected else None, desc=label, unit="s", leave=True,
              disable=not enabled(progress),
              bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s" if expected
              else "{desc}: {elapsed}") as bar:
        while proc.poll() is None:
            time.sleep(poll)
            now = time.monotonic() - started
            if expected:
                bar.n = min(expected, now)
            bar.refresh()
            if limit is not None and now > limit:
                return LIMIT
            if alive is not None and not alive() and proc.poll() is None:
                return GONE
    return None


#: What :func:`stop` had to do: nothing (the process had ended), SIGINT was enough, or SIGKILL.
ENDED, BY_SIGINT, BY_SIGKILL = None, "SIGINT", "SIGKILL"


def stop(proc, grace: float = 10.0) -> str | None:
    """SIGINT (fio stops its jobs and writes what it has, also as a client), then SIGKILL after ``grace``
    to it and its descendants (fio's job processes would outlive it).

    Returns :data:`ENDED`, :data:`BY_SIGINT` or :data:`BY_SIGKILL`. A process
    that outlives SIGKILL by ``grace`` seconds (stuck in the kernel, D state)
    raises :class:`~iolab.core.errors.IolabError` naming it, rather than waiting forever.
    """
    steps = processes.end(proc, first=signal.SIGINT, grace=grace, family=True, kill_wait=grace)
    return steps[-1] if steps else ENDED
