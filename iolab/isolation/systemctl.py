"""Asking systemd to end a unit: what both the scope backend (:mod:`iolab.isolation.systemd_scope`)
and the clean-up of stale groups (:func:`iolab.isolation.cgroups.remove_stale`) need.
"""
from __future__ import annotations

import logging
import shutil
import subprocess

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: the environment variable choosing the cgroup backend (auto, systemd, cgroupfs)
ENV = "IOLAB_CGROUP_BACKEND"


def which(program: str) -> str:
    """The path of a systemd tool; an IolabError naming the way out when it is missing."""
    path = shutil.which(program)
    if path is None:
        raise IolabError(f"{program} not found on PATH", context="systemd cgroup backend",
                         hint=f"install systemd, or set {ENV}=cgroupfs")
    return path


def stop_unit(unit: str, *, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """``systemctl stop <unit>`` (ends every task still in a scope); a failure is an IolabError."""
    argv = [which("systemctl"), "stop", unit]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise IolabError(f"did not return within {timeout:.0f} s", context=" ".join(argv)) from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise IolabError(f"exited with {proc.returncode}: {detail}", context=" ".join(argv))
    log.info("systemctl stop %s", unit)
    return proc
