"""Reading and validating a setup plan: :func:`load_plan` (see :mod:`iolab.devices.plan`)."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from iolab.core import yamlfile
from iolab.core.errors import IolabError
from iolab.core.units import human_size
from iolab.devices import plan_dm, plan_iscsi, plan_limits
from iolab.devices.plan_model import (DEFAULT_CHUNK, DEVICE_KEYS, FS_KEYS, FS_TYPES, LOOP_KEYS, MiB, PART_KEYS,
                                     RAID_KEYS, RAID_LEVELS, SECTOR_SIZES, TABLE_KEYS, TOP_KEYS, DeviceSpec, FsSpec,
                                     LoopSpec, PartSpec, Plan, RaidSpec, TableSpec, _Fields)


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
    plan = Plan(path=source.resolve(), name=f.text(data.get("name"), "name") or source.stem,
                description=f.text(data.get("description"), "description") or "",
                sha256=hashlib.sha256(raw_text.encode()).hexdigest())
    names: dict[str, str] = {}   # name -> field where defined

    def define(name: str, field: str) -> None:
        if name in names:
            f.fail(field, f"name {name!r} already used at {names[name]}")
        names[name] = field

    for load in (_load_loops, _load_devices, _load_raids, plan_dm.load_delays, plan_dm.load_caches, plan_iscsi.load,
                 _load_tables,
                 _load_filesystems):
        load(f, data, plan, define)
    _check_references(f, plan, names)
    plan_limits.check_sizes(plan, f.fail)  # what mkfs rejects, what storage cannot hold
    _check_partitions_fit(f, plan)
    _order(plan, f)  # raises on a dependency cycle
    return plan


def _load_loops(f: _Fields, data: dict, plan: Plan, define) -> None:
    """loop_devices: files (relative to the plan's directory), sizes, sector sizes."""
    base = plan.path.parent
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


def _load_devices(f: _Fields, data: dict, plan: Plan, define) -> None:
    """devices: existing block devices by path."""
    for i, item in enumerate(f.items(data.get("devices"), "devices")):
        field = f"devices[{i}]"
        f.mapping(item, field, DEVICE_KEYS, ("name", "path"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        dev = f.text(item["path"], f"{field}.path")
        if not dev.startswith("/dev/"):
            f.fail(f"{field}.path", f"must be a device path under /dev/, got {dev!r}")
        plan.devices.append(DeviceSpec(name=name, path=dev))


def _load_raids(f: _Fields, data: dict, plan: Plan, define) -> None:
    """raid: md arrays (RAID0 or RAID1) over other plan devices."""
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


def _load_tables(f: _Fields, data: dict, plan: Plan, define) -> None:
    """partitions: a GPT per device, 1 MiB-aligned partitions."""
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


def _load_filesystems(f: _Fields, data: dict, plan: Plan, define) -> None:
    """filesystems: mkfs and where to mount."""
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


def _check_references(f: _Fields, plan: Plan, names: dict) -> None:
    """Every name used exists, and each device is used once."""
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
    for name, field in plan_dm.references(plan):
        use(name, field)
    for name, field in plan_iscsi.references(plan):
        use(name, field)
    dm_names = {d.name for d in plan.delays} | {c.name for c in plan.caches}
    for i, table in enumerate(plan.tables):
        use(table.device, f"partitions[{i}].device")
        if table.device in dm_names:
            f.fail(f"partitions[{i}].device", f"{table.device} is a device-mapper device: the kernel does not "
                   "partition it", "put the file system on it directly")
        if table.device in {p.name for p in table.parts}:
            f.fail(f"partitions[{i}].device", "a device cannot hold its own partitions")
    for i, fs in enumerate(plan.filesystems):
        use(fs.device, f"filesystems[{i}].device")
    if not (plan.loops or plan.devices or plan.raids or plan.delays or plan.caches or plan.iscsi or plan.tables
            or plan.filesystems):
        f.fail("(top level)", "the plan does nothing",
               "add loop_devices, devices, raid, delay, cache, iscsi, partitions or filesystems")


def _check_partitions_fit(f: _Fields, plan: Plan) -> None:
    """Partition sizes against the known size of a loop device."""
    for i, table in enumerate(plan.tables):
        loop = next((l for l in plan.loops if l.name == table.device), None)
        if loop is not None:
            needed = MiB + sum(p.size or MiB for p in table.parts) + MiB  # 1 MiB lead + GPT backup
            if needed > loop.size:
                f.fail(f"partitions[{i}].parts", f"need {human_size(needed)} but {loop.name} is "
                       f"{human_size(loop.size)}")


def _needs(kind: str, spec) -> list:
    if kind == "raid":
        return list(spec.members)
    if kind == "cache":
        return [spec.origin, spec.cache] + ([spec.metadata] if spec.metadata else [])
    if kind == "iscsi":
        return [spec.export]
    return [spec.device]  # table, delay


def _label(kind: str, spec) -> str:
    return f"partitions of {spec.device}" if kind == "table" else spec.name


def _order(plan: Plan, f: _Fields | None = None) -> list:
    """Partition tables, arrays and dm devices in an order where every input exists first."""
    defined = {l.name for l in plan.loops} | {d.name for d in plan.devices}
    pending = ([("raid", r) for r in plan.raids] + [("delay", d) for d in plan.delays]
               + [("cache", c) for c in plan.caches] + [("iscsi", i) for i in plan.iscsi]
               + [("table", t) for t in plan.tables])
    ordered = []
    while pending:
        for item in pending:
            kind, spec = item
            if all(n in defined for n in _needs(kind, spec)):
                ordered.append(item)
                pending.remove(item)
                defined |= {p.name for p in spec.parts} if kind == "table" else {spec.name}
                break
        else:
            what = ", ".join(_label(k, s) for k, s in pending)
            if f is not None:
                f.fail("(top level)", f"circular device references: {what}")
            raise IolabError(f"circular device references: {what}")
    return ordered
