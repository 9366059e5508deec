"""The open-iscsi initiator: iscsid (started in the foreground when none runs), log in, find the disk, log out.

``iscsiadm`` talks to ``iscsid`` over an abstract Unix socket; where systemd
runs, its ``iscsid.socket`` starts the daemon on demand. Elsewhere (a
container, the lab VM without systemd) iolab starts ``iscsid -f -n`` itself
(foreground, no pid file) and stops it again. What open-iscsi writes:
its node records under ``/etc/iscsi/nodes`` (iolab makes the one record it
logs in with, ``iscsiadm -m node -o new``, no discovery, and deletes it after
logout) and a lock file under ``/run/lock/iscsi``; it reads
``/etc/iscsi/initiatorname.iscsi`` (written when the Debian package is installed).
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

from iolab.core import commands, processes, procstat
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

INITIATOR_NAME = Path("/etc/iscsi/initiatorname.iscsi")
SESSIONS = Path("/sys/class/iscsi_session")
HINT = "install it with: apt-get install open-iscsi"
#: iscsiadm's exit status "no objects found" (no session, no record): not an error when undoing
NO_OBJECTS = 21
DEVICE_WAIT_S = 30.0


def _iscsiadm(*args: str, check: bool = True, ok=(0,)) -> subprocess.CompletedProcess:
    _need("iscsiadm")
    proc = commands.run(["iscsiadm", *args], check=False, timeout=120)
    if check and proc.returncode not in ok:
        lines = [l.strip() for l in (proc.stderr or proc.stdout).splitlines() if l.strip()]
        raise IolabError(f"exited with {proc.returncode}: {lines[-1] if lines else 'no output'}",
                         context="iscsiadm " + " ".join(args))
    return proc


def _need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise IolabError(f"{program} (open-iscsi) is not installed", hint=HINT)
    return path


def daemon_pids() -> list[int]:
    """PIDs of running iscsid processes (not zombies: a stopped one its parent has not waited for yet)."""
    return [p.pid for p in procstat.processes() if p.comm == "iscsid" and p.state not in procstat.ENDED]


def _daemon_answers() -> bool:
    proc = subprocess.run(["iscsiadm", "-m", "session"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return proc.returncode in (0, NO_OBJECTS)


def start_daemon(timeout: float = 20.0, log_file: Path | None = None) -> subprocess.Popen | None:
    """Start ``iscsid -f -n`` when no iscsid runs; the process (None when one ran already).

    ``log_file``: where its messages go (appended) instead of a pipe to this process, for an iscsid
    that outlives it (a set-up plan's)."""
    if daemon_pids():
        return None
    binary = _need("iscsid")
    if not INITIATOR_NAME.exists():
        raise IolabError("no initiator name: iscsid will not start", context=str(INITIATOR_NAME),
                         hint="reinstall open-iscsi, or write InitiatorName=iqn... into it")
    # appended, never through a link; closed below (the child keeps its copy)
    sink = os.fdopen(os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600),
                     "a") if log_file else None
    try:
        proc = subprocess.Popen([binary, "-f", "-n"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=sink or subprocess.PIPE, text=True, start_new_session=True)
    finally:
        if sink:
            sink.close()

    def answers() -> bool:
        if proc.poll() is not None:
            text = proc.stderr.read() if proc.stderr else Path(log_file).read_text()
            err = (text.strip().splitlines() or ["no output"])[-1]
            raise IolabError(f"iscsid exited with {proc.returncode}: {err}", context=binary)
        return _daemon_answers()
    try:
        wait_until(answers, timeout, interval=0.2, what="iscsid to answer", context=binary)
    except IolabError:
        stop_daemon(proc)  # (nothing to do when it has exited)
        raise
    log.info("started iscsid (PID %d)", proc.pid)
    return proc


def stop_daemon(proc: subprocess.Popen | None) -> None:
    """Stop an iscsid that :func:`start_daemon` started (SIGTERM, then SIGKILL after 10 s)."""
    if proc is None or proc.poll() is not None:
        return
    processes.end(proc, grace=10, kill_wait=10)
    if proc.stderr:
        proc.stderr.close()
    log.info("stopped iscsid (PID %d)", proc.pid)


def stop_pid(pid: int) -> None:
    """Stop an iscsid by PID (one an owner that is gone had started)."""
    processes.end(pid, grace=10)


def session_of(iqn: str) -> Path | None:
    """The sysfs directory of the session logged in to ``iqn`` (None when there is none)."""
    with contextlib.suppress(OSError):
        for session in sorted(SESSIONS.iterdir()):
            with contextlib.suppress(OSError):
                if (session / "targetname").read_text().strip() == iqn:
                    return session
    return None


def sessions() -> list[str]:
    """Target names of every iSCSI session of this machine."""
    names = []
    with contextlib.suppress(OSError):
        for session in sorted(SESSIONS.iterdir()):
            with contextlib.suppress(OSError):
                names.append((session / "targetname").read_text().strip())
    return names


def disk_of(session: Path) -> str | None:
    """The block device (``/dev/sdX``) of LUN 0 of ``session``, once the SCSI scan has made it."""
    for block in sorted(session.glob("device/target*/*:0/block/*")):
        return f"/dev/{block.name}"
    return None


def login(iqn: str, portal: str) -> str:
    """Log in to ``iqn`` at ``portal`` (a node record made for it, no discovery); the disk's path."""
    _iscsiadm("-m", "node", "-o", "new", "-T", iqn, "-p", portal)
    _iscsiadm("-m", "node", "-T", iqn, "-p", portal, "-o", "update", "-n", "node.startup", "-v", "manual")
    _iscsiadm("-m", "node", "-T", iqn, "-p", portal, "--login")

    def disk() -> str | None:
        session = session_of(iqn)
        found = disk_of(session) if session else None
        return found if found and Path(found).exists() else None
    found = wait_until(disk, DEVICE_WAIT_S, interval=0.2, context=f"iSCSI target {iqn}",
                       what=lambda: f"its disk after the login (session {session_of(iqn)})")
    log.info("logged in to %s at %s: %s", iqn, portal, found)
    return found


def logout(iqn: str, portal: str) -> list[str]:
    """Log out of ``iqn`` and delete its node record; what was done (nothing that was not there)."""
    done = []
    if session_of(iqn) is not None:
        _iscsiadm("-m", "node", "-T", iqn, "-p", portal, "--logout", ok=(0, NO_OBJECTS))
        done.append(f"logged out of {iqn}")
    proc = _iscsiadm("-m", "node", "-o", "delete", "-T", iqn, "-p", portal, ok=(0, NO_OBJECTS))
    if proc.returncode == 0:
        done.append(f"deleted the node record of {iqn}")
    return done
