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

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import re
import shlex
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from iolab.core import commands, yamlfile
from iolab.devices import inventory as devices, loopdev, plan_limits
from iolab.core.errors import IolabError
from iolab.core.files import atomic_write
from iolab.core.units import human_size, parse_size

log = logging.getLogger(__name__)

MiB = 1024 ** 2
TOP_KEYS = {"name", "description", "loop_devices", "devices", "raid", "partitions", "filesystems"}
LOOP_KEYS = {"name", "file", "size", "sector_size", "direct_io", "sparse"}
DEVICE_KEYS = {"name", "path"}
RAID_KEYS = {"name", "level", "chunk", "members", "metadata"}
RAID_LEVELS = ("0", "1")
TABLE_KEYS = {"device", "parts"}
PART_KEYS = {"name", "size", "label", "typecode"}
FS_KEYS = {"device", "type", "options", "label", "mount", "mount_options"}
FS_TYPES = ("ext4", "xfs")
SECTOR_SIZES = (512, 1024, 2048, 4096)
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
DEFAULT_CHUNK = 512 * 1024
STATE_VERSION = 1


# ------------------------------------------------------------------ the plan

@dataclasses.dataclass
class LoopSpec:
    name: str
    file: str           # absolute
    size: int
    sector_size: int | None = None
    direct_io: bool = True
    sparse: bool = False


@dataclasses.dataclass
class DeviceSpec:
    name: str
    path: str


@dataclasses.dataclass
class RaidSpec:
    name: str
    level: int
    chunk: int
    members: list
    metadata: str = "1.2"

    @property
    def path(self) -> str:
        return f"/dev/md/{self.name}"


@dataclasses.dataclass
class PartSpec:
    name: str
    size: int | None     # None: the rest of the device
    label: str | None = None
    typecode: str | None = None


@dataclasses.dataclass
class TableSpec:
    device: str
    parts: list


@dataclasses.dataclass
class FsSpec:
    device: str
    type: str
    options: list
    label: str | None = None
    mount: str | None = None
    mount_options: str | None = None


@dataclasses.dataclass
class Plan:
    path: Path
    name: str
    description: str = ""
    loops: list = dataclasses.field(default_factory=list)
    devices: list = dataclasses.field(default_factory=list)
    raids: list = dataclasses.field(default_factory=list)
    tables: list = dataclasses.field(default_factory=list)
    filesystems: list = dataclasses.field(default_factory=list)
    sha256: str = ""

    @property
    def state_path(self) -> Path:
        return state_path(self.path)

    def created_names(self) -> set:
        """Names of devices this plan creates (not existing devices)."""
        names = {l.name for l in self.loops} | {r.name for r in self.raids}
        for table in self.tables:
            names |= {p.name for p in table.parts}
        return names


def state_path(plan_path: str | os.PathLike) -> Path:
    """Where the state of ``plan_path`` lives: ``<plan dir>/.<plan stem>.state.json``."""
    path = Path(plan_path).resolve()
    return path.with_name(f".{path.stem}.state.json")


