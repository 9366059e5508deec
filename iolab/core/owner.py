"""Who owns a piece of state: a process id plus that process's start time and the boot.

A PID alone is not an identity: after the owner dies the kernel may hand the
same number to another process (or, after a reboot, to anything). The start
time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and the boot id
together tell the owner from a reused PID.
"""
from __future__ import annotations

import os
from pathlib import Path


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])  # field 22 overall; fields[0] is field 3 (state)


def current() -> dict:
    """This process as an owner record: ``{"pid", "pid_start", "boot_id"}``."""
    pid = os.getpid()
    return {"pid": pid, "pid_start": start_ticks(pid), "boot_id": boot_id()}


def alive(record: dict) -> bool | None:
    """Whether the owner in ``record`` still runs; None when the record names no PID."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    if record.get("boot_id") and record["boot_id"] != boot_id():
        return False
    started = start_ticks(pid)
    if started is None:
        return False
    if record.get("pid_start") is not None and record["pid_start"] != started:
        return False  # the PID was reused by a younger process
    return True
