"""Who owns a piece of state: a process id plus that process's start time, the boot and the PID
namespace.

A PID alone is not an identity: after the owner dies the kernel may hand the
same number to another process (or, after a reboot, to anything). The start
time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and the boot id
together tell the owner from a reused PID. A PID means something only in its PID
namespace (``/proc/<pid>/ns/pid``'s inode): a process judging an owner of another
namespace would look up an unrelated process (or none) under that number, so it
does not judge (:func:`verdict` says ``"foreign"``). An owner of an earlier boot is
gone whatever its namespace.
"""
from __future__ import annotations

import os
from pathlib import Path

from iolab.core import procstat

#: the inode of the machine's first PID namespace (the kernel's PROC_PID_INIT_INO)
INITIAL_PID_NS = 0xEFFFFFFC
ALIVE, GONE, FOREIGN = "alive", "gone", "foreign"


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def pid_namespace(pid: int | str = "self") -> int | None:
    """The inode that names the PID namespace of ``pid`` (None when it cannot be read)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None: no such process)."""
    found = procstat.stat_of(pid)
    return found.start if found else None


def verdict(pid: int, start: int | None = None, boot: str | None = None,
            pidns: int | None = None) -> tuple[str, str]:
    """Whether the owner so described still runs, judged from this process: ``(ALIVE|GONE|FOREIGN, why)``.

    An owner of another boot is gone. One of another PID namespace than this process's is
    ``FOREIGN``: not judged. An owner that names no namespace (recorded before iolab recorded
    them) is judged only from the machine's first namespace, where such owners ran.
    """
    if boot and boot != boot_id():
        return GONE, f"it ran in an earlier boot ({boot})"
    here = pid_namespace()
    if (pidns if pidns is not None else INITIAL_PID_NS) != here:
        theirs = f"PID namespace pid:[{pidns}]" if pidns is not None else "an unrecorded PID namespace"
        return FOREIGN, (f"its owner lives in {theirs}, this process in pid:[{here}]; PID {pid} here is not "
                         f"that process, so it is not judged (run iolab cleanup in the owner's namespace)")
    if procstat.ended(pid):
        return GONE, f"PID {pid} is gone"
    if start is not None and start_ticks(pid) != start:
        return GONE, f"PID {pid} now belongs to a younger process"
    return ALIVE, f"PID {pid} runs"


def current() -> dict:
    """This process as an owner record: ``{"pid", "pid_start", "boot_id", "pid_ns"}``."""
    pid = os.getpid()
    return {"pid": pid, "pid_start": start_ticks(pid), "boot_id": boot_id(), "pid_ns": pid_namespace()}


def alive(record: dict) -> bool | None:
    """Whether the owner in ``record`` still runs; None when the record names no PID, or when its
    owner lives in another PID namespace (not judged: see :func:`verdict`)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    start, boot, pidns = record.get("pid_start"), record.get("boot_id"), record.get("pid_ns")
    found, _ = verdict(pid, start if isinstance(start, int) else None, boot if isinstance(boot, str) else None,
                       pidns if isinstance(pidns, int) and not isinstance(pidns, bool) else None)
    return None if found == FOREIGN else found == ALIVE
