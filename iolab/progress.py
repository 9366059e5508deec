"""Waiting for a benchmark process with a progress bar (tqdm: a terminal bar or a Jupyter widget)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Callable

#: Outcomes of :func:`wait` other than the process ending by itself.
LIMIT, GONE = "limit", "gone"


def enabled(progress: bool | None) -> bool:
    """``None`` means: show bars on a terminal and in Jupyter (as widgets), not in logs."""
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty() or "ipykernel" in sys.modules


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


def stop(proc, grace: float = 10.0) -> None:
    """SIGINT (fio stops its jobs and writes what it has, also as a client), then SIGKILL after ``grace``."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
