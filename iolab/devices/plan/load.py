"""Reading and validating a setup plan: :func:`load_plan` (see :mod:`iolab.devices.plan`); each section's
fields are declared in :mod:`iolab.devices.plan.schema`, what spans entries is checked here."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from iolab.core import schema, yamlfile
from iolab.core.errors import IolabError
from iolab.core.units import human_size
from iolab.devices.plan import dm, iscsi, limits
from iolab.devices.plan.model import (CacheSpec, DelaySpec, DeviceSpec, FsSpec, LoopSpec, PartSpec, Plan, RaidSpec,
                                     TableSpec)
from iolab.devices.plan.schema import DEFAULT_CHUNK, MiB, PlanFile


def _fail(source: Path):
    """``fail(field, message, hint)``: an :class:`IolabError` naming the plan file and the field."""
    def fail(field: str, message: str, hint: str | None = None):
        raise IolabError(message, context=f"{source}: {field}", hint=hint)
    return fail


def load_plan(path: str | os.PathLike) -> Plan:
    """Read and validate a plan against :class:`~iolab.devices.plan.schema.PlanFile`; :class:`IolabError`
    names the file and the field."""
    source = Path(path)
    raw_text = yamlfile.read_text(source, what="plan file")
    data = yamlfile.parse(raw_text, str(source))
    fail = _fail(source)
    if data is None:
        fail("(top level)", "the plan is empty")
    if not isinstance(data, dict):
        fail("(top level)", f"must be a mapping, got {type(data).__name__}")
    spec = schema.validate(PlanFile, data, str(source), names=False, key_in_context=True)
    plan = Plan(path=source.resolve(), name=spec.name or source.stem, description=spec.description or "",
                sha256=hashlib.sha256(raw_text.encode()).hexdigest())
    names: dict[str, str] = {}   # name -> field where defined

    def define(name: str, field: str) -> None:
        if name in names:
            fail(field, f"name {name!r} already used at {names[name]}")
        names[name] = field

    _specs(spec, plan, define, fail)
    _check_references(fail, plan, names)
    limits.check_sizes(plan, fail)  # what mkfs rejects, what storage cannot hold
    _check_partitions_fit(fail, plan)
    build_order(plan, fail)  # raises on a dependency cycle
    return plan


def _specs(spec: PlanFile, plan: Plan, define, fail) -> None:
    """The plan's parts from its checked sections, every name defined once (in file order)."""
    files = {}
    for i, loop in enumerate(spec.loop_devices or []):
        define(loop.name, f"loop_devices[{i}].name")
        file = os.path.expanduser(loop.file)
        file = os.path.normpath(file if os.path.isabs(file) else plan.path.parent / loop.file)
        if file in files:
            fail(f"loop_devices[{i}].file", f"same file as {files[file]}")
        files[file] = f"loop_devices[{i}]"
        plan.loops.append(LoopSpec(name=loop.name, file=file, size=loop.size, sector_size=loop.sector_size,
                                   direct_io=loop.direct_io is not False, sparse=bool(loop.sparse)))
    for i, dev in enumerate(spec.devices or []):
        define(dev.name, f"devices[{i}].name")
        plan.devices.append(DeviceSpec(name=dev.name, path=dev.path))
    for i, raid in enumerate(spec.raid or []):
        define(raid.name, f"raid[{i}].name")
        chunk = 0 if raid.level == 1 else raid.chunk or DEFAULT_CHUNK
        plan.raids.append(RaidSpec(name=raid.name, level=raid.level, chunk=chunk, members=raid.members,
                                   metadata=raid.metadata or "1.2"))
    for i, delay in enumerate(spec.delay or []):
        define(delay.name, f"delay[{i}].name")
        write_ms = delay.read_ms if delay.write_ms is None else delay.write_ms
        plan.delays.append(DelaySpec(name=delay.name, device=delay.device, read_ms=delay.read_ms, write_ms=write_ms))
    for i, cache in enumerate(spec.cache or []):
        define(cache.name, f"cache[{i}].name")
        plan.caches.append(CacheSpec(name=cache.name, origin=cache.origin, cache=cache.cache, metadata=cache.metadata,
                                     metadata_size=cache.metadata_size, mode=cache.mode or "writethrough",
                                     policy=cache.policy or "smq", block_size=cache.block_size))
    iscsi.add(spec.iscsi or [], plan, define, fail)
    for i, table in enumerate(spec.partitions or []):
        parts = []
        for j, part in enumerate(table.parts):
            define(part.name, f"partitions[{i}].parts[{j}].name")
            if part.size is None and j != len(table.parts) - 1:
                fail(f"partitions[{i}].parts[{j}].size", "missing (only the last partition may take the rest)")
            parts.append(PartSpec(name=part.name, size=part.size, label=part.label, typecode=part.typecode))
        plan.tables.append(TableSpec(device=table.device, parts=parts))
    mounts = {}
    for i, fs in enumerate(spec.filesystems or []):
        if fs.mount is not None:
            if fs.mount in mounts:
                fail(f"filesystems[{i}].mount", f"same mount point as {mounts[fs.mount]}")
            mounts[fs.mount] = f"filesystems[{i}]"
        plan.filesystems.append(FsSpec(device=fs.device, type=fs.type, options=fs.options or [], label=fs.label,
                                       mount=fs.mount, mount_options=fs.mount_options))


def _check_references(fail, plan: Plan, names: dict) -> None:
    """Every name used exists, and each device is used once."""
    used: dict[str, str] = {}

    def use(name: str, field: str) -> None:
        if name not in names:
            fail(field, f"unknown device name {name!r}",
                   f"known: {', '.join(sorted(names)) or 'none'}")
        if name in used:
            fail(field, f"device {name!r} is already used at {used[name]}")
        used[name] = field

    for i, raid in enumerate(plan.raids):
        for j, member in enumerate(raid.members):
            use(member, f"raid[{i}].members[{j}]")
    for name, field in dm.references(plan):
        use(name, field)
    for name, field in iscsi.references(plan):
        use(name, field)
    dm_names = {d.name for d in plan.delays} | {c.name for c in plan.caches}
    for i, table in enumerate(plan.tables):
        use(table.device, f"partitions[{i}].device")
        if table.device in dm_names:
            fail(f"partitions[{i}].device", f"{table.device} is a device-mapper device: the kernel does not "
                   "partition it", "put the file system on it directly")
        if table.device in {p.name for p in table.parts}:
            fail(f"partitions[{i}].device", "a device cannot hold its own partitions")
    for i, fs in enumerate(plan.filesystems):
        use(fs.device, f"filesystems[{i}].device")
    if not (plan.loops or plan.devices or plan.raids or plan.delays or plan.caches or plan.iscsi or plan.tables
            or plan.filesystems):
        fail("(top level)", "the plan does nothing",
               "add loop_devices, devices, raid, delay, cache, iscsi, partitions or filesystems")


def _check_partitions_fit(fail, plan: Plan) -> None:
    """Partition sizes against the known size of a loop device."""
    for i, table in enumerate(plan.tables):
        loop = next((l for l in plan.loops if l.name == table.device), None)
        if loop is not None:
            needed = MiB + sum(p.size or MiB for p in table.parts) + MiB  # 1 MiB lead + GPT backup
            if needed > loop.size:
                fail(f"partitions[{i}].parts", f"need {human_size(needed)} but {loop.name} is "
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


def build_order(plan: Plan, fail=None) -> list:
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
            if fail is not None:
                fail("(top level)", f"circular device references: {what}")
            raise IolabError(f"circular device references: {what}")
    return ordered
