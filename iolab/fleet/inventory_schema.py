"""The schema of a fleet inventory (``iolab run --hosts FILE``, see :mod:`iolab.fleet.inventory`).

:class:`InventoryFile` is what the loader checks an inventory against and what
``schemas/inventory.schema.json`` is written from. How a host is reached (exactly
one of ``address``, ``socket``, ``ssh``), which fields go with which, ports in
range, absolute paths and unique servers are checked by the loader on each host
merged with ``defaults``.
"""
from typing import Annotated, Any, Dict, List, Literal, Optional

from pydantic import AfterValidator, Field, WithJsonSchema

from iolab.core.schema import Schema, Text
from iolab.engine.store import safe_name

#: Directory under the data directory holding the fleet manifests and aggregates.
FLEET_DIR = "_fleet"
#: ``host`` of the aggregate rows.
ALL_HOSTS = "all"
RESERVED_NAMES = {ALL_HOSTS, FLEET_DIR}
TARGET_KINDS = ("dir", "file", "device")


def _line(value: str) -> str:
    if not value.strip():
        raise ValueError(f"must be non-empty text, got {value!r}")
    if "\n" in value or "\0" in value:
        raise ValueError("must be one line")
    return value.strip()


def _host_name(name: str) -> str:
    if safe_name(name) != name:
        raise ValueError(f"{name!r} is not usable as a directory name (letters, digits, '.', '_', '-')")
    if name in RESERVED_NAMES:
        raise ValueError(f"{name!r} is reserved for the fleet's aggregate")
    return name


#: One line of text.
Line = Annotated[Text, AfterValidator(_line), WithJsonSchema({"type": ["string", "number"], "minLength": 1})]
Port = Annotated[int, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 65535})]
HostName = Annotated[Line, AfterValidator(_host_name), WithJsonSchema(
    {"type": ["string", "number"], "pattern": r"^[A-Za-z0-9_]([A-Za-z0-9._-]*[A-Za-z0-9_])?$", "not": {"enum": sorted(RESERVED_NAMES)}})]
Path = Annotated[Line, WithJsonSchema({"type": "string", "minLength": 1})]


class HostDefaults(Schema):
    """``defaults:``: fields every host gets unless it sets them."""
    port: Port = Field(None, description="the fio server's TCP port (hosts with address)")
    ssh_port: Port = None
    identity: Path = Field(None, description="ssh -i")
    ssh_options: Optional[Dict[str, Any]] = Field(None, description="ssh -o NAME=VALUE")
    remote_socket: Path = Field(None, description="the fio server's Unix socket on the far side (ssh)")
    remote_address: Any = Field(None, description="refused: a server over SSH is reached at its socket")
    target: Path = Field(None, description="the path fio writes on that server")
    target_kind: Literal["dir", "file", "device"] = None


class HostSpec(HostDefaults):
    """One fio server, reached at ``address`` (a loopback), ``socket`` or ``ssh``."""
    name: HostName = Field(description="unique; the host's directory under the data directory")
    address: Line = Field(None, description="a loopback address (fio's protocol has no authentication)")
    socket: Path = Field(None, description="the fio server's Unix socket on this machine")
    ssh: Line = Field(None, description="user@host: the server's socket is forwarded over SSH")
    label: Line = Field(None, description="name in reports (default: the host's name)")
    confirm: Line = Field(None, description="the target again, to write a device")


class InventoryFile(Schema):
    """The fio servers of a fleet run (``iolab run --hosts``)."""
    hosts: List[HostSpec] = Field(min_length=1)
    defaults: Optional[HostDefaults] = None
    allow_job_options: Optional[List[Any]] = Field(None, description="job-file options allowed beyond the safe ones")
    description: Any = ""
