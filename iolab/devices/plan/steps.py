"""Setup step by step: a plan as steps with their exact commands (:func:`plan_commands`), the checks
before (:func:`preflight`), and carrying them out (:func:`setup`); see :mod:`iolab.devices.plan`."""
from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import signal
from pathlib import Path
from typing import Callable

from iolab.core import commands
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.core.signals import sigterm_raises
from iolab.devices import blockdev, loopdev, safety
from iolab.devices.plan import dm, iscsi, limits
from iolab.devices.plan.load import build_order, load_plan
from iolab.devices.plan.model import MiB, FsSpec, LoopSpec, Plan, RaidSpec, TableSpec
from iolab.devices.plan.state import DEVICE_WAIT, State, run_command, status
from iolab.devices.plan.undo import teardown

log = logging.getLogger("iolab.devices.plan")


# ------------------------------------------------------------------- steps

@dataclasses.dataclass
class Step:
    """One thing setup does, with the exact commands (``<name>`` stands for a
    device that exists only once an earlier step ran)."""
    kind: str        # mkdir, file, loop, partition, raid, dm, iscsi, mkfs, mount
    name: str        # the plan name it concerns (or the path for mkdir)
    spec: object = None
    path: str | None = None


def _steps(plan: Plan) -> list[Step]:
    steps: list[Step] = []
    for loop in plan.loops:
        steps.append(Step("mkdir", loop.name, path=str(Path(loop.file).parent)))
        steps.append(Step("file", loop.name, loop, path=loop.file))
        steps.append(Step("loop", loop.name, loop, path=loop.file))
    for kind, spec in build_order(plan):
        if kind in ("delay", "cache"):
            steps += [Step("dm", piece.dm_name, piece) for piece in dm.pieces(kind, spec)]
        elif kind == "iscsi":
            steps.append(Step("iscsi", spec.name, spec))
        else:
            steps.append(Step("raid", spec.name, spec) if kind == "raid" else Step("partition", spec.device, spec))
    for fs in plan.filesystems:
        steps.append(Step("mkfs", fs.device, fs))
        if fs.mount:
            steps.append(Step("mkdir", fs.device, path=fs.mount))
            steps.append(Step("mount", fs.device, fs, path=fs.mount))
    return steps


def _missing_dirs(path: str) -> list[str]:
    """The directories ``mkdir -p path`` would create, outermost first."""
    missing, current = [], Path(path)
    while not current.exists():
        missing.append(str(current))
        if current.parent == current:
            break
        current = current.parent
    return list(reversed(missing))


def _partscan(plan: Plan, name: str) -> bool:
    return any(t.device == name for t in plan.tables)


def _logical_block_size(plan: Plan, name: str, devmap: dict) -> int:
    """Logical block size of a plan device: from sysfs when it exists, else predicted."""
    path = devmap.get(name)
    if path and not path.startswith("<") and os.path.exists(path):
        try:
            _, kname, _ = blockdev.resolve(path)
            value = blockdev.sysfs_int(blockdev.SYS_BLOCK / blockdev.parent_disk(kname) / "queue" / "logical_block_size")
            if value:
                return value
        except IolabError:
            pass
    for loop in plan.loops:
        if loop.name == name:
            return loop.sector_size or 512
    for raid in plan.raids:
        if raid.name == name:
            return max(_logical_block_size(plan, m, devmap) for m in raid.members)
    for table in plan.tables:
        if name in {p.name for p in table.parts}:
            return _logical_block_size(plan, table.device, devmap)
    return 512


