"""A plan as steps and exact commands, and the checks before setup: :func:`plan_commands`,
:func:`preflight` (see :mod:`iolab.devices.plan`)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.devices import inventory as devices, plan_dm, plan_iscsi, plan_limits
from iolab.devices.plan_load import _order, load_plan
from iolab.devices.plan_model import MiB, FsSpec, LoopSpec, Plan, RaidSpec, TableSpec


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
    for kind, spec in _order(plan):
        if kind in ("delay", "cache"):
            steps += [Step("dm", piece.dm_name, piece) for piece in plan_dm.pieces(kind, spec)]
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
            _, kname, _ = devices.resolve(path)
            value = devices._read_int(devices.SYS_BLOCK / devices.parent_disk(kname) / "queue" / "logical_block_size")
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
        return plan_dm.commands(plan, step.spec, devmap, plan_limits.known_sizes(plan))
    if step.kind == "iscsi":
        return plan_iscsi.commands(plan, step.spec, devmap)
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
    programs = {argv[0] for argv in plan_commands(plan)} - {"iscsid", "iscsiadm"}  # plan_iscsi names them
    for program in sorted(programs):
        try:
            commands.which(program)
        except IolabError as exc:
            problems.append(str(exc))
    if plan.raids and not Path("/proc/mdstat").exists():
        problems.append("the md (software RAID) driver is not available in this kernel (no /proc/mdstat; "
                        "try: modprobe md_mod)")
    problems += plan_dm.preflight(plan)
    problems += plan_iscsi.preflight(plan)
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
            devices.check_writable(spec.path, confirm=confirm)
        except IolabError as exc:
            problems.append(str(exc))
    if os.geteuid() != 0:
        problems.append("setup needs root (loop devices, partitions, arrays, device-mapper, mkfs, mount)")
    return problems


def _as_plan(plan) -> Plan:
    return plan if isinstance(plan, Plan) else load_plan(plan)
