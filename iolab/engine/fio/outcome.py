"""What became of one fio process: its numbers, or the reason there are none.

fio can end without usable numbers in ways its exit code alone does not
show: it aborts a job before any I/O and still exits 0 ("fio: /dev/loop0
appears mounted, and 'allow_mounted_write' isn't set. Aborting."), it is
killed by a signal (no JSON at all, or half of it), or iolab's watchdog
stops it. :func:`judge` turns fio's output, stderr and exit status into the
parsed rows with an ``error`` on every row that must not count as a result,
worded with fio's own text where fio printed any.
"""
from __future__ import annotations

import signal

import pandas as pd

from iolab.core.columns import PARSE_COLUMNS
from iolab.core.errors import IolabError
from iolab.engine.fio.parse import parse_output

#: Lines of fio's stderr that are chatter, not a reason.
_CHATTER = ("note:", "{", "}", "Jobs:", "Starting ")


def killed_by(returncode: int | None) -> str | None:
    """``"fio killed by SIGKILL"`` for a process that a signal ended, else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"fio killed by {name}"


def fio_reason(stderr: str) -> str | None:
    """The text fio printed about why it stopped: its ``fio: ...`` lines, else its last words."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    own = [line for line in lines if line.startswith("fio:")]
    if own:
        return "; ".join(dict.fromkeys(own))
    words = [line for line in lines if not line.startswith(_CHATTER)]
    return "; ".join(words[-2:]) or None


def empty_frame(job: str | None, error: str) -> pd.DataFrame:
    """One row with every parse column (no numbers) carrying ``error``."""
    row = {column: None for column in PARSE_COLUMNS}
    row.update(job=job, error=error)
    frame = pd.DataFrame([row], columns=PARSE_COLUMNS)
    for column in ("bw_mbps", "iops", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us",
                   "lat_max_us", "cpu_usr_pct", "cpu_sys_pct", "runtime_s"):
        frame[column] = frame[column].astype("float64")
    for column in ("groupid", "bs", "iodepth", "numjobs", "io_bytes"):
        frame[column] = frame[column].astype("Int64")
    return frame


def _merge(frame: pd.DataFrame, mask, message: str) -> pd.DataFrame:
    """Put ``message`` in front of the error of the rows in ``mask``."""
    old = frame["error"]
    frame.loc[mask, "error"] = [message if pd.isna(e) or not e else f"{message}; {e}" for e in old[mask]]
    return frame


def judge(stdout: str, stderr: str, returncode: int | None, *, job: str | None,
          stopped: str | None = None) -> pd.DataFrame:
    """Parse fio's output and mark every row that is not a result.

    ``stopped`` is why iolab itself stopped fio (the watchdog, an interrupt);
    it goes first in the error of every row. A signal that ended fio, a
    non-zero exit and a job without any I/O each make the rows concerned
    errors too, with fio's own reason where it printed one.
    """
    reason = fio_reason(stderr)
    try:
        frame = parse_output(stdout + "\n" + stderr)
    except IolabError as exc:
        cause = stopped or killed_by(returncode) or (
            f"fio exited with {returncode}: {reason or exc}" if returncode else f"fio gave no result: {reason or exc}")
        return empty_frame(job, cause)
    frame = frame.copy()
    if frame.empty:
        return empty_frame(job, stopped or killed_by(returncode) or f"fio ran no job: {reason or 'no reason printed'}")
    cause = stopped or killed_by(returncode)
    if cause:
        return _merge(frame, frame.index == frame.index, cause)
    if returncode:
        quiet = frame["error"].isna()
        frame.loc[quiet, "error"] = reason or f"fio exited with {returncode}"
    no_io = frame["io_bytes"].isna() & frame["error"].isna()
    if no_io.any():
        frame.loc[no_io, "error"] = f"fio did no I/O: {reason or 'no reason printed'}"
    return frame