def _step_commands(plan: Plan, step: Step, devmap: dict) -> list[list[str]]:
    """Exact argv lists for a step; ``devmap`` maps plan names to device paths."""
    dev = lambda name: devmap.get(name, f"<{name}>")  # noqa: E731
    if step.kind == "mkdir":
        return [["mkdir", "-p", step.path]] if _missing_dirs(step.path) else []
    if step.kind == "file":
        loop: LoopSpec = step.spec
        if loop.sparse:
            return [["truncate", "--size", str(loop.size), loop.file]]
        return [["fallocate", "--length", str(loop.size), loop.file]]
    if step.kind == "loop":
        loop = step.spec
        argv = ["losetup", "--find", "--show"]
        if _partscan(plan, loop.name):
            argv.append("--partscan")
        if loop.sector_size:
            argv += ["--sector-size", str(loop.sector_size)]
        if loop.direct_io:
            argv.append("--direct-io=on")
        return [argv + [loop.file]]
    if step.kind == "partition":
        table: TableSpec = step.spec
        disk = dev(table.device)
        align = max(1, MiB // _logical_block_size(plan, table.device, devmap))
        argv = ["sgdisk", f"--set-alignment={align}"]
        start = 1
        for number, part in enumerate(table.parts, start=1):
            end = f"+{part.size // MiB}M" if part.size else "0"
            argv.append(f"--new={number}:{start}M:{end}")
            if part.label:
                argv.append(f"--change-name={number}:{part.label}")
            if part.typecode:
                argv.append(f"--typecode={number}:{part.typecode}")
            if part.size:
                start += part.size // MiB
        return [["sgdisk", "--zap-all", disk], argv + [disk], ["partx", "--update", disk]]
    if step.kind == "raid":
        raid: RaidSpec = step.spec
        geometry = [f"--chunk={raid.chunk // 1024}K"] if raid.level == 0 else ["--assume-clean"]
        return [["mdadm", "--create", raid.path, "--run", f"--level={raid.level}", *geometry,
                 f"--metadata={raid.metadata}", f"--raid-devices={len(raid.members)}",
                 *[dev(m) for m in raid.members]]]
    if step.kind == "dm":
        return dm.commands(plan, step.spec, devmap, limits.known_sizes(plan))
    if step.kind == "iscsi":
        return iscsi.commands(plan, step.spec, devmap)
    if step.kind == "mkfs":
        fs: FsSpec = step.spec
        argv = ["mkfs.ext4", "-F"] if fs.type == "ext4" else ["mkfs.xfs", "-f"]
        if fs.label:
            argv += ["-L", fs.label]
        return [argv + list(fs.options) + [dev(fs.device)]]
    if step.kind == "mount":
        fs = step.spec
        argv = ["mount", "-t", fs.type]
        if fs.mount_options:
            argv += ["-o", fs.mount_options]
        return [argv + [dev(fs.device), fs.mount]]
    raise AssertionError(step.kind)


def _initial_devmap(plan: Plan) -> dict:
    devmap = {}
    for spec in plan.devices:
        devmap[spec.name] = os.path.realpath(spec.path) if os.path.exists(spec.path) else spec.path
    return devmap


def plan_commands(plan: Plan | str | os.PathLike) -> list[list[str]]:
    """The exact commands setup would run, in order, changing nothing.

    Devices that do not exist yet appear as ``<name>`` (``<disk1>``,
    ``<disk1p1>``): their kernel names are known only once created. Existing
    devices appear by their current realpath.
    """
    plan = _as_plan(plan)
    devmap = _initial_devmap(plan)
    found, made = [], set()
    for step in _steps(plan):
        if step.kind == "mkdir":
            if step.path in made:
                continue
            made.add(step.path)
        found.extend(_step_commands(plan, step, devmap))
    return found


def preflight(plan: Plan | str | os.PathLike, confirm=None) -> list[str]:
    """Problems that would stop setup, found without changing anything (empty: none)."""
    plan = _as_plan(plan)
    problems = []
    programs = {argv[0] for argv in plan_commands(plan)} - {"iscsid", "iscsiadm"}  # plan.iscsi names them
    for program in sorted(programs):
        try:
            commands.which(program)
        except IolabError as exc:
            problems.append(str(exc))
    if plan.raids and not Path("/proc/mdstat").exists():
        problems.append("the md (software RAID) driver is not available in this kernel (no /proc/mdstat; "
                        "try: modprobe md_mod)")
    problems += dm.preflight(plan)
    problems += iscsi.preflight(plan)
    if plan.state_path.exists():
        problems.append(f"already set up (state file {plan.state_path}); run: iolab teardown {plan.path}")
    for loop in plan.loops:
        if os.path.lexists(loop.file):
            problems.append(f"{loop.file}: exists; iolab only uses loop files it creates (and deletes "
                            f"them on teardown): remove it or name another file")
    for fs in plan.filesystems:
        if fs.mount and os.path.exists(fs.mount):
            if not os.path.isdir(fs.mount):
                problems.append(f"{fs.mount}: exists and is not a directory")
            elif os.path.ismount(fs.mount):
                problems.append(f"{fs.mount}: something is already mounted there")
            elif any(os.scandir(fs.mount)):
                problems.append(f"{fs.mount}: not empty (iolab mounts only on empty directories)")
    for spec in plan.devices:
        try:
            safety.check_writable(spec.path, confirm=confirm)
        except IolabError as exc:
            problems.append(str(exc))
    if os.geteuid() != 0:
        problems.append("setup needs root (loop devices, partitions, arrays, device-mapper, mkfs, mount)")
    return problems


def _as_plan(plan) -> Plan:
    return plan if isinstance(plan, Plan) else load_plan(plan)


# ------------------------------------------------------------------- setup

def setup(plan: Plan | str | os.PathLike, confirm=None, *,
          progress: Callable[[str], None] | None = None) -> dict:
    """Carry out ``plan``; returns ``{"devices": {name: /dev/...}, "mounts": {name: path}, "state": path}``.

    ``confirm`` is a device path or a list of them (``--confirm``), see
    :func:`iolab.devices.safety.check_writable`. ``progress`` is called with each
    command before it runs. On any failure or interruption everything done so
    far is torn down and the exception re-raised.
    """
    plan = _as_plan(plan)
    problems = preflight(plan, confirm)
    if problems:
        raise IolabError("cannot set up: " + "; ".join(problems), context=str(plan.path))
    state = State.create(plan)
    try:
        with sigterm_raises(lambda: KeyboardInterrupt(f"signal {int(signal.SIGTERM)}")):
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


@dataclasses.dataclass
class SetupRun:
    """What every step of one setup shares (the dm and iscsi steps get it too)."""
    plan: Plan
    state: State
    confirm: object
    progress: Callable[[str], None] | None
    devmap: dict
    ours: set

    def claim(self, name: str) -> None:
        """Safety check of the plan device ``name`` right before writing it, then an O_EXCL open."""
        path = self.devmap[name]
        if name in self.ours:
            verdict = safety.assess(path)
            hard = [r for r in verdict.reasons if not r.overridable]
            if hard:
                raise IolabError(f"refusing to write: {'; '.join(r.text for r in hard)}", context=path)
        else:
            safety.check_writable(path, confirm=self.confirm)
        with safety.open_exclusive(path):
            pass


def _execute(plan: Plan, state: State, confirm, progress) -> None:
    devmap = state.data["devices"]
    devmap.update(_initial_devmap(plan))
    run = SetupRun(plan, state, confirm, progress, devmap, plan.created_names())
    for step in _steps(plan):
        argvs = _step_commands(plan, step, devmap)
        record = {"kind": step.kind, "name": step.name, "commands": argvs}
        _STEPS[step.kind](run, step, argvs, record)
        state.save()


def _step_mkdir(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    missing = _missing_dirs(step.path)
    if not missing:
        return
    run.state.begin({**record, "path": step.path, "created": missing})
    run_command(argvs[0], run.progress)
    run.state.done(run.state.data["steps"][-1])


def _step_file(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    if os.path.lexists(step.path):
        raise IolabError("exists; iolab only uses loop files it creates", context=step.path)
    rec = run.state.begin({**record, "path": step.path})
    run_command(argvs[0], run.progress)
    st = os.stat(step.path)
    if st.st_size != step.spec.size:
        raise IolabError(f"has {st.st_size} bytes, expected {step.spec.size}", context=step.path)
    run.state.done(rec, dev=st.st_dev, ino=st.st_ino)


def _step_loop(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    rec = run.state.begin({**record, "file": step.path})
    device = run_command(argvs[0], run.progress).strip()
    if not device.startswith("/dev/"):
        raise IolabError(f"unexpected losetup output {device!r}", context=shlex.join(argvs[0]))
    run.devmap[step.name] = device
    run.state.done(rec, device=device)
    if step.spec.direct_io and not loopdev.dio_enabled(device):
        raise IolabError("the kernel did not enable direct I/O on the loop device", context=device,
                         hint="the backing file system must support O_DIRECT (tmpfs does not)")


def _step_partition(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    table: TableSpec = step.spec
    disk = run.devmap[table.device]
    run.claim(table.device)
    rec = run.state.begin({**record, "device": disk})
    for argv in argvs:
        run_command(argv, run.progress)
    _, kname, _ = blockdev.resolve(disk)
    want = len(table.parts)
    wait_until(lambda: len(blockdev.partitions(kname)) >= want and
               all(os.path.exists(f"/dev/{p}") for p in blockdev.partitions(kname)),
               DEVICE_WAIT, what=f"the partitions of {disk} to appear")
    parts = {blockdev.partition_number(p): p for p in blockdev.partitions(kname)}
    for number, part in enumerate(table.parts, start=1):
        pname = parts.get(number)
        if pname is None:
            raise IolabError(f"partition {number} did not appear", context=disk)
        start = blockdev.sysfs_int(blockdev.SYS_BLOCK / pname / "start")
        if start is None or (start * 512) % MiB:
            raise IolabError(f"partition {number} starts at sector {start}, not 1 MiB-aligned",
                             context=disk)
        size = blockdev.size_bytes(pname)
        if part.size and size != part.size:
            raise IolabError(f"partition {number} has {size} bytes, expected {part.size}", context=disk)
        run.devmap[part.name] = f"/dev/{pname}"
    run.state.done(rec, partitions={p.name: run.devmap[p.name] for p in table.parts})


def _step_raid(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    raid: RaidSpec = step.spec
    if not Path("/proc/mdstat").exists():
        raise IolabError("the md (software RAID) driver is not available in this kernel",
                         context=raid.path, hint="modprobe md_mod")
    members = [run.devmap[m] for m in raid.members]
    for name in raid.members:
        run.claim(name)
    rec = run.state.begin({**record, "path": raid.path, "members": members})
    run_command(argvs[0], run.progress)
    wait_until(lambda: os.path.exists(raid.path), DEVICE_WAIT, what=raid.path)
    real, kname, _ = blockdev.resolve(raid.path)
    level = blockdev.sysfs_text(blockdev.SYS_BLOCK / kname / "md" / "level")
    chunk = blockdev.sysfs_int(blockdev.SYS_BLOCK / kname / "md" / "chunk_size")
    run.devmap[raid.name] = real
    run.state.done(rec, device=real, kname=kname, slaves=blockdev.slaves(kname))
    if level != f"raid{raid.level}" or (raid.level == 0 and chunk != raid.chunk):
        raise IolabError(f"the array is {level} with chunk {chunk}, expected raid{raid.level}"
                         + (f" with chunk {raid.chunk}" if raid.level == 0 else ""), context=real)


def _step_mkfs(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    fs: FsSpec = step.spec
    device = run.devmap[fs.device]
    run.claim(fs.device)
    rec = run.state.begin({**record, "device": device})
    run_command(argvs[0], run.progress)
    found = [s["type"] for s in safety.signatures(device)]
    if fs.type not in found:
        raise IolabError(f"no {fs.type} signature after mkfs (found: {', '.join(found) or 'none'})",
                         context=device)
    run.state.done(rec)


def _step_mount(run: SetupRun, step: Step, argvs: list, record: dict) -> None:
    fs = step.spec
    device = run.devmap[fs.device]
    if os.path.ismount(fs.mount) or blockdev.mounted_devno(fs.mount) is not None:
        raise IolabError("something is already mounted there", context=fs.mount)
    rec = run.state.begin({**record, "device": device, "path": fs.mount})
    run_command(argvs[0], run.progress)
    devno = os.stat(device).st_rdev
    if blockdev.mounted_devno(fs.mount) != devno:
        raise IolabError(f"{device} is not mounted there after mount", context=fs.mount)
    run.state.done(rec, devno=devno)


_STEPS = {"mkdir": _step_mkdir, "file": _step_file, "loop": _step_loop, "partition": _step_partition,
          "raid": _step_raid, "dm": lambda run, step, argvs, record: dm.execute(run, step.spec, argvs, record),
          "iscsi": lambda run, step, argvs, record: iscsi.execute(run, step.spec, argvs, record),
          "mkfs": _step_mkfs, "mount": _step_mount}