class _Fields:
    """Validation helpers that name the file and the field in every error."""

    def __init__(self, source: Path):
        self.source = source

    def fail(self, field: str, message: str, hint: str | None = None):
        raise IolabError(message, context=f"{self.source}: {field}", hint=hint)

    def mapping(self, value, field: str, allowed: set, required: tuple = ()) -> dict:
        if not isinstance(value, dict):
            self.fail(field or "(top level)", f"must be a mapping, got {type(value).__name__}")
        unknown = sorted(set(map(str, value)) - allowed)
        if unknown:
            self.fail(f"{field}.{unknown[0]}" if field else unknown[0],
                      f"unknown key (known: {', '.join(sorted(allowed))})")
        for key in required:
            if value.get(key) in (None, ""):
                self.fail(f"{field}.{key}" if field else key, "missing (required)")
        return value

    def items(self, value, field: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(field, f"must be a list, got {type(value).__name__}")
        return value

    def name(self, value, field: str) -> str:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.fail(field, f"not a valid name: {value!r}",
                      "a letter, then letters, digits, '.', '_' or '-', at most 32 characters")
        return value

    def text(self, value, field: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            self.fail(field, f"must be a string, got {type(value).__name__}")
        return str(value)

    def boolean(self, value, field: str, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(field, f"must be true or false, got {value!r}")
        return value

    def size(self, value, field: str) -> int:
        return parse_size(value, context=f"{self.source}: {field}")

    def words(self, value, field: str) -> list:
        if value is None:
            return []
        if isinstance(value, str):
            try:
                return shlex.split(value)
            except ValueError as exc:
                self.fail(field, f"cannot split into words: {exc}")
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                           for v in value):
            return [str(v) for v in value]
        self.fail(field, "must be a string or a list of strings")


def _raid_level(f: _Fields, item: dict, field: str) -> int:
    level = str(item["level"]).lower().removeprefix("raid")
    if level not in RAID_LEVELS:
        f.fail(f"{field}.level", f"RAID level 0 or 1 is supported, got {item['level']!r}")
    return int(level)


def _raid_chunk(f: _Fields, item: dict, field: str, level: int) -> int:
    """RAID0's chunk size; a mirror has none (0), and naming one is a mistake in the plan."""
    if level == 1:
        if "chunk" in item:
            f.fail(f"{field}.chunk", "a RAID1 (mirror) has no chunk size: remove it")
        return 0
    chunk = f.size(item.get("chunk", DEFAULT_CHUNK), f"{field}.chunk")
    if chunk < 4096 or chunk & (chunk - 1):
        f.fail(f"{field}.chunk", f"must be a power of two of at least 4K, got {item.get('chunk')!r}")
    return chunk


def load_plan(path: str | os.PathLike) -> Plan:
    """Read and validate a plan; :class:`IolabError` names the file and the field."""
    source = Path(path)
    raw_text = yamlfile.read_text(source, what="plan file")
    data = yamlfile.parse(raw_text, str(source))
    f = _Fields(source)
    if data is None:
        f.fail("(top level)", "the plan is empty")
    f.mapping(data, "", TOP_KEYS)
    base = source.resolve().parent
    plan = Plan(path=source.resolve(), name=f.text(data.get("name"), "name") or source.stem,
                description=f.text(data.get("description"), "description") or "",
                sha256=hashlib.sha256(raw_text.encode()).hexdigest())
    names: dict[str, str] = {}   # name -> field where defined

    def define(name: str, field: str) -> None:
        if name in names:
            f.fail(field, f"name {name!r} already used at {names[name]}")
        names[name] = field

    files = {}
    for i, item in enumerate(f.items(data.get("loop_devices"), "loop_devices")):
        field = f"loop_devices[{i}]"
        f.mapping(item, field, LOOP_KEYS, ("name", "file", "size"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        file = f.text(item["file"], f"{field}.file")
        file = str(Path(os.path.expanduser(file)) if os.path.isabs(os.path.expanduser(file))
                   else base / file)
        file = os.path.normpath(file)
        if file in files:
            f.fail(f"{field}.file", f"same file as {files[file]}")
        files[file] = field
        size = f.size(item["size"], f"{field}.size")
        if size % 4096:
            f.fail(f"{field}.size", f"must be a multiple of 4 KiB, got {size} bytes")
        sector = item.get("sector_size")
        if sector is not None and sector not in SECTOR_SIZES:
            f.fail(f"{field}.sector_size", f"must be one of {', '.join(map(str, SECTOR_SIZES))}, got {sector!r}")
        plan.loops.append(LoopSpec(name=name, file=file, size=size, sector_size=sector,
                                   direct_io=f.boolean(item.get("direct_io"), f"{field}.direct_io", True),
                                   sparse=f.boolean(item.get("sparse"), f"{field}.sparse", False)))

    for i, item in enumerate(f.items(data.get("devices"), "devices")):
        field = f"devices[{i}]"
        f.mapping(item, field, DEVICE_KEYS, ("name", "path"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        dev = f.text(item["path"], f"{field}.path")
        if not dev.startswith("/dev/"):
            f.fail(f"{field}.path", f"must be a device path under /dev/, got {dev!r}")
        plan.devices.append(DeviceSpec(name=name, path=dev))

    for i, item in enumerate(f.items(data.get("raid"), "raid")):
        field = f"raid[{i}]"
        f.mapping(item, field, RAID_KEYS, ("name", "level", "members"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        level = _raid_level(f, item, field)
        chunk = _raid_chunk(f, item, field, level)
        members = f.items(item["members"], f"{field}.members")
        if len(members) < 2:
            f.fail(f"{field}.members", f"a RAID{level} needs at least two members")
        members = [f.name(m, f"{field}.members[{j}]") for j, m in enumerate(members)]
        if len(set(members)) != len(members):
            f.fail(f"{field}.members", "a member is listed twice")
        metadata = f.text(item.get("metadata"), f"{field}.metadata") or "1.2"
        if metadata not in ("0.90", "1.0", "1.1", "1.2"):
            f.fail(f"{field}.metadata", f"must be 0.90, 1.0, 1.1 or 1.2, got {metadata!r}")
        plan.raids.append(RaidSpec(name=name, level=level, chunk=chunk, members=members, metadata=metadata))

    for i, item in enumerate(f.items(data.get("partitions"), "partitions")):
        field = f"partitions[{i}]"
        f.mapping(item, field, TABLE_KEYS, ("device", "parts"))
        device = f.name(item["device"], f"{field}.device")
        parts = f.items(item["parts"], f"{field}.parts")
        if not parts:
            f.fail(f"{field}.parts", "no partitions listed")
        specs = []
        for j, part in enumerate(parts):
            pfield = f"{field}.parts[{j}]"
            f.mapping(part, pfield, PART_KEYS, ("name",))
            pname = f.name(part["name"], f"{pfield}.name")
            define(pname, f"{pfield}.name")
            size = None
            if part.get("size") is not None:
                size = f.size(part["size"], f"{pfield}.size")
                if size % MiB:
                    f.fail(f"{pfield}.size", f"must be a multiple of 1 MiB (so every partition starts "
                           f"1 MiB-aligned), got {part['size']!r}")
            elif j != len(parts) - 1:
                f.fail(f"{pfield}.size", "missing (only the last partition may take the rest)")
            label = f.text(part.get("label"), f"{pfield}.label")
            if label is not None and (len(label) > 36 or ":" in label):
                f.fail(f"{pfield}.label", "at most 36 characters, no ':'")
            typecode = f.text(part.get("typecode"), f"{pfield}.typecode")
            if typecode is not None and not re.fullmatch(r"[0-9A-Fa-f]{4}", typecode):
                f.fail(f"{pfield}.typecode", f"must be a 4-digit sgdisk type code such as 8300, got {typecode!r}")
            specs.append(PartSpec(name=pname, size=size, label=label, typecode=typecode))
        plan.tables.append(TableSpec(device=device, parts=specs))

    mounts_seen = {}
    for i, item in enumerate(f.items(data.get("filesystems"), "filesystems")):
        field = f"filesystems[{i}]"
        f.mapping(item, field, FS_KEYS, ("device", "type"))
        device = f.name(item["device"], f"{field}.device")
        fstype = f.text(item["type"], f"{field}.type")
        if fstype not in FS_TYPES:
            f.fail(f"{field}.type", f"must be one of {', '.join(FS_TYPES)}, got {fstype!r}")
        mount = f.text(item.get("mount"), f"{field}.mount")
        if mount is not None:
            if not os.path.isabs(mount):
                f.fail(f"{field}.mount", f"must be an absolute path, got {mount!r}")
            mount = os.path.normpath(mount)
            if mount == "/":
                f.fail(f"{field}.mount", "iolab does not mount over /")
            if mount in mounts_seen:
                f.fail(f"{field}.mount", f"same mount point as {mounts_seen[mount]}")
            mounts_seen[mount] = field
        mount_options = item.get("mount_options")
        if mount_options is not None:
            if mount is None:
                f.fail(f"{field}.mount_options", "given without a mount point (mount)")
            if isinstance(mount_options, list):
                mount_options = ",".join(str(o) for o in mount_options)
            mount_options = f.text(mount_options, f"{field}.mount_options")
        label = f.text(item.get("label"), f"{field}.label")
        if label is not None and len(label) > (12 if fstype == "xfs" else 16):
            f.fail(f"{field}.label", f"too long for {fstype} (at most {12 if fstype == 'xfs' else 16} characters)")
        plan.filesystems.append(FsSpec(device=device, type=fstype,
                                       options=f.words(item.get("options"), f"{field}.options"),
                                       label=label, mount=mount, mount_options=mount_options))

    # references: every name used exists, and each device is used once
    used: dict[str, str] = {}

    def use(name: str, field: str) -> None:
        if name not in names:
            f.fail(field, f"unknown device name {name!r}",
                   f"known: {', '.join(sorted(names)) or 'none'}")
        if name in used:
            f.fail(field, f"device {name!r} is already used at {used[name]}")
        used[name] = field

    for i, raid in enumerate(plan.raids):
        for j, member in enumerate(raid.members):
            use(member, f"raid[{i}].members[{j}]")
    for i, table in enumerate(plan.tables):
        use(table.device, f"partitions[{i}].device")
        if table.device in {p.name for p in table.parts}:
            f.fail(f"partitions[{i}].device", "a device cannot hold its own partitions")
    for i, fs in enumerate(plan.filesystems):
        use(fs.device, f"filesystems[{i}].device")
    if not (plan.loops or plan.devices or plan.raids or plan.tables or plan.filesystems):
        f.fail("(top level)", "the plan does nothing", "add loop_devices, devices, raid, partitions or filesystems")
    plan_limits.check_sizes(plan, f.fail)  # what mkfs rejects, what storage cannot hold
    # partition sizes against the known size of a loop device
    for i, table in enumerate(plan.tables):
        loop = next((l for l in plan.loops if l.name == table.device), None)
        if loop is not None:
            needed = MiB + sum(p.size or MiB for p in table.parts) + MiB  # 1 MiB lead + GPT backup
            if needed > loop.size:
                f.fail(f"partitions[{i}].parts", f"need {human_size(needed)} but {loop.name} is "
                       f"{human_size(loop.size)}")
    _order(plan, f)  # raises on a dependency cycle
    return plan


def _order(plan: Plan, f: _Fields | None = None) -> list:
    """Partition tables and arrays in an order where every input exists first."""
    defined = {l.name for l in plan.loops} | {d.name for d in plan.devices}
    pending = [("raid", r) for r in plan.raids] + [("table", t) for t in plan.tables]
    ordered = []
    while pending:
        for item in pending:
            kind, spec = item
            needs = spec.members if kind == "raid" else [spec.device]
            if all(n in defined for n in needs):
                ordered.append(item)
                pending.remove(item)
                defined |= {spec.name} if kind == "raid" else {p.name for p in spec.parts}
                break
        else:
            what = ", ".join(s.name if k == "raid" else f"partitions of {s.device}" for k, s in pending)
            if f is not None:
                f.fail("(top level)", f"circular device references: {what}")
            raise IolabError(f"circular device references: {what}")
    return ordered


# ------------------------------------------------------------------- steps

@dataclasses.dataclass
class Step:
    """One thing setup does, with the exact commands (``<name>`` stands for a
    device that exists only once an earlier step ran)."""
    kind: str        # mkdir, file, loop, partition, raid, mkfs, mount
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
    programs = {argv[0] for argv in plan_commands(plan)}
    for program in sorted(programs):
        try:
            commands.which(program)
        except IolabError as exc:
            problems.append(str(exc))
    if plan.raids and not Path("/proc/mdstat").exists():
        problems.append("the md (software RAID) driver is not available in this kernel (no /proc/mdstat; "
                        "try: modprobe md_mod)")
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
        problems.append("setup needs root (loop devices, partitions, mkfs, mount)")
    return problems


def _as_plan(plan) -> Plan:
    return plan if isinstance(plan, Plan) else load_plan(plan)


# ------------------------------------------------------------------- state

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class _State:
    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def create(cls, plan: Plan) -> "_State":
        """Create the state file, failing if it exists (written complete, then linked into
        place: a concurrent setup or teardown never sees it half-written)."""
        path = plan.state_path
        state = cls(path, {"state_version": STATE_VERSION, "plan": str(plan.path), "plan_name": plan.name,
                           "plan_sha256": plan.sha256, "started": _now(), "updated": _now(),
                           "status": "setting up", "pid": os.getpid(), "boot_id": _boot_id(),
                           "devices": {}, "steps": []})
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".new")
        except OSError as exc:
            raise IolabError(f"cannot create the state file {path}: {exc.strerror}", context=str(plan.path),
                             hint="the plan's directory must be writable") from exc
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(state.data, indent=2) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.link(tmp, path)
        except FileExistsError:
            raise IolabError(f"already set up, or a setup is running (state file {path})",
                             context=str(plan.path), hint=f"run: iolab teardown {plan.path}") from None
        except OSError as exc:
            raise IolabError(f"cannot create the state file {path}: {exc.strerror}", context=str(plan.path)) from exc
        finally:
            Path(tmp).unlink(missing_ok=True)
        return state

    @classmethod
    def read(cls, path: Path) -> "_State | None":
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc
        if not text.strip():  # created, then the process died before the first write
            return cls(path, {"steps": [], "devices": {}, "status": "empty"})
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise IolabError(f"unreadable state file: {exc}", context=str(path)) from exc
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise IolabError("not an iolab state file", context=str(path))
        return cls(path, data)

    def save(self) -> None:
        self.data["updated"] = _now()
        atomic_write(self.path, json.dumps(self.data, indent=2) + "\n")

    def begin(self, record: dict) -> dict:
        record["status"] = "pending"
        self.data["steps"].append(record)
        self.save()
        return record

    def done(self, record: dict, **fields) -> None:
        record.update(fields)
        record["status"] = "done"
        self.save()


# ------------------------------------------------------------------- setup

@contextlib.contextmanager
def _signals(mode: str):
    """``interrupt``: SIGTERM raises KeyboardInterrupt (so setup tears down);
    ``hold``: SIGINT/SIGTERM are logged and ignored (teardown must finish)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def hold(signum, frame):
        log.warning("signal %s during teardown: finishing the teardown first", signum)

    previous = {}
    wanted = {signal.SIGTERM: interrupt} if mode == "interrupt" else {signal.SIGINT: hold, signal.SIGTERM: hold}
    for signum, handler in wanted.items():
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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


def _run(argv: list[str], progress) -> str:
    """Run one plan command (stdin empty: no tool may stop to ask a question)."""
    if progress:
        progress(shlex.join(argv))
    proc = commands.run(argv, input="", check=False)
    if proc.returncode != 0:
        raise IolabError(f"exited with {proc.returncode}: {_error_line(proc.stderr or proc.stdout)}",
                         context=shlex.join(argv))
    return proc.stdout


def _error_line(text: str) -> str:
    """The line that says what went wrong: the last one before a usage text (mkfs.xfs
    prints its whole usage after the error), else the last one."""
    lines = []
    for line in text.splitlines():
        if line.strip().lower().startswith("usage:"):
            break
        if line.strip():
            lines.append(line.strip())
    return lines[-1] if lines else "no output"


def _mount_devno(target: str) -> int | None:
    """Device number of the file system mounted (last) at ``target``, if any."""
    target = os.path.realpath(target)
    for mount in reversed(devices.mounts()):
        if mount.target == target:
            return mount.devno
    return None


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


def _execute(plan: Plan, state: _State, confirm, progress) -> None:
    devmap = state.data["devices"]
    devmap.update(_initial_devmap(plan))
    ours = plan.created_names()
    for step in _steps(plan):
        argvs = _step_commands(plan, step, devmap)
        record = {"kind": step.kind, "name": step.name, "commands": argvs}
        if step.kind == "mkdir":
            missing = _missing_dirs(step.path)
            if not missing:
                continue
            state.begin({**record, "path": step.path, "created": missing})
            _run(argvs[0], progress)
            state.done(state.data["steps"][-1])
        elif step.kind == "file":
            if os.path.lexists(step.path):
                raise IolabError("exists; iolab only uses loop files it creates", context=step.path)
            rec = state.begin({**record, "path": step.path})
            _run(argvs[0], progress)
            st = os.stat(step.path)
            if st.st_size != step.spec.size:
                raise IolabError(f"has {st.st_size} bytes, expected {step.spec.size}", context=step.path)
            state.done(rec, dev=st.st_dev, ino=st.st_ino)
        elif step.kind == "loop":
            rec = state.begin({**record, "file": step.path})
            device = _run(argvs[0], progress).strip()
            if not device.startswith("/dev/"):
                raise IolabError(f"unexpected losetup output {device!r}", context=shlex.join(argvs[0]))
            devmap[step.name] = device
            state.done(rec, device=device)
            if step.spec.direct_io and not loopdev.dio_enabled(device):
                raise IolabError("the kernel did not enable direct I/O on the loop device", context=device,
                                 hint="the backing file system must support O_DIRECT (tmpfs does not)")
        elif step.kind == "partition":
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
        elif step.kind == "raid":
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
        elif step.kind == "mkfs":
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
        elif step.kind == "mount":
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
        state.save()


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
        devno = _mount_devno(record["path"])
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
            _, kname, _ = devices.resolve(path)
        except IolabError:
            return [], "the array is gone"
        if done and sorted(devices.slaves(kname)) != sorted(record.get("slaves", [])):
            return [], f"{path} is now a different array; leaving it"
        return [["mdadm", "--stop", path]], None
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
                verdict = devices.assess(device)
            except IolabError:
                return
            busy = [r.text for r in verdict.reasons if r.kind in (devices.MOUNTED, devices.SWAP, devices.HOLDERS)]
            if busy:
                raise IolabError(f"still in use: {'; '.join(busy)}", context=device)
    if record["kind"] == "file" and _loops_backed_by(record["path"]):
        raise IolabError(f"still attached to {', '.join(_loops_backed_by(record['path']))}", context=record["path"])


def teardown_commands(plan: Plan | str | os.PathLike) -> list[list[str]]:
    """What :func:`teardown` would run now (from the state file), changing nothing."""
    path = plan.state_path if isinstance(plan, Plan) else state_path(plan)
    state = _State.read(path)
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
    with _signals("hold"):
        state = _State.read(path)
        if state is None:
            log.info("%s: nothing to tear down (no state file %s)", context, path)
            return ran
        pid = state.data.get("pid")
        if state.data.get("status") == "setting up" and pid not in (None, os.getpid()) \
                and _alive(pid, state.data.get("boot_id")):
            raise IolabError(f"a setup of this plan is still running (pid {pid})", context=context,
                             hint="interrupt it (Ctrl-C or SIGTERM): it tears down what it did itself")
        state.data["status"] = "tearing down"
        state.save()
        failures = []
        for record in list(reversed(state.data["steps"])):
            try:
                argvs, skip = _undo_commands(record)
                if skip and not argvs:
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


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _alive(pid: int, boot_id: str | None) -> bool:
    """Whether the setup process ``pid`` still runs (not a pid reused since a reboot)."""
    if boot_id is not None and boot_id != _boot_id():
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    # empty while the process is between fork and exec, or a zombie: count it as running
    return not cmdline.strip() or "iolab" in cmdline or "python" in cmdline


def _undo_run(argv: list[str], progress) -> None:
    if progress:
        progress(shlex.join(argv))
    attempts = 5 if argv[0] == "umount" else 1
    for attempt in range(attempts):
        try:
            _run(argv, None)
            return
        except IolabError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))  # a file system still busy for a moment after fio exits
