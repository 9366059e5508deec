"""What a setup plan is: its parts as dataclasses (see :mod:`iolab.devices.plan`; the fields a plan
file may hold are :mod:`iolab.devices.plan.schema`)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

MiB = 1024 ** 2
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
class DelaySpec:
    """dm-delay over a plan device: every read (write) waits ``read_ms`` (``write_ms``) in the kernel."""
    name: str
    device: str
    read_ms: int
    write_ms: int

    @property
    def path(self) -> str:
        return f"/dev/mapper/{self.name}"


@dataclasses.dataclass
class CacheSpec:
    """dm-cache: ``origin`` (slow) cached on ``cache`` (fast); metadata on its own device or carved from
    the start of ``cache`` (then ``<name>-cmeta`` and ``<name>-cdata`` are dm-linear pieces of it)."""
    name: str
    origin: str
    cache: str
    metadata: str | None
    metadata_size: int | None   # carved metadata; None: computed once the cache's size is known
    mode: str
    policy: str
    block_size: int

    @property
    def path(self) -> str:
        return f"/dev/mapper/{self.name}"


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
    delays: list = dataclasses.field(default_factory=list)
    caches: list = dataclasses.field(default_factory=list)
    iscsi: list = dataclasses.field(default_factory=list)   # plan.iscsi.IscsiSpec
    tables: list = dataclasses.field(default_factory=list)
    filesystems: list = dataclasses.field(default_factory=list)
    sha256: str = ""

    @property
    def state_path(self) -> Path:
        return state_path(self.path)

    def created_names(self) -> set:
        """Names of devices this plan creates (not existing devices)."""
        names = {l.name for l in self.loops} | {r.name for r in self.raids}
        names |= {d.name for d in self.delays} | {c.name for c in self.caches}
        names |= {i.name for i in self.iscsi}
        for table in self.tables:
            names |= {p.name for p in table.parts}
        return names


def state_path(plan_path: str | os.PathLike) -> Path:
    """Where the state of ``plan_path`` lives: ``<plan dir>/.<plan stem>.state.json``."""
    path = Path(plan_path).resolve()
    return path.with_name(f".{path.stem}.state.json")
