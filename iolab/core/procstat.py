"""Processes as /proc shows them: pid, state, parent, process group, name, start and command line of each (no
third-party tool). The one reader of ``/proc/PID/stat`` and ``/proc/PID/cmdline``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, NamedTuple


class ProcStat(NamedTuple):
    pid: int
    state: str      # R, S, D, Z (zombie), X (dead), ...
    ppid: int
    pgrp: int
    comm: str = ""  # the command name (at most 15 characters)
    start: int = 0  # when it started, in clock ticks since boot


ENDED = ("Z", "X")  # states of a process that has exited (a zombie waits only for its parent)


def stat_of(pid: int | str) -> ProcStat | None:
    """``/proc/PID/stat`` of one process; None when there is no such process (or it cannot be read)."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses: split after its last ')'
    head, _, tail = text.rpartition(")")
    rest = tail.split()
    if len(rest) < 20:
        return None
    return ProcStat(int(pid), rest[0], int(rest[1]), int(rest[2]), head.partition("(")[2], int(rest[19]))


def argv_of(pid: int | str) -> list[str] | None:
    """``/proc/PID/cmdline`` as a list (empty for a kernel thread or a zombie); None when there is no such process."""
    try:
        raw = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return [os.fsdecode(arg) for arg in raw.rstrip(b"\0").split(b"\0")] if raw else []


def state_of(pid: int | str) -> str | None:
    """The state letter of ``pid`` (R, S, D, Z, ...); None when there is no such process."""
    found = stat_of(pid)
    return found.state if found else None


def ended(pid: int | str) -> bool:
    """Whether ``pid`` has exited: no such process, or a zombie its parent has not waited for yet."""
    return state_of(pid) in (None, *ENDED)


def processes() -> Iterator[ProcStat]:
    """Every process readable in /proc (ones that end while being read are skipped)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = stat_of(entry)
            if found is not None:
                yield found


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid``."""
    return [p.pid for p in processes() if p.ppid == pid]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from one reading of /proc."""
    below: dict[int, list[int]] = {}
    for proc in processes():
        below.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = [], [pid]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    return [p.pid for p in processes() if p.pgrp == pgid and p.state not in ENDED]
