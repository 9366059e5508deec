"""The schema of a setup plan (``iolab setup PLAN``, see :mod:`iolab.devices.plan`): each section's fields.

:class:`PlanFile` is what :func:`iolab.devices.plan.load.load_plan` checks a plan
against and what ``schemas/plan.schema.json`` is written from. What spans entries
(names defined once and used once, partitions that fit, sizes mkfs accepts, an
order without cycles) is checked by the loader after it.
"""
import os
import re
import shlex
from typing import Annotated, List, Literal, Optional

from pydantic import BeforeValidator, Field, ValidationInfo, WithJsonSchema, field_validator, model_validator

from iolab.core.errors import IolabError
from iolab.core.schema import Schema, Size, Text, check
from iolab.devices import dmtable, iscsi, lio

MiB = 1024 ** 2
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
SECTOR_SIZES = (512, 1024, 2048, 4096)
FS_TYPES = ("ext4", "xfs")
MAX_DELAY_MS = 10_000
DEFAULT_CHUNK = 512 * 1024
DEFAULT_CACHE_BLOCK = 64 * 1024
TYPECODE = r"^[0-9A-Fa-f]{4}$"


def _name(value):
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ValueError(f"not a valid name: {value!r} (a letter, then letters, digits, '.', '_' or '-', "
                         "at most 32 characters)")
    return value


def _words(value):
    """mkfs options: a string split as a shell would, or a list of words."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split into words: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise ValueError("must be a string or a list of strings")


def _milliseconds(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_MS:
        raise ValueError(f"must be a whole number of milliseconds, 0 to {MAX_DELAY_MS}, got {value!r}")
    return value


#: A plan device's name: what other entries refer to it by.
Name = Annotated[str, BeforeValidator(_name), WithJsonSchema({"type": "string", "pattern": NAME_RE.pattern})]
Words = Annotated[List[str], BeforeValidator(_words), WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": ["string", "number"]}}]})]
MountOptions = Annotated[Text, BeforeValidator(lambda v: ",".join(map(str, v)) if isinstance(v, list) else v),
                         WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})]
Milliseconds = Annotated[int, BeforeValidator(_milliseconds), WithJsonSchema(
    {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_MS})]


class Entry(Schema):
    """An entry of a plan section: a required field left empty (``file: ""``, ``name:``) is missing."""

    @model_validator(mode="before")
    @classmethod
    def _empty_is_missing(cls, data):
        if isinstance(data, dict):
            required = {name for name, field in cls.model_fields.items() if field.is_required()}
            return {k: v for k, v in data.items() if not (k in required and v in (None, ""))}
        return data


class LoopEntry(Entry):
    """``loop_devices``: a file (relative to the plan's directory) attached as a loop device."""
    name: Name
    file: Text
    size: Annotated[Size, check(lambda size: size % 4096 == 0, "must be a multiple of 4 KiB, got {value} bytes")]
    sector_size: Optional[Literal[512, 1024, 2048, 4096]] = None
    direct_io: Optional[bool] = Field(None, description="default true")
    sparse: Optional[bool] = Field(None, description="default false")



class DeviceEntry(Entry):
    """``devices``: an existing block device, by path."""
    name: Name
    path: Annotated[Text, check(lambda path: path.startswith("/dev/"), "must be a device path under /dev/, got {value!r}"),
                    WithJsonSchema({"type": "string", "pattern": "^/dev/"})]



def _raid_level(value):
    level = str(value).lower().removeprefix("raid")
    if level not in ("0", "1"):
        raise ValueError(f"RAID level 0 or 1 is supported, got {value!r}")
    return int(level)


class RaidEntry(Entry):
    """``raid``: an md array (RAID0 or RAID1) over other plan devices."""
    name: Name
    level: Annotated[int, BeforeValidator(_raid_level), WithJsonSchema({"enum": [0, 1, "raid0", "raid1"]})]
    chunk: Size = Field(None, description="RAID0's chunk: a power of two, at least 4K (default 512K)")
    members: List[Name]
    metadata: Optional[Annotated[Text, check(lambda v: v in ("0.90", "1.0", "1.1", "1.2"),
                                             "must be 0.90, 1.0, 1.1 or 1.2, got {value!r}")]] = Field(
        None, description="md metadata version (default 1.2)")

    @field_validator("chunk")
    @classmethod
    def _chunk(cls, chunk, info: ValidationInfo):
        if info.data.get("level") == 1:
            raise ValueError("a RAID1 (mirror) has no chunk size: remove it")
        if chunk < 4096 or chunk & (chunk - 1):
            raise ValueError(f"must be a power of two of at least 4K, got {chunk} bytes")
        return chunk

    @field_validator("members")
    @classmethod
    def _members(cls, members, info: ValidationInfo):
        if len(members) < 2:
            raise ValueError(f"a RAID{info.data.get('level', '')} needs at least two members")
        if len(set(members)) != len(members):
            raise ValueError("a member is listed twice")
        return members



class DelayEntry(Entry):
    """``delay``: dm-delay over a plan device; every read (write) waits in the kernel."""
    name: Name
    device: Name
    read_ms: Milliseconds
    write_ms: Milliseconds = Field(None, description="default: read_ms")


class CacheEntry(Entry):
    """``cache``: dm-cache of ``origin`` on the fast ``cache``; metadata on its own device or carved."""
    name: Name
    origin: Name
    cache: Name
    metadata: Optional[Name] = None
    metadata_size: Optional[Size] = Field(None, description="carved metadata: whole MiB, at least 4M")
    mode: Optional[Literal["writethrough", "writeback", "passthrough"]] = Field(None, description="default writethrough")
    policy: Optional[Literal["smq"]] = Field(None, description="smq, the kernel's default policy (mq is an alias of it)")
    block_size: Annotated[Size, check(
        lambda b: b % dmtable.CACHE_BLOCK_MIN == 0 and dmtable.CACHE_BLOCK_MIN <= b <= dmtable.CACHE_BLOCK_MAX,
        "must be a multiple of 32K between 32K and 1G, got {value} bytes")] = Field(
        DEFAULT_CACHE_BLOCK, description="a multiple of 32K, 32K..1G (default 64K)")

    @field_validator("metadata_size")
    @classmethod
    def _metadata_size(cls, size, info: ValidationInfo):
        if size is None:
            return size
        if info.data.get("metadata") is not None:
            raise ValueError("only for metadata carved from the cache device: remove it or the metadata device")
        if size % MiB or size < 4 * MiB:
            raise ValueError(f"must be whole MiB, at least 4M, got {size} bytes")
        return size

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, policy):
        if policy is not None and policy not in dmtable.CACHE_POLICIES:
            raise ValueError(f"must be {' or '.join(dmtable.CACHE_POLICIES)}, got {policy!r} (smq is the kernel's "
                             "default policy (mq is an alias of it since Linux 4.6))")
        return policy



