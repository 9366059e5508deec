"""Ending processes: a gentle step, a grace period, SIGKILL, the reaping. The one ladder iolab climbs to
stop a child (a :class:`subprocess.Popen`), a process it knows only by PID, or a child's process group. (One
place cannot climb it: :mod:`iolab.engine.directio`, which runs as a stdlib-only script, ends its forked seek
children itself, SIGKILL and ``waitpid``.)"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from typing import Callable, Union

from iolab.core import procstat
from iolab.core.deadline import wait_until

log = logging.getLogger(__name__)

#: Seconds a process may take to go after SIGKILL before it counts as stuck in the kernel.
KILL_WAIT_S = 30.0

#: A gentle step: a signal, a ``(name, action)`` pair such as ``("pg_ctl stop -m fast", run)``, or
#: None (only wait: the process is to end by itself).
Step = Union[int, "tuple[str, Callable[[], object]]", None]


def end(proc: subprocess.Popen | int, *, grace: float = 5.0, first: Step | list[Step] = signal.SIGTERM,
        group: bool = False, family: bool = False, kill_wait: float = KILL_WAIT_S) -> list[str]:
    """End ``proc``; the steps taken by name (``["SIGTERM", "SIGKILL"]``; [] when it had ended already).

    The steps of ``first`` in turn (``[]``: none), each followed by up to ``grace`` seconds for it to
    end; then SIGKILL. ``group``: ``proc`` leads a process group of its own (``start_new_session``):
    each signal goes to the group and to every descendant (also those in sessions below it, e.g.
    bubblewrap's), and all of them must end. ``family``: SIGKILL also goes to its descendants (a
    postmaster's backends, fio's job processes), which must end too. A Popen is always reaped; a bare
    PID (not our child) has ended once gone or a zombie. Still there ``kill_wait`` seconds after
    SIGKILL (stuck in the kernel): an :class:`~iolab.core.errors.IolabError` naming it.
    """
    pid = proc if isinstance(proc, int) else proc.pid
    known: set[int] = set()  # descendants signalled, which must end too

    def send(sig: int) -> None:
        if group or family and sig == signal.SIGKILL:  # read first: once the leader dies they are init's
            known.update(procstat.descendants(pid))
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):  # a Popen's own (ConfinedProcess: to fio)
            os.kill(pid, sig) if isinstance(proc, int) else proc.send_signal(sig)
        for target in sorted(known):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, sig)

    def ended() -> bool:
        leader = procstat.ended(pid) if isinstance(proc, int) else proc.poll() is not None
        return leader and not (group and procstat.group_members(pid)) and all(map(procstat.ended, known))

    if ended():
        return []
    steps, gentle = [], first if isinstance(first, list) else [first]
    for step in gentle:
        if isinstance(step, tuple):
            steps.append(step[0])
            with contextlib.suppress(OSError):
                step[1]()
        elif step is not None:
            steps.append(signal.Signals(step).name)
            send(step)
        if wait_until(ended, grace):
            return steps
    name = ("the group of " if group else "") + _name(proc, pid)
    if gentle:
        log.warning("%s still runs %g s after %s: SIGKILL", name, grace, steps[-1] if steps else "waiting")
    send(signal.SIGKILL)
    wait_until(ended, kill_wait, what="it to end after SIGKILL", context=name,
               hint="stuck in the kernel (D state)? see /proc/PID/stack; a reboot may be needed")
    return [*steps, "SIGKILL"]


def _name(proc: subprocess.Popen | int, pid: int) -> str:
    """``fio (pid 123)``: the command name /proc shows (after setpriv's exec: the server's), else argv[0]."""
    found = procstat.stat_of(pid)
    args = [] if isinstance(proc, int) else proc.args if isinstance(proc.args, (list, tuple)) else [proc.args]
    return f"{found.comm if found else os.path.basename(str(args[0])) if args else 'process'} (pid {pid})"
