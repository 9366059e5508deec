"""Ending a child process: SIGTERM, a grace period, then SIGKILL."""
from __future__ import annotations

import subprocess


def end(proc: subprocess.Popen, *, grace: float) -> int:
    """Terminate ``proc``, give it ``grace`` seconds, then kill it; returns its exit status.

    Always reaps it, so no zombie is left behind.
    """
    proc.terminate()
    try:
        return proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
