"""One fio process, start to end: its output in the raw file, a watchdog, Ctrl-C handled.

:func:`run` never raises for what happens to fio itself: a watchdog stop, a
signal from outside and an interrupt all come back in the :class:`Finished`
record, so the caller can keep what fio wrote (``raw/<test>-<rep>.json``),
record why, and only then re-raise the interrupt. The rule for the run:
a test whose fio was killed or stopped is ``failed`` and the run goes on
with the next test; only an interrupt (Ctrl-C, SIGTERM) ends the run.
"""
from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from pathlib import Path

from iolab.engine import fio
from iolab.core import progress
from iolab.engine.watchdog import Limit

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Finished:
    returncode: int | None
    stderr: str
    elapsed: float
    #: why iolab stopped fio itself (watchdog, interrupt), else None
    stopped: str | None = None
    #: the KeyboardInterrupt (or Terminated) to re-raise once what fio wrote is kept
    interrupt: BaseException | None = None


def _interrupt_reason(exc: BaseException) -> str:
    how = "SIGTERM" if type(exc).__name__ == "Terminated" else "the user (Ctrl-C)"
    return f"interrupted by {how}"


def run(argv: list[str], raw: Path, *, popen, label: str, expected: float | None, limit: Limit | None,
        show_progress: bool | None, grace: float, drop_empty: bool = True, cwd: Path | None = None) -> Finished:
    """Run fio with stdout into ``raw``; stop it when ``limit`` passes or on Ctrl-C.

    With ``drop_empty``, an empty ``raw`` (fio stopped before it wrote a
    byte) is removed: no 0-byte "fio output" is left for readers to trip over.
    ``cwd`` is fio's working directory: what fio writes by a relative name
    (``<job>.prerun.txt`` for ``exec_prerun``, logs) lands there.
    """
    raw.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = stopped = interrupt = None
    stderr = ""
    try:
        with open(raw, "wb") as out, tempfile.TemporaryFile() as err:
            try:  # an interrupt at any point from here on stops fio and is handed back
                proc = fio.start(argv, stdout=out, stderr=err, popen=popen, cwd=cwd)
                outcome = progress.wait(proc, label, expected, progress=show_progress,
                                        limit=limit.seconds if limit else None)
                if outcome == progress.LIMIT:
                    how = progress.stop(proc, grace)
                    if how is progress.ENDED:  # fio ended by itself as the limit passed: its numbers are whole
                        log.info("%s: fio ended by itself as its watchdog limit (%.0f s) passed", label, limit.seconds)
                    else:
                        stopped = limit.reason(f"stopped with {how}" + (
                            f" ({grace:.0f} s after SIGINT did not stop it)" if how == progress.BY_SIGKILL else ""))
                        log.warning("%s: %s", label, stopped)
            except KeyboardInterrupt as exc:
                interrupt, stopped = exc, _interrupt_reason(exc)
                if proc is not None:
                    progress.stop(proc, grace)
            err.seek(0)
            stderr = err.read().decode(errors="replace")
    finally:
        if drop_empty and raw.exists() and raw.stat().st_size == 0:
            raw.unlink()
    return Finished(proc.returncode if proc is not None else None, stderr, time.monotonic() - started,
                    stopped, interrupt)


def read_raw(raw: Path) -> str:
    """What fio wrote to stdout ('' when it wrote nothing and the file was removed)."""
    return raw.read_text(errors="replace") if raw.exists() else ""
