"""The fleet's inventory: which fio servers, how each is reached, where its jobs may write.

A YAML mapping (errors name the file and the field); see :mod:`iolab.fleet.runs`
for its shape and for the security rule :func:`check_security` enforces before
anything connects.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Iterable, Sequence

from iolab.engine.jobfile import check as jobcheck
from iolab.fleet import fioserver, privatedir
from iolab.fleet.inventory_schema import ALL_HOSTS, FLEET_DIR, InventoryFile  # noqa: F401 - the fleet's names
from iolab.core import schema, yamlfile
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

_SSH_DEST = re.compile(r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9._:\[\]%-]+$")
_SSH_OPTION = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


@dataclasses.dataclass
class Host:
    """One fio server of the inventory and what to run on it."""

    name: str
    target: str
    label: str
    connection: str                  # "tcp" | "unix" | "ssh"
    address: str | None = None
    port: int = fioserver.DEFAULT_PORT
    socket: str | None = None
    ssh: str | None = None
    ssh_port: int | None = None
    identity: str | None = None
    ssh_options: dict = dataclasses.field(default_factory=dict)
    remote_socket: str = privatedir.ROOT_SERVER_SOCKET   # the fio server's socket on the far side (ssh)
    target_kind: str | None = None   # dir | file | device (None: from the path)
    confirm: str | None = None
    context: str = ""                # "inventory.yaml: hosts[2] (db1)" for messages

    @property
    def local(self) -> bool:
        """The fio server runs on this machine (loopback or Unix socket): targets can be checked here."""
        return self.connection == "unix" or (self.connection == "tcp" and fioserver.is_loopback(self.address))

    @property
    def over_network(self) -> bool:
        """fio's unauthenticated protocol would cross a network (only with insecure_network)."""
        if self.connection == "tcp":
            return not fioserver.is_loopback(self.address)
        return False  # a Unix socket, here or forwarded by SSH

    def direct_endpoint(self) -> fioserver.Endpoint:
        if self.connection == "unix":
            return fioserver.Endpoint("unix", path=self.socket)
        if self.connection == "tcp":
            address = "127.0.0.1" if self.address.lower() == "localhost" else self.address
            return fioserver.Endpoint("tcp", address=address, port=self.port)
        raise IolabError("reached through an SSH tunnel", context=self.context)

    def describe(self) -> dict:
        data = {"name": self.name, "label": self.label, "connection": self.connection, "target": self.target}
        if self.connection == "tcp":
            data.update(address=self.address, port=self.port)
        elif self.connection == "unix":
            data["socket"] = self.socket
        else:
            data.update(ssh=self.ssh, ssh_port=self.ssh_port, remote_socket=self.remote_socket)
        data["over_network"] = self.over_network
        return data


@dataclasses.dataclass
class Inventory:
    source: str
    hosts: list
    allow_job_options: frozenset = frozenset()
    description: str = ""

    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def select(self, names: Sequence[str] | None) -> list[Host]:
        if names is None:
            return list(self.hosts)
        by_name = {h.name: h for h in self.hosts}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise IolabError(f"no host {missing[0]!r} in the inventory (hosts: {', '.join(by_name)})",
                             context=self.source)
        return [by_name[n] for n in names]


