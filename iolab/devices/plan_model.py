"""What a setup plan is: its parts as dataclasses, its keys and limits, and the validation helper
that names the file and the field in every error (see :mod:`iolab.devices.plan`)."""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.core.units import parse_size

MiB = 1024 ** 2
TOP_KEYS = {"name", "description", "loop_devices", "devices", "raid", "delay", "cache", "iscsi",
            "partitions", "filesystems"}
LOOP_KEYS = {"name", "file", "size", "sector_size", "direct_io", "sparse"}
DEVICE_KEYS = {"name", "path"}
RAID_KEYS = {"name", "level", "chunk", "members", "metadata"}
RAID_LEVELS = ("0", "1")
TABLE_KEYS = {"device", "parts"}
PART_KEYS = {"name", "size", "label", "typecode"}
FS_KEYS = {"device", "type", "options", "label", "mount", "mount_options"}
FS_TYPES = ("ext4", "xfs")
DELAY_KEYS = {"name", "device", "read_ms", "write_ms"}
CACHE_KEYS = {"name", "origin", "cache", "metadata", "metadata_size", "mode", "policy", "block_size"}
MAX_DELAY_MS = 10_000
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
    iscsi: list = dataclasses.field(default_factory=list)   # plan_iscsi.IscsiSpec
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
