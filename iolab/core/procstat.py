"""Processes as /proc shows them: pid, state, parent and process group of each (no third-party tool)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, NamedTuple


class ProcStat(NamedTuple):
    pid: int
    state: str      # R, S, D, Z (zombie), X (dead), ...
    ppid: int
    pgrp: int


def processes() -> Iterator[ProcStat]:
    """Every process readable in /proc (ones that end while being read are skipped)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        rest = text[text.rfind(")") + 2:].split()
        if len(rest) >= 3:
            yield ProcStat(int(entry), rest[0], int(rest[1]), int(rest[2]))


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
    return [p.pid for p in processes() if p.pgrp == pgid and p.state not in ("Z", "X")]
