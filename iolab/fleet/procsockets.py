"""Processes and their sockets as /proc shows them: who listens where, a process tree, stopping it.

No connection is made and no third-party tool runs: socket inodes come from
``/proc/PID/fd``, listening sockets from ``/proc/net/tcp{,6}`` and from
``/proc/PID/net/unix`` (the table of that process's network namespace: a
confined fio server has its own), and a process's descendants from the
``ppid`` of every process, so a server confined below bubblewrap (which puts
the command in a session of its own) is found and stopped whole.
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from iolab.core import processes, procstat

#: Seconds a stopping process group gets after its first signal before SIGKILL.
STOP_GRACE_S = 5.0



def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            link = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def tcp_listeners(port: int) -> set[int]:
    """Socket inodes listening on TCP ``port`` (any address, IPv4 or IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(fields[9]))
    return found


def _tcp_listening(port: int, inodes: set[int]) -> bool:
    return bool(tcp_listeners(port) & inodes)


def _unix_listening(path: str, inodes: set[int], pid: int | None = None) -> bool:
    # /proc/PID/net/unix: the table of PID's network namespace (a confined server has its own)
    table = f"/proc/{pid}/net/unix" if pid is not None else "/proc/net/unix"
    try:
        lines = Path(table).read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split(None, 7)
        # Num RefCount Protocol Flags Type St Inode Path; flag 0x10000: __SO_ACCEPTCON (listening)
        if len(fields) == 8 and fields[7] == path and int(fields[3], 16) & 0x10000 and int(fields[6]) in inodes:
            return True
    return False


def tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (a confined server's fio runs below bubblewrap, in its own session)."""
    return [p for p in [pid, *procstat.descendants(pid)] if not procstat.ended(p)] if not procstat.ended(pid) else []


def listening(pid: int, endpoint) -> bool:
    """Whether process ``pid`` or a descendant owns a listening socket for ``endpoint`` (an
    :class:`iolab.fleet.fioserver.Endpoint`: ``kind`` unix with ``path``, or tcp with ``port``)."""
    for member in tree(pid):
        inodes = socket_inodes(member)
        if not inodes:
            continue
        if endpoint.kind == "unix":
            if _unix_listening(endpoint.path, inodes, member):
                return True
        elif _tcp_listening(endpoint.port, inodes):
            return True
    return False


def stop_group(proc: subprocess.Popen, *, grace: float = STOP_GRACE_S, first=signal.SIGTERM) -> list[str]:
    """Stop a child started with ``start_new_session=True``, every process of its group and every descendant
    (also in other sessions: bwrap --new-session); the steps taken."""
    return processes.end(proc, grace=grace, first=first, group=True)
