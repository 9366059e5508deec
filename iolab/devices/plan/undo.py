"""Undoing a setup from its state file, in reverse: :func:`teardown`, :func:`teardown_commands` (see
:mod:`iolab.devices.plan`)."""
from __future__ import annotations

import logging
import os
import shlex
import time
from typing import Callable

from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.devices import blockdev, loopdev, safety
from iolab.devices.plan import dm, iscsi
from iolab.devices.plan.model import Plan, state_path
from iolab.devices.plan.state import State, run_command, setup_alive, signals_held

log = logging.getLogger("iolab.devices.plan")


# ----------------------------------------------------------------- teardown

def _loops_backed_by(file: str) -> list[str]:
    proc = commands.run(["losetup", "--associated", file, "--output", "NAME", "--noheadings"], check=False) \
        if os.path.exists(file) else None
    if proc is None or proc.returncode != 0:
        return []
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def _undo_commands(record: dict) -> tuple[list[list[str]], str | None]:
    """What undoing ``record`` would run now, or a reason to skip it (not ours / gone)."""
    kind, done = record["kind"], record["status"] == "done"
    if kind == "mount":
        devno = blockdev.mounted_devno(record["path"])
        if devno is None:
            return [], "not mounted"
        expected = record.get("devno")
        if expected is None:
            try:
                expected = os.stat(record["device"]).st_rdev
            except OSError:
                return [], "its device is gone"
        if devno != expected:
            return [], f"something else is mounted at {record['path']}; leaving it"
        return [["umount", record["path"]]], None
    if kind == "raid":
        path = record.get("device") or record["path"]
        if not os.path.exists(path):
            return [], "the array is gone"
        try:
            _, kname, _ = blockdev.resolve(path)
        except IolabError:
            return [], "the array is gone"
        if done and sorted(blockdev.slaves(kname)) != sorted(record.get("slaves", [])):
            return [], f"{path} is now a different array; leaving it"
        return [["mdadm", "--stop", path]], None
    if kind == "dm":
        return dm.undo_commands(record)
    if kind == "iscsi":
        return iscsi.undo_commands(record)
    if kind == "loop":
        file = record["file"]
        if done:
            backing = loopdev.backing_file(record["device"])
            if backing is None:
                return [], "not attached any more"
            if backing.removesuffix(" (deleted)") != file:
                return [], f"{record['device']} now backs {backing}, not ours; leaving it"
            return [["losetup", "--detach", record["device"]]], None
        return [["losetup", "--detach", d] for d in _loops_backed_by(file)], None
    if kind == "file":
        path = record["path"]
        if not os.path.lexists(path):
            return [], "already gone"
        if done:
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) != (record.get("dev"), record.get("ino")):
                return [], f"{path} was replaced by another file; not deleting it"
        return [["rm", "-f", path]], None
    if kind == "mkdir":
        argvs = [["rmdir", d] for d in reversed(record.get("created", [])) if os.path.isdir(d)]
        return argvs, None if argvs else "already gone"
    # partition tables and file systems are left in place (no wiping)
    return [], "left in place (teardown does not wipe)"


def _guard(record: dict) -> None:
    """Refuse an undo that would pull something out from under a user."""
    if record["kind"] == "loop" and record.get("device") and record["status"] == "done":
        device = record["device"]
        if os.path.exists(device):
            try:
                verdict = safety.assess(device)
            except IolabError:
                return
            busy = [r.text for r in verdict.reasons if r.kind in (safety.MOUNTED, safety.SWAP, safety.HOLDERS)]
            if busy:
                raise IolabError(f"still in use: {'; '.join(busy)}", context=device)
    if record["kind"] == "file" and _loops_backed_by(record["path"]):
        raise IolabError(f"still attached to {', '.join(_loops_backed_by(record['path']))}", context=record["path"])


def teardown_commands(plan: Plan | str | os.PathLike) -> list[list[str]]:
    """What :func:`teardown` would run now (from the state file), changing nothing."""
    path = plan.state_path if isinstance(plan, Plan) else state_path(plan)
    state = State.read(path)
    if state is None:
        return []
    found = []
    for record in reversed(state.data["steps"]):
        argvs, _ = _undo_commands(record)
        found.extend(argvs)
    return found


def teardown(plan: Plan | str | os.PathLike, *, progress: Callable[[str], None] | None = None) -> list[list[str]]:
    """Undo what setup recorded, in reverse; returns the commands run.

    Works from the state file alone (the plan may have changed or be invalid
    since). Continues past a failed step, keeps what could not be undone in the
    state file and raises :class:`IolabError` listing it; with nothing left the
    state file is deleted. Nothing to tear down is not an error.
    """
    path = plan.state_path if isinstance(plan, Plan) else state_path(plan)
    context = str(plan.path if isinstance(plan, Plan) else plan)
    ran: list[list[str]] = []
    with signals_held():
        state = State.read(path)
        if state is None:
            log.info("%s: nothing to tear down (no state file %s)", context, path)
            return ran
        pid = state.data.get("pid")
        if state.data.get("status") == "setting up" and pid not in (None, os.getpid()) \
                and setup_alive(pid, state.data.get("boot_id")):
            raise IolabError(f"a setup of this plan is still running (pid {pid})", context=context,
                             hint="interrupt it (Ctrl-C or SIGTERM): it tears down what it did itself")
        state.data["status"] = "tearing down"
        state.save()
        failures = []
        for record in list(reversed(state.data["steps"])):
            try:
                argvs, skip = _undo_commands(record)
                if record["kind"] == "dm":
                    ran += dm.undo(record, progress)
                elif record["kind"] == "iscsi":
                    iscsi.undo(record, progress)
                elif skip and not argvs:
                    log.info("%s %s: %s", record["kind"], record.get("name"), skip)
                else:
                    _guard(record)
                    for argv in argvs:
                        if argv[0] == "rmdir" and os.path.isdir(argv[1]) and any(os.scandir(argv[1])) \
                                and not os.path.ismount(argv[1]):
                            if failures:  # probably holds what could not be undone: keep the record
                                raise IolabError("not empty", context=argv[1])
                            log.warning("%s is not empty (not iolab's files); leaving it", argv[1])
                            continue
                        _undo_run(argv, progress)
                        ran.append(argv)
            except IolabError as exc:
                failures.append(f"{record['kind']} {record.get('name')}: {exc}")
                continue
            state.data["steps"].remove(record)
            state.save()
        if failures:
            state.data["status"] = "teardown failed"
            state.save()
            raise IolabError("teardown incomplete: " + "; ".join(failures), context=context,
                             hint=f"fix that and run iolab teardown again; state kept in {path}")
        path.unlink(missing_ok=True)
    return ran


def _undo_run(argv: list[str], progress) -> None:
    if progress:
        progress(shlex.join(argv))
    attempts = 5 if argv[0] == "umount" else 1
    for attempt in range(attempts):
        try:
            run_command(argv, None)
            return
        except IolabError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))  # a file system still busy for a moment after fio exits