class IscsiEntry(Entry):
    """``iscsi``: a plan device exported through LIO on 127.0.0.1 and logged in to."""
    name: Name
    export: Name
    portal: Optional[Text] = Field(None, description=f"default {iscsi.DEFAULT_PORTAL} (iolab exports only on 127.0.0.1)")

    @field_validator("portal")
    @classmethod
    def _portal(cls, portal):
        if portal is None:
            return portal
        try:
            lio.check_portal(portal)
        except IolabError as exc:
            raise ValueError(exc.message) from None
        return portal


class PartEntry(Entry):
    name: Name
    size: Optional[Annotated[Size, check(lambda size: size % MiB == 0, "must be a multiple of 1 MiB (so every "
                                         "partition starts 1 MiB-aligned), got {value} bytes")]] = Field(
        None, description="only the last partition may leave it out")
    label: Optional[Annotated[Text, check(lambda label: len(label) <= 36 and ":" not in label,
                                          "at most 36 characters, no ':'")]] = None
    typecode: Optional[Annotated[Text, check(lambda code: re.fullmatch(TYPECODE, code),
                                             "must be a 4-digit sgdisk type code such as 8300, got {value!r}"),
                                 WithJsonSchema({"type": ["string", "integer"], "pattern": TYPECODE})]] = None



class TableEntry(Entry):
    """``partitions``: a GPT on a plan device, 1 MiB-aligned partitions."""
    device: Name
    parts: List[PartEntry] = Field(min_length=1)


class FsEntry(Entry):
    """``filesystems``: mkfs on a plan device, and where to mount it."""
    device: Name
    type: Literal["ext4", "xfs"]
    options: Optional[Words] = Field(None, description="mkfs options")
    label: Optional[Text] = Field(None, description="at most 16 characters (xfs: 12)")
    mount: Optional[Text] = Field(None, description="an absolute path, not /")
    mount_options: Optional[MountOptions] = Field(None, description="mount -o: a string or a list")

    @field_validator("label")
    @classmethod
    def _label(cls, label, info: ValidationInfo):
        fstype = info.data.get("type")
        if label is not None and len(label) > (12 if fstype == "xfs" else 16):
            raise ValueError(f"too long for {fstype} (at most {12 if fstype == 'xfs' else 16} characters)")
        return label

    @field_validator("mount")
    @classmethod
    def _mount(cls, mount):
        if mount is None:
            return mount
        if not os.path.isabs(mount):
            raise ValueError(f"must be an absolute path, got {mount!r}")
        if os.path.normpath(mount) == "/":
            raise ValueError("iolab does not mount over /")
        return os.path.normpath(mount)

    @field_validator("mount_options")
    @classmethod
    def _mount_options(cls, options, info: ValidationInfo):
        if options is None:
            return options
        if info.data.get("mount") is None:
            raise ValueError("given without a mount point (mount)")
        return options


class PlanFile(Schema):
    """A setup plan: the block devices, arrays, dm devices and file systems a benchmark needs."""
    name: Optional[Text] = Field(None, description="default: the file's name")
    description: Optional[Text] = None
    loop_devices: Optional[List[LoopEntry]] = None
    devices: Optional[List[DeviceEntry]] = None
    raid: Optional[List[RaidEntry]] = None
    delay: Optional[List[DelayEntry]] = None
    cache: Optional[List[CacheEntry]] = None
    iscsi: Optional[List[IscsiEntry]] = None
    partitions: Optional[List[TableEntry]] = None
    filesystems: Optional[List[FsEntry]] = None
