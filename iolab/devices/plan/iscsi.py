"""iSCSI entries of a setup plan: a plan device exported through LIO on 127.0.0.1 and logged in to.

::

    iscsi:
      - name: remote              # the SCSI disk open-iscsi makes (/dev/sdX): a plan device
        export: s2                # the plan device LIO exports (loop, device, array, partition, dm)
        portal: 127.0.0.1:3260    # optional (iolab exports only on 127.0.0.1)

The export and the login are :mod:`iolab.devices.lio` and
:mod:`iolab.devices.iscsi_initiator` (the same parts :mod:`iolab.devices.iscsi`
uses). Each entry is one step, recorded in the plan's state file *before* it
acts with its target name (``iqn.2003-01.org.iolab:plan-<digest of the plan
path>-<name>``), backstore and HBA, so a setup that fails part-way, or a later
``iolab teardown`` in another process, undoes exactly what this plan made:
log out (and delete the node record), stop the iscsid setup started (checked
to be an iscsid by PID), remove the LIO target and backstore. Plan exports are
not in the ownership ledger (whose records name a live owner process): the
plan's state file is their record, as for its loop devices and dm devices,
and the reaper leaves their ``plan-`` target names alone.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import shutil
from pathlib import Path

from iolab.core import statedir
from iolab.core.errors import IolabError
from iolab.devices import iscsi, iscsi_initiator as initiator, lio
from iolab.devices.plan.model import Plan

log = logging.getLogger("iolab.devices.plan")
_started: dict[int, object] = {}   # iscsid processes started by this process, by PID


@dataclasses.dataclass
class IscsiSpec:
    """``export`` (a plan device) through LIO, logged in: the disk that appears is the plan device ``name``."""
    name: str
    export: str
    portal: str = iscsi.DEFAULT_PORTAL


def add(entries: list, plan: Plan, define, fail) -> None:
    """The checked ``iscsi:`` entries (:class:`~iolab.devices.plan.schema.IscsiEntry`) as steps of ``plan``;
    two entries may not give the same target name."""
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        field = f"iscsi[{i}]"
        define(entry.name, f"{field}.name")
        iqn = iqn_for(plan, entry.name)
        if iqn in seen:
            fail(f"{field}.name", f"gives the same target name as {seen[iqn]}")
        seen[iqn] = f"{field}.name"
        plan.iscsi.append(IscsiSpec(name=entry.name, export=entry.export, portal=entry.portal or iscsi.DEFAULT_PORTAL))


def references(plan: Plan):
    """(plan name, field) of every device an iscsi entry exports."""
    for i, spec in enumerate(plan.iscsi):
        yield spec.export, f"iscsi[{i}].export"


def _digest(plan: Plan) -> str:
    return hashlib.sha256(str(plan.path).encode()).hexdigest()[:12]


def iqn_for(plan: Plan, name: str) -> str:
    """The target name: the plan (digest of its path) and the entry, lower case as IQNs are."""
    return f"{iscsi.IQN_PREFIX}:plan-{_digest(plan)}-{re.sub(r'[^a-z0-9.-]', '-', name.lower())}"


def backstore_name(plan: Plan, name: str) -> str:
    return f"plan-{_digest(plan)}-{name}"


def commands(plan: Plan, spec: IscsiSpec, devmap: dict) -> list[list[str]]:
    """What the step does, as commands (the LIO part is configfs, shown as the directories it makes)."""
    iqn, device = iqn_for(plan, spec.name), devmap.get(spec.export, f"<{spec.export}>")
    root = lio.target_root()
    backstore = root / "core" / "iblock_<N>" / backstore_name(plan, spec.name)
    return [["mkdir", str(backstore)],
            ["sh", "-c", f"echo udev_path={device} > {backstore}/control"],
            ["mkdir", str(root / "iscsi" / iqn / lio.TPG / "np" / spec.portal)],
            ["iscsid", "-f", "-n"],
            ["iscsiadm", "-m", "node", "-o", "new", "-T", iqn, "-p", spec.portal],
            ["iscsiadm", "-m", "node", "-T", iqn, "-p", spec.portal, "--login"]]


def preflight(plan: Plan) -> list[str]:
    problems = []
    if not plan.iscsi:
        return problems
    for program in ("iscsiadm", "iscsid"):
        if shutil.which(program) is None:
            problems.append(f"{program} (open-iscsi) is not installed: {initiator.HINT}")
    for spec in plan.iscsi:
        iqn = iqn_for(plan, spec.name)
        if iqn in lio.targets() or initiator.session_of(iqn) is not None:
            problems.append(f"an iSCSI target {iqn} exists already (iscsi {spec.name})")
    return problems


def execute(run, spec: IscsiSpec, argvs: list, record: dict) -> None:
    """Export the plan device, log in, and make the disk the plan device ``spec.name`` (``run``: the
    setup's :class:`~iolab.devices.plan.steps.SetupRun`)."""
    device = run.devmap[spec.export]
    run.claim(spec.export)
    iqn = iqn_for(run.plan, spec.name)
    export = lio.plan(device, iqn, backstore_name(run.plan, spec.name), portal=spec.portal)
    rec = run.state.begin({**record, "iqn": iqn, "export": export.details()})
    run.state.save()
    if run.progress:
        run.progress(f"export {device} as {iqn} on {spec.portal} (LIO, configfs)")
    lio.export(device, iqn, export.name, portal=spec.portal, made=export)
    daemon = _start_daemon()
    if daemon is not None:
        rec["iscsid_pid"] = daemon.pid
        run.state.save()
    if run.progress:
        run.progress(f"iscsiadm -m node -T {iqn} -p {spec.portal} --login")
    disk = initiator.login(iqn, spec.portal)
    run.devmap[spec.name] = disk
    run.state.done(rec, device=disk)


def daemon_log() -> Path:
    """Where the iscsid iolab starts writes: in iolab's root-only state directory (core.statedir), not loose in /run."""
    return statedir.private("logs") / "iscsid.log"


def _start_daemon():
    """iscsid when none runs, logging to a file: it outlives ``iolab setup`` (a pipe would close)."""
    if initiator.daemon_pids():
        return None
    daemon = initiator.start_daemon(log_file=daemon_log())
    if daemon is not None:
        _started[daemon.pid] = daemon
    return daemon


def undo_commands(record: dict) -> tuple[list[list[str]], str | None]:
    iqn = record.get("iqn")
    if not iqn:
        return [], "nothing was made"
    export = lio.Export.from_details(iqn, record.get("export", {}))
    session = initiator.session_of(iqn)
    there = iqn in lio.targets() or f"{export.hba}/{export.name}" in lio.backstores()
    if session is None and not there:
        return [], "the iSCSI export is gone"
    argvs = []
    if session is not None:
        argvs += [["iscsiadm", "-m", "node", "-T", iqn, "-p", export.portal, "--logout"],
                  ["iscsiadm", "-m", "node", "-o", "delete", "-T", iqn, "-p", export.portal]]
    if record.get("iscsid_pid"):
        argvs.append(["kill", str(record["iscsid_pid"])])
    if there:
        argvs.append(["rmdir", str(export.tpg), str(export.backstore)])
    return argvs, None


def undo(record: dict, progress) -> list[str]:
    """Log out, stop the iscsid this setup started, remove the LIO export; what was done."""
    iqn = record.get("iqn")
    if not iqn:
        return []
    export = lio.Export.from_details(iqn, record.get("export", {}))
    disk = record.get("device")
    if disk and os.path.exists(disk) and any(Path("/sys/class/block", Path(disk).name, "holders").glob("*")):
        raise IolabError("still held (an array or dm device over it)", context=disk)
    done = []
    if progress:
        progress(f"log out of {iqn}; remove its LIO export of {export.device}")
    pid = record.get("iscsid_pid")
    started = initiator.start_daemon() if initiator.session_of(iqn) and not initiator.daemon_pids() else None
    try:
        done += initiator.logout(iqn, export.portal)
    finally:
        initiator.stop_daemon(started)
    if pid:
        proc = _started.pop(int(pid), None)
        if proc is not None:
            initiator.stop_daemon(proc)
        elif int(pid) in initiator.daemon_pids():
            initiator.stop_pid(int(pid))
        done.append(f"stopped iscsid (PID {pid})")
    done += lio.remove(export)
    return done
