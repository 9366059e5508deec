"""iSCSI on one machine: export a block device over LIO on 127.0.0.1 and log in to it with open-iscsi.

The seed article ran TPC-B over a mirror whose second half was an iSCSI disk.
:func:`attached` rehearses that on one machine (the lab VM)::

    with iscsi.attached("/dev/loop1") as disk:   # -> "/dev/sdb", a SCSI disk over TCP to 127.0.0.1:3260
        ...                                      # e.g. RAID1 over a local device and ``disk``

Set-up: the LIO target (:mod:`iolab.devices.lio`: kernel modules
target_core_mod, target_core_iblock, iscsi_target_mod, configured through
configfs), then the initiator (:mod:`iolab.devices.iscsi_initiator`: iscsid,
started in the foreground if none runs; ``iscsiadm`` login; the disk found in
sysfs). Tear-down runs in reverse -- log out, delete the node record, stop the
iscsid iolab started, remove the export -- on leaving the block, after an
error, Ctrl-C or SIGTERM (raised as KeyboardInterrupt inside the block).

The export is recorded in the ownership ledger (kind ``iscsi``, id = the
target's IQN, which carries the owner's PID) as soon as its name is chosen, so
:mod:`iolab.engine.reaper` undoes it with :func:`undo_stale` if the process
dies holding it. Anything using the disk (a mounted file system, an md array)
must be released first: the caller's, as for a loop device.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import signal
import subprocess
import threading
from typing import Iterator

from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.devices import iscsi_initiator as initiator
from iolab.devices import lio

log = logging.getLogger(__name__)

KIND = "iscsi"
IQN_PREFIX = "iqn.2003-01.org.iolab"
DEFAULT_PORTAL = "127.0.0.1:3260"


@dataclasses.dataclass
class Attached:
    """One export and the session logged in to it."""

    export: lio.Export
    disk: str | None = None
    daemon: subprocess.Popen | None = None   # the iscsid iolab started (None: one ran already)

    @property
    def iqn(self) -> str:
        return self.export.iqn


def new_iqn(pid: int | None = None) -> str:
    """A target name carrying the owner's PID: ``iqn.2003-01.org.iolab:iolab-<pid>-<hex>``."""
    return f"{IQN_PREFIX}:iolab-{pid or os.getpid()}-{secrets.token_hex(3)}"


def owner_of(iqn: str) -> int | None:
    """The PID in an iolab target name (None for other names)."""
    head, _, rest = iqn.partition(":iolab-")
    pid = rest.split("-", 1)[0]
    return int(pid) if head == IQN_PREFIX and pid.isdigit() else None


def _record(att: Attached) -> None:
    daemon = att.daemon.pid if att.daemon is not None else None
    ownership.record(KIND, att.iqn, undo=f"iscsiadm -m node -T {att.iqn} --logout; rmdir its LIO configfs tree",
                     undone_by=__name__, iscsid_pid=daemon, **att.export.details())


def attach(device: str, *, portal: str = DEFAULT_PORTAL) -> Attached:
    """Export ``device`` and log in to it; the caller must :func:`detach` the result (or use :func:`attached`)."""
    name = f"iolab-{os.getpid()}-{secrets.token_hex(3)}"
    att = Attached(lio.plan(device, new_iqn(), name, portal=portal))
    try:
        _record(att)   # before the first directory exists: a crash part-way is undone by the reaper too
        lio.export(device, att.iqn, name, portal=portal, made=att.export)
        att.daemon = initiator.start_daemon()
        _record(att)
        att.disk = initiator.login(att.iqn, portal)
        _record(att)
    except BaseException:
        with contextlib.suppress(IolabError, OSError):
            detach(att)
        raise
    return att


def detach(att: Attached) -> list[str]:
    """Undo :func:`attach` in reverse: log out, delete the node record, stop our iscsid, remove the export."""
    done = []
    try:
        if att.daemon is not None or initiator.daemon_pids():
            done += initiator.logout(att.iqn, att.export.portal)
    finally:
        initiator.stop_daemon(att.daemon)
        done += lio.remove(att.export)
    ownership.forget(KIND, att.iqn)
    return done


@contextlib.contextmanager
def attached(device: str, *, portal: str = DEFAULT_PORTAL) -> Iterator[str]:
    """``device`` as an iSCSI disk on this machine for the block: yields its path (``/dev/sdX``)."""
    previous = None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _sigterm)   # an engine's own SIGTERM handler is kept
    try:
        att = attach(device, portal=portal)
        try:
            yield att.disk
        finally:
            detach(att)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def undo_stale(iqn: str, details: dict, *, dry_run: bool) -> str | None:
    """Undo an export whose iolab owner is gone (the reaper, through the record's ``undone_by``)."""
    export = lio.Export.from_details(iqn, details)
    session = initiator.session_of(iqn)
    there = session is not None or iqn in lio.targets() or f"{export.hba}/{export.name}" in lio.backstores()
    if not there:
        return None
    if dry_run:
        return f"would log out of iSCSI target {iqn} and remove its LIO export of {export.device}"
    started = None
    stale_daemon = details.get("iscsid_pid")
    if session is not None:
        started = None if initiator.daemon_pids() else initiator.start_daemon()
        try:
            initiator.logout(iqn, export.portal)
        finally:
            initiator.stop_daemon(started)
    if stale_daemon and int(stale_daemon) in initiator.daemon_pids():
        initiator.stop_pid(int(stale_daemon))   # the iscsid the dead owner had started
    lio.remove(export)
    return f"logged out of iSCSI target {iqn} and removed its LIO export of {export.device}"