def _port(value, ctx: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise IolabError(f"must be a port number 1-65535, got {value!r}", context=ctx)
    return value


def _allowed_options(allow, source: str) -> frozenset:
    try:
        return jobcheck.allowance(allow or [])
    except IolabError as exc:
        raise IolabError(exc.message, context=f"{source}: allow_job_options") from exc


def _tcp(host: Host, entry: dict, ctx: str, raw: dict) -> tuple:
    host.address = entry["address"]
    if fioserver.is_unspecified(host.address):
        raise IolabError(
            f"{host.address} means 'every interface' and is not an address to connect to; "
            "a fio server on this machine is reached at 127.0.0.1", context=f"{ctx}.address")
    return ("tcp", host.address.lower(), host.port)


def _unix(host: Host, entry: dict, ctx: str, raw: dict) -> tuple:
    path = entry["socket"]
    if not os.path.isabs(path):
        raise IolabError("must be an absolute path", context=f"{ctx}.socket")
    host.socket = path
    return ("unix", path)


def ssh_options(options, ctx: str) -> dict:
    """``ssh -o`` options of a mapping, checked (one-line values, option-like names), as text."""
    options = options or {}
    if not isinstance(options, dict):
        raise IolabError("must be a mapping of ssh -o options", context=ctx)
    for key, value in options.items():
        if not isinstance(key, str) or not _SSH_OPTION.match(key):
            raise IolabError(f"{key!r} is not an ssh option name", context=ctx)
        if isinstance(value, (dict, list)) or "\n" in str(value):
            raise IolabError(f"must be one value, got {value!r}", context=f"{ctx}.{key}")
    return {k: ("yes" if v is True else "no" if v is False else str(v)) for k, v in options.items()}


def _ssh(host: Host, entry: dict, ctx: str, raw: dict) -> tuple:
    dest = entry["ssh"]
    if dest.startswith("-") or not _SSH_DEST.match(dest):
        raise IolabError(f"{dest!r} is not an SSH destination like user@host", context=f"{ctx}.ssh")
    host.ssh = dest
    if "ssh_port" in entry:
        host.ssh_port = _port(entry["ssh_port"], f"{ctx}.ssh_port")
    if "identity" in entry:
        host.identity = os.path.expanduser(entry["identity"])
    for old in ("remote_address", "port"):
        if old in (entry if old == "remote_address" else raw):
            raise IolabError(
                "a fio server reached over SSH is reached at its Unix socket now, not at a TCP port on its "
                f"loopback (which every user there could use): drop '{old}' and start the server with "
                f"'iolab server' (its socket: {privatedir.ROOT_SERVER_SOCKET}), or name another socket with "
                "'remote_socket: PATH'", context=f"{ctx}.{old}")
    if "remote_socket" in entry:
        host.remote_socket = entry["remote_socket"]
        if not os.path.isabs(host.remote_socket):
            raise IolabError("must be an absolute path on that server", context=f"{ctx}.remote_socket")
    host.ssh_options = ssh_options(entry.get("ssh_options"), f"{ctx}.ssh_options")
    return ("ssh", dest, host.ssh_port, host.remote_socket)


_CONNECT = {"address": ("tcp", _tcp), "socket": ("unix", _unix), "ssh": ("ssh", _ssh)}


def _parse_host(name: str, raw: dict, defaults: dict, ctx: str) -> tuple[Host, tuple]:
    """One host entry (``defaults`` under it) and the key of the fio server it names."""
    entry = {**defaults, **raw}
    ways = [k for k in ("address", "socket", "ssh") if k in raw]
    if len(ways) != 1:
        raise IolabError("give exactly one of 'address' (with 'port'), 'socket' or 'ssh'"
                         + (f" (got {', '.join(ways)})" if ways else ""), context=ctx)
    if "target" not in entry:
        raise IolabError("missing required field 'target' (the path fio writes on that server)", context=ctx)
    connection, parse_connection = _CONNECT[ways[0]]
    host = Host(name=name, target=entry["target"], label=entry.get("label", name), connection=connection,
                context=ctx)
    if "port" in entry and connection != "ssh":  # defaults' port is for TCP hosts
        host.port = _port(entry["port"], f"{ctx}.port")
    key = parse_connection(host, entry, ctx, raw)
    for field in ("ssh_port", "identity", "ssh_options", "remote_socket", "remote_address"):
        if field in raw and host.connection != "ssh":
            raise IolabError("only for hosts reached with 'ssh'", context=f"{ctx}.{field}")
    host.target_kind = entry.get("target_kind")
    host.confirm = raw.get("confirm")
    if not host.local and not os.path.isabs(host.target):
        raise IolabError("must be an absolute path on that server", context=f"{ctx}.target")
    return host, key


def parse_inventory(data, source: str = "inventory") -> Inventory:
    """Validate an inventory mapping against :class:`~iolab.fleet.inventory_schema.InventoryFile`;
    every error names ``source`` and the field."""
    if not isinstance(data, dict):
        raise IolabError("an inventory must be a YAML mapping with a 'hosts' list", context=source)
    spec = schema.validate(InventoryFile, data, source, names=False)
    defaults = spec.defaults.model_dump(exclude_unset=True) if spec.defaults else {}
    allowed = _allowed_options(spec.allow_job_options, source)
    hosts, endpoints = [], {}
    for index, given in enumerate(spec.hosts):
        if any(h.name == given.name for h in hosts):
            raise IolabError(f"duplicate host name {given.name!r}", context=f"{source}: hosts[{index}].name")
        ctx = f"{source}: hosts[{index}] ({given.name})"
        host, key = _parse_host(given.name, given.model_dump(exclude_unset=True), defaults, ctx)
        if key in endpoints:
            raise IolabError(f"the same fio server as {endpoints[key]!r}", context=ctx)
        endpoints[key] = given.name
        hosts.append(host)
    return Inventory(source=source, hosts=hosts, allow_job_options=allowed, description=str(spec.description or ""))


def load_inventory(path: str | os.PathLike) -> Inventory:
    """Read and validate an inventory YAML file."""
    return parse_inventory(yamlfile.load(path, what="inventory file"), str(path))


def check_security(hosts: Iterable[Host], *, insecure_network: bool = False) -> list[str]:
    """Refuse hosts whose fio traffic would cross a network without a tunnel; return those allowed anyway.

    Nothing connects here: the decision is made from the inventory alone.
    """
    exposed = []
    for host in hosts:
        if not host.over_network:
            continue
        if insecure_network:
            log.warning("%s: fio's unauthenticated protocol crosses the network (--insecure-network)",
                        host.context)
            exposed.append(host.name)
            continue
        raise IolabError(
            f"{host.address} is not a loopback address: fio's server has no authentication and runs "
            f"any job it is sent (writing any device, running programs), so iolab does not talk to it "
            f"over a network", context=f"{host.context}.address",
            hint=f"reach it through SSH with 'ssh: user@{host.address}' (iolab forwards the server's Unix "
                 "socket and closes the forwarding afterwards), or pass --insecure-network on a network you trust")
    return exposed


