"""Device setup as code: a YAML plan, a dry run, setup step by step, teardown in reverse.

A plan (every section optional, but something must be in it)::

    name: two-loops                 # optional, defaults to the file name
    description: one line
    loop_devices:                   # files iolab creates, attached with direct I/O
      - name: disk1
        file: images/disk1.img      # relative to the plan's directory; must not exist yet
        size: 256M
        sector_size: 512            # optional: 512 (default), 1024, 2048 or 4096
        direct_io: true             # optional, default true
        sparse: false               # optional: true = truncate instead of fallocate
    devices:                        # existing block devices (safety-checked)
      - name: ssd
        path: /dev/disk/by-id/nvme-XYZ
    raid:                           # mdadm RAID0 or RAID1 arrays
      - name: r0                    # becomes /dev/md/r0
        level: 0                    # 0 (striping) or 1 (mirror, created --assume-clean: no resync
                                    # runs under a benchmark; fresh members read back as zeros alike)
        chunk: 512K                 # RAID0 only: optional, default 512K (mdadm's), always passed explicitly
        members: [disk1, disk2]
    delay:                          # dm-delay: a device slow inside the kernel (/dev/mapper/<name>)
      - {name: slow, device: disk2, read_ms: 8, write_ms: 8}
    cache:                          # dm-cache: origin cached on a fast device (/dev/mapper/<name>)
      - {name: cached, origin: slow, cache: ssd, mode: writethrough, policy: smq, block_size: 64K}
                                    # (keys, carved metadata, teardown: iolab.devices.plan_dm)
    iscsi:                          # a plan device exported by LIO on 127.0.0.1, logged in with open-iscsi:
      - {name: remote, export: disk2}   # the SCSI disk that appears (/dev/sdX) is the device `remote`
                                    # (target names, iscsid, teardown: iolab.devices.plan_iscsi)
    partitions:                     # a GPT on a device, partitions 1 MiB-aligned
      - device: disk1
        parts:
          - {name: disk1p1, size: 100M, label: data}
          - {name: disk1p2}         # no size: the rest (only the last one)
    filesystems:
      - device: disk1p1
        type: ext4                  # ext4 or xfs
        options: -E lazy_itable_init=0   # mkfs options: a string or a list
        label: data
        mount: /mnt/iolab/ext4      # optional; created if missing, removed on teardown
        mount_options: noatime      # optional: a string or a list

Every name (loop device, device, array, partition) is one namespace; each
device is used once (as an array member, a partitioned disk or a file system).

**Safety.** Existing devices must pass :func:`iolab.devices.inventory.check_writable`
(before anything is done and again right before each write, followed by an
``O_EXCL`` open); ``confirm`` (``--confirm DEVICE``) overrides only a signature,
device by device. Devices the plan itself creates (loop devices over new
files, partitions, arrays) are checked for being mounted, swap, held or in the
chain of / but not for stale signatures: their content is the plan's to write.
Existing loop files are never reused (teardown deletes the files iolab made).

**State.** Each step is recorded *before* it acts (``pending``) and after it
succeeded (``done``, with what it made: the loop device, the md device, the
mount) in ``<plan dir>/.<plan file stem>.state.json``, written atomically. A
new process can therefore tear down (``iolab teardown PLAN.yaml``), also after
a crash in the middle of a step. The state file lives beside the plan (not in
/run) so that files iolab created are still found and deleted after a reboot;
teardown checks every resource's identity (a loop device's backing file, a
mount's device number, an array's members, a file's inode) before undoing it,
so a stale state never touches something that is not iolab's.

**Teardown** runs in reverse: umount (and remove mount points iolab created),
``mdadm --stop``, detach loop devices, delete files and directories iolab
created. It does not wipe: partition tables and file systems on existing
devices stay. If setup fails or is interrupted (Ctrl-C, SIGTERM), it tears
down what it did and re-raises; signals are held off during teardown.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import time
from pathlib import Path
from typing import Callable

from iolab.core.errors import IolabError
from iolab.devices import inventory as devices, loopdev, plan_dm, plan_iscsi
from iolab.devices.plan_load import load_plan
from iolab.devices.plan_model import (MiB, DeviceSpec, FsSpec, LoopSpec, PartSpec, Plan, RaidSpec, TableSpec,
                                     state_path)
from iolab.devices.plan_state import _State, _mount_devno, _run, _signals
from iolab.devices.plan_steps import (Step, _as_plan, _initial_devmap, _missing_dirs, _step_commands, _steps,
                                     plan_commands, preflight)
from iolab.devices.plan_teardown import teardown, teardown_commands

__all__ = ["DeviceSpec", "FsSpec", "LoopSpec", "PartSpec", "Plan", "RaidSpec", "Step", "TableSpec", "load_plan",
           "plan_commands", "preflight", "setup", "state_path", "status", "teardown", "teardown_commands"]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------- setup

def _claim(path: str, *, confirm, ours: bool) -> None:
    """Safety check right before writing ``path``, then an O_EXCL open."""
    if ours:
        verdict = devices.assess(path)
        hard = [r for r in verdict.reasons if not r.overridable]
        if hard:
            raise IolabError(f"refusing to write: {'; '.join(r.text for r in hard)}", context=path)
    else:
        devices.check_writable(path, confirm=confirm)
    with devices.open_exclusive(path):
        pass


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise IolabError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def setup(plan: Plan | str | os.PathLike, confirm=None, *,
          progress: Callable[[str], None] | None = None) -> dict:
    """Carry out ``plan``; returns ``{"devices": {name: /dev/...}, "mounts": {name: path}, "state": path}``.

    ``confirm`` is a device path or a list of them (``--confirm``), see
    :func:`iolab.devices.inventory.check_writable`. ``progress`` is called with each
    command before it runs. On any failure or interruption everything done so
    far is torn down and the exception re-raised.
    """
    plan = _as_plan(plan)
    problems = preflight(plan, confirm)
    if problems:
        raise IolabError("cannot set up: " + "; ".join(problems), context=str(plan.path))
    state = _State.create(plan)
    try:
        with _signals("interrupt"):
            _execute(plan, state, confirm, progress)
    except BaseException as exc:
        log.error("setup of %s failed (%s); tearing down what was done", plan.path, exc or type(exc).__name__)
        try:
            teardown(plan, progress=progress)
        except IolabError as undo:
            if isinstance(exc, IolabError):
                raise IolabError(f"{exc}; the teardown after it also failed: {undo}",
                                 context=str(plan.path), hint=f"state kept in {state.path}") from exc
            log.error("teardown after the interruption failed: %s", undo)
        raise
    state.data["status"] = "ready"
    state.save()
    return status(plan)


def status(plan: Plan | str | os.PathLike) -> dict | None:
    """What a set-up plan made (from its state file), or None when it is not set up."""
    path = plan.state_path if isinstance(plan, Plan) else state_path(plan)
    state = _State.read(path)
    if state is None:
        return None
    mounts = {s["name"]: s["path"] for s in state.data["steps"] if s["kind"] == "mount" and s["status"] == "done"}
    return {"devices": dict(state.data.get("devices", {})), "mounts": mounts, "state": str(path),
            "status": state.data.get("status")}


@dataclasses.dataclass
class _Run:
    """What every step of one setup shares."""
    plan: Plan
    state: _State
    confirm: object
    progress: Callable[[str], None] | None
    devmap: dict
    ours: set


def _execute(plan: Plan, state: _State, confirm, progress) -> None:
    devmap = state.data["devices"]
    devmap.update(_initial_devmap(plan))
    run = _Run(plan, state, confirm, progress, devmap, plan.created_names())
    for step in _steps(plan):
        argvs = _step_commands(plan, step, devmap)
        record = {"kind": step.kind, "name": step.name, "commands": argvs}
        _STEPS[step.kind](run, step, argvs, record)
        state.save()


def _step_mkdir(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, progress = run.state, run.progress
    missing = _missing_dirs(step.path)
    if not missing:
        return
    state.begin({**record, "path": step.path, "created": missing})
    _run(argvs[0], progress)
    state.done(state.data["steps"][-1])


def _step_file(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, progress = run.state, run.progress
    if os.path.lexists(step.path):
        raise IolabError("exists; iolab only uses loop files it creates", context=step.path)
    rec = state.begin({**record, "path": step.path})
    _run(argvs[0], progress)
    st = os.stat(step.path)
    if st.st_size != step.spec.size:
        raise IolabError(f"has {st.st_size} bytes, expected {step.spec.size}", context=step.path)
    state.done(rec, dev=st.st_dev, ino=st.st_ino)


def _step_loop(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, devmap, progress = run.state, run.devmap, run.progress
    rec = state.begin({**record, "file": step.path})
    device = _run(argvs[0], progress).strip()
    if not device.startswith("/dev/"):
        raise IolabError(f"unexpected losetup output {device!r}", context=shlex.join(argvs[0]))
    devmap[step.name] = device
    state.done(rec, device=device)
    if step.spec.direct_io and not loopdev.dio_enabled(device):
        raise IolabError("the kernel did not enable direct I/O on the loop device", context=device,
                         hint="the backing file system must support O_DIRECT (tmpfs does not)")


def _step_partition(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, devmap, progress, confirm, ours = run.state, run.devmap, run.progress, run.confirm, run.ours
    table: TableSpec = step.spec
    disk = devmap[table.device]
    _claim(disk, confirm=confirm, ours=table.device in ours)
    rec = state.begin({**record, "device": disk})
    for argv in argvs:
        _run(argv, progress)
    _, kname, _ = devices.resolve(disk)
    want = len(table.parts)
    _wait_for(lambda: len(devices.partitions(kname)) >= want and
              all(os.path.exists(f"/dev/{p}") for p in devices.partitions(kname)),
              f"the partitions of {disk} to appear")
    parts = {devices.partition_number(p): p for p in devices.partitions(kname)}
    for number, part in enumerate(table.parts, start=1):
        pname = parts.get(number)
        if pname is None:
            raise IolabError(f"partition {number} did not appear", context=disk)
        start = devices._read_int(devices.SYS_BLOCK / pname / "start")
        if start is None or (start * 512) % MiB:
            raise IolabError(f"partition {number} starts at sector {start}, not 1 MiB-aligned",
                             context=disk)
        size = devices.size_bytes(pname)
        if part.size and size != part.size:
            raise IolabError(f"partition {number} has {size} bytes, expected {part.size}", context=disk)
        devmap[part.name] = f"/dev/{pname}"
    state.done(rec, partitions={p.name: devmap[p.name] for p in table.parts})


def _step_raid(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, devmap, progress, confirm, ours = run.state, run.devmap, run.progress, run.confirm, run.ours
    raid: RaidSpec = step.spec
    if not Path("/proc/mdstat").exists():
        raise IolabError("the md (software RAID) driver is not available in this kernel",
                         context=raid.path, hint="modprobe md_mod")
    members = [devmap[m] for m in raid.members]
    for name, member in zip(raid.members, members):
        _claim(member, confirm=confirm, ours=name in ours)
    rec = state.begin({**record, "path": raid.path, "members": members})
    _run(argvs[0], progress)
    _wait_for(lambda: os.path.exists(raid.path), raid.path)
    real, kname, _ = devices.resolve(raid.path)
    level = devices._read(devices.SYS_BLOCK / kname / "md" / "level")
    chunk = devices._read_int(devices.SYS_BLOCK / kname / "md" / "chunk_size")
    devmap[raid.name] = real
    state.done(rec, device=real, kname=kname, slaves=devices.slaves(kname))
    if level != f"raid{raid.level}" or (raid.level == 0 and chunk != raid.chunk):
        raise IolabError(f"the array is {level} with chunk {chunk}, expected raid{raid.level}"
                         + (f" with chunk {raid.chunk}" if raid.level == 0 else ""), context=real)


def _step_mkfs(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, devmap, progress, confirm, ours = run.state, run.devmap, run.progress, run.confirm, run.ours
    fs: FsSpec = step.spec
    device = devmap[fs.device]
    _claim(device, confirm=confirm, ours=fs.device in ours)
    rec = state.begin({**record, "device": device})
    _run(argvs[0], progress)
    found = [s["type"] for s in devices.signatures(device)]
    if fs.type not in found:
        raise IolabError(f"no {fs.type} signature after mkfs (found: {', '.join(found) or 'none'})",
                         context=device)
    state.done(rec)


def _step_mount(run: _Run, step: Step, argvs: list, record: dict) -> None:
    state, devmap, progress = run.state, run.devmap, run.progress
    fs = step.spec
    device = devmap[fs.device]
    if os.path.ismount(fs.mount) or _mount_devno(fs.mount) is not None:
        raise IolabError("something is already mounted there", context=fs.mount)
    rec = state.begin({**record, "device": device, "path": fs.mount})
    _run(argvs[0], progress)
    devno = os.stat(device).st_rdev
    if _mount_devno(fs.mount) != devno:
        raise IolabError(f"{device} is not mounted there after mount", context=fs.mount)
    state.done(rec, devno=devno)


def _step_dm(run: _Run, step: Step, argvs: list, record: dict) -> None:
    plan_dm.execute(run, step.spec, argvs, record, _claim, _wait_for)


def _step_iscsi(run: _Run, step: Step, argvs: list, record: dict) -> None:
    plan_iscsi.execute(run, step.spec, argvs, record, _claim)


_STEPS = {"mkdir": _step_mkdir, "file": _step_file, "loop": _step_loop, "partition": _step_partition,
          "raid": _step_raid, "dm": _step_dm, "iscsi": _step_iscsi, "mkfs": _step_mkfs, "mount": _step_mount}
