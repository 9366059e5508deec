"""Many servers: an inventory of fio servers and coordinated runs on fio's client/server engine.

``iolab run RECIPE --hosts inventory.yaml`` renders the recipe's job files for
every host (each with its own target), checks them here (:mod:`iolab.engine.jobcheck`,
then ``fio --parse-only``), and runs every host **at once** through one
``fio --client=H1 job1 --client=H2 job2 ...`` per test and repetition: fio's
client sends every job first and starts them together. ``--sequential`` runs
the hosts one after another instead.

Inventory (YAML; errors name the file and the field)::

    defaults:                   # optional, for every host: port, target, ssh_port,
      port: 8765                # identity, ssh_options, remote_address, target_kind
    allow_job_options: []       # optional: exec | trigger | include | expansion (jobcheck)
    hosts:
      - name: web1              # directory name under data/ (letters, digits, . _ -)
        address: 127.0.0.1      # a fio server on this machine's loopback ...
        port: 8765
        target: /mnt/scratch    # directory, file or device *on the server*
        label: web1 (NVMe)      # name in reports (default: name)
      - name: web2
        socket: /run/iolab/fio.sock   # ... or on a Unix socket ...
        target: /srv/test
      - name: db1
        ssh: admin@db1.example.net    # ... or elsewhere, through an SSH tunnel
        port: 8765              # the fio server's port on db1 (on db1's loopback)
        ssh_port: 22            # optional: identity: ~/.ssh/id_ed25519,
        target: /mnt/test       #   ssh_options: {UserKnownHostsFile: ...}

**Security.** fio's server has no authentication and runs whatever it is sent
(writing any device, running programs). iolab never talks to a server on a
non-loopback address unless the host is reached through an SSH tunnel (iolab
runs ``ssh -N -L <private unix socket>:127.0.0.1:<port> user@host`` with
``BatchMode=yes`` and ``ExitOnForwardFailure=yes`` and stops it afterwards), or
the caller passes ``insecure_network=True`` (``--insecure-network``), which
every manifest of the run records. ``0.0.0.0``/``::`` are refused always. The
check is made on the inventory before any connection. Job files are checked by
:func:`iolab.engine.jobcheck.check_text` (what the server would run) and
:func:`iolab.fleet.gate.check` (every path a job opens, reads a pattern from or
logs to must be inside that host's ``target``; no ``..``) before anything
connects.

**Where results go.** One run directory per host, ``data/<host>/<fleet_id>-<host>/``,
with the usual layout (``jobs/`` exact job files sent to that host,
``raw/<test>-<rep>.json``: that host's part of fio's output as a standalone
fio JSON document with ``jobs``, ``results.csv``, ``manifest.json`` with a
``fleet`` section), and the fleet's own directory ``data/_fleet/<fleet_id>/``
holding fio's untouched combined output (``raw/``), per-host IOPS logs
(``logs/``), a manifest saying which hosts completed and which failed (and
why), and — for simultaneous runs — ``results.csv`` with the **aggregate**:
host ``all``, one row per test x repetition x direction, ``bw_mbps``, ``iops``,
``io_bytes`` summed over the hosts that delivered results, ``lat_mean_us``
weighted by IOPS, ``lat_max_us`` the maximum, percentiles left empty (a
percentile of a union is not a function of the parts' percentiles; per-host
tails are in the host rows), ``n_hosts``/``hosts_measured``, and
``start_spread_ms``. A sequential run has no aggregate (the hosts did not run
together). Rows of every host carry ``fleet_id``, ``n_hosts`` (hosts running
at the same time) and ``start_ms``.

**Start times.** fio 3.33's JSON has no per-job start time in client/server
mode (``job_start`` came later), so every job writes an IOPS log
(``write_iops_log=<host>``, ``log_unix_epoch=1``, ``log_avg_msec=100``), which
fio's client collects; ``start_ms`` is the first sample's Unix time minus one
interval — by the *server's* clock (keep the clocks in sync with NTP to compare
machines). fio's client sends every job first and then starts them together;
a host that must first lay out a larger test file starts its I/O later, and
``start_ms`` shows that (on loopback the spread is about 0.1 s).

**Failures.** A host that does not answer (checked before each run; fio's own
connect and command time-outs) or disappears mid-run is reported in its
manifest (``failed``, with fio's reason) and in the fleet manifest
(``failed_hosts``); the other hosts' results are kept and the host is left out
of the remaining tests. fio exits 0 when a client cannot connect, so iolab
decides from the output which hosts delivered results.

**Cache isolation.** Jobs run inside the fio servers, out of reach of iolab's
cgroups; a recipe asking for ``cgroup`` or ``hugepages`` runs with O_DIRECT
(``direct``) instead, and the manifest says so. ``none`` is kept.

**Scaling.** :func:`scale` (``--scale-hosts``) runs the recipe with the first
1, 2, ..., N hosts of the inventory (fleet ids ``<id>-n1`` ... ``<id>-nN``);
:func:`scaling_table` gives "aggregate throughput vs number of hosts" and
:func:`tail_latency` the per-host tail latency, as tidy data for
:mod:`iolab.report.fleetplots`.
"""
from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import ThreadPoolExecutor
import datetime as _dt
import json
import logging
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import yaml

from iolab.engine import fio, jobcheck, recipes, sysinfo, targets as targets_mod
from iolab.fleet import fioserver, gate as fleetgate
from iolab.core import progress as progress_
from iolab.core import yamlfile
from iolab.core.yamlfile import check_keys
from iolab.core.errors import IolabError
from iolab.engine.fioparse import documents, parse_output
from iolab.engine.store import Run, load as store_load, order_columns, safe_name, utcnow

log = logging.getLogger(__name__)

#: Directory under the data directory holding the fleet manifests and aggregates.
FLEET_DIR = "_fleet"
#: ``host`` of the aggregate rows.
ALL_HOSTS = "all"
#: IOPS log interval (ms) behind ``start_ms``.
LOG_MS = 100
#: How long an SSH tunnel gets to come up.
TUNNEL_TIMEOUT_S = 20.0

INVENTORY_KEYS = {"hosts", "defaults", "allow_job_options", "description"}
HOST_KEYS = {"name", "address", "port", "socket", "ssh", "ssh_port", "identity", "ssh_options",
             "remote_address", "target", "target_kind", "label", "confirm"}
DEFAULT_KEYS = {"port", "ssh_port", "identity", "ssh_options", "remote_address", "target", "target_kind"}
TARGET_KINDS = ("dir", "file", "device")
RESERVED_NAMES = {ALL_HOSTS, FLEET_DIR}
_SSH_DEST = re.compile(r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9._:\[\]%-]+$")
_SSH_OPTION = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


# =========================================================================== inventory

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
    remote_address: str = fioserver.LOOPBACK
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
        if self.connection == "ssh":
            return not fioserver.is_loopback(self.remote_address)
        return False

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
            data.update(ssh=self.ssh, ssh_port=self.ssh_port, remote_address=self.remote_address, port=self.port)
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


def _text(value, ctx: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise IolabError(f"must be non-empty text, got {value!r}", context=ctx)
    if "\n" in value or "\0" in value:
        raise IolabError("must be one line", context=ctx)
    return value.strip()


def _port(value, ctx: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise IolabError(f"must be a port number 1-65535, got {value!r}", context=ctx)
    return value


def parse_inventory(data, source: str = "inventory") -> Inventory:
    """Validate an inventory mapping; every error names ``source`` and the field."""
    if not isinstance(data, dict):
        raise IolabError("an inventory must be a YAML mapping with a 'hosts' list", context=source)
    check_keys(data, INVENTORY_KEYS, source)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise IolabError("must be a mapping", context=f"{source}: defaults")
    check_keys(defaults, DEFAULT_KEYS, f"{source}: defaults")
    allow = data.get("allow_job_options") or []
    if not isinstance(allow, list):
        raise IolabError("must be a list", context=f"{source}: allow_job_options")
    try:
        allowed = jobcheck._allowance(allow)
    except IolabError as exc:
        raise IolabError(exc.message, context=f"{source}: allow_job_options") from exc
    hosts_in = data.get("hosts")
    hosts, names, endpoints = [], set(), {}
    for index, ctx, raw in yamlfile.named_items(hosts_in, f"{source}: hosts", what="host", allowed=HOST_KEYS):
        name = _text(str(raw["name"]) if isinstance(raw["name"], (int, float)) else raw["name"], f"{ctx}.name")
        if safe_name(name) != name:
            raise IolabError(f"{name!r} is not usable as a directory name (letters, digits, '.', '_', '-')",
                             context=f"{ctx}.name")
        if name in RESERVED_NAMES:
            raise IolabError(f"{name!r} is reserved for the fleet's aggregate", context=f"{ctx}.name")
        if name in names:
            raise IolabError(f"duplicate host name {name!r}", context=f"{ctx}.name")
        names.add(name)
        ctx = f"{source}: hosts[{index}] ({name})"
        entry = {**defaults, **raw}
        ways = [k for k in ("address", "socket", "ssh") if k in raw]
        if len(ways) != 1:
            raise IolabError("give exactly one of 'address' (with 'port'), 'socket' or 'ssh'"
                             + (f" (got {', '.join(ways)})" if ways else ""), context=ctx)
        if "target" not in entry:
            raise IolabError("missing required field 'target' (the path fio writes on that server)", context=ctx)
        host = Host(name=name, target=_text(entry["target"], f"{ctx}.target"),
                    label=_text(str(entry.get("label", name)), f"{ctx}.label"),
                    connection={"address": "tcp", "socket": "unix", "ssh": "ssh"}[ways[0]], context=ctx)
        if "port" in entry:
            host.port = _port(entry["port"], f"{ctx}.port")
        if host.connection == "tcp":
            host.address = _text(str(entry["address"]), f"{ctx}.address")
            if fioserver.is_unspecified(host.address):
                raise IolabError(
                    f"{host.address} means 'every interface' and is not an address to connect to; "
                    "a fio server on this machine is reached at 127.0.0.1", context=f"{ctx}.address")
            key = ("tcp", host.address.lower(), host.port)
        elif host.connection == "unix":
            path = _text(entry["socket"], f"{ctx}.socket")
            if not os.path.isabs(path):
                raise IolabError("must be an absolute path", context=f"{ctx}.socket")
            host.socket = path
            key = ("unix", path)
        else:
            dest = _text(entry["ssh"], f"{ctx}.ssh")
            if dest.startswith("-") or not _SSH_DEST.match(dest):
                raise IolabError(f"{dest!r} is not an SSH destination like user@host", context=f"{ctx}.ssh")
            host.ssh = dest
            if "ssh_port" in entry:
                host.ssh_port = _port(entry["ssh_port"], f"{ctx}.ssh_port")
            if "identity" in entry:
                host.identity = os.path.expanduser(_text(entry["identity"], f"{ctx}.identity"))
            if "remote_address" in entry:
                host.remote_address = _text(str(entry["remote_address"]), f"{ctx}.remote_address")
                if fioserver.is_unspecified(host.remote_address):
                    raise IolabError("use the remote machine's loopback address 127.0.0.1",
                                     context=f"{ctx}.remote_address")
            options = entry.get("ssh_options") or {}
            if not isinstance(options, dict):
                raise IolabError("must be a mapping of ssh -o options", context=f"{ctx}.ssh_options")
            for key_, value in options.items():
                if not isinstance(key_, str) or not _SSH_OPTION.match(key_):
                    raise IolabError(f"{key_!r} is not an ssh option name", context=f"{ctx}.ssh_options")
                if isinstance(value, (dict, list)) or "\n" in str(value):
                    raise IolabError(f"must be one value, got {value!r}", context=f"{ctx}.ssh_options.{key_}")
            host.ssh_options = {k: ("yes" if v is True else "no" if v is False else str(v))
                                for k, v in options.items()}
            key = ("ssh", dest, host.ssh_port, host.remote_address, host.port)
        for field in ("ssh_port", "identity", "ssh_options", "remote_address"):
            if field in raw and host.connection != "ssh":
                raise IolabError("only for hosts reached with 'ssh'", context=f"{ctx}.{field}")
        if "target_kind" in entry:
            if entry["target_kind"] not in TARGET_KINDS:
                raise IolabError(f"must be one of {', '.join(TARGET_KINDS)}, got {entry['target_kind']!r}",
                                 context=f"{ctx}.target_kind")
            host.target_kind = entry["target_kind"]
        if "confirm" in raw:
            host.confirm = _text(raw["confirm"], f"{ctx}.confirm")
        if not host.local and not os.path.isabs(host.target):
            raise IolabError("must be an absolute path on that server", context=f"{ctx}.target")
        if key in endpoints:
            raise IolabError(f"the same fio server as {endpoints[key]!r}", context=ctx)
        endpoints[key] = name
        hosts.append(host)
    description = data.get("description") or ""
    return Inventory(source=source, hosts=hosts, allow_job_options=allowed, description=str(description))


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
        if host.connection == "tcp":
            raise IolabError(
                f"{host.address} is not a loopback address: fio's server has no authentication and runs "
                f"any job it is sent (writing any device, running programs), so iolab does not talk to it "
                f"over a network", context=f"{host.context}.address",
                hint=f"reach it through an SSH tunnel with 'ssh: user@{host.address}' (iolab opens and "
                     "closes the tunnel; the server listens on that machine's 127.0.0.1), or pass "
                     "--insecure-network on a network you trust")
        raise IolabError(
            f"{host.remote_address} is not the remote machine's loopback address: fio's protocol would "
            "leave the SSH tunnel and cross the network unauthenticated", context=f"{host.context}.remote_address",
            hint="serve fio on 127.0.0.1 of that machine (iolab server), or pass --insecure-network")
    return exposed


# =========================================================================== tunnels

class Tunnel:
    """``ssh -N -L <private unix socket>:<remote_address>:<port> user@host`` for one host."""

    def __init__(self, host: Host, workdir: str | os.PathLike):
        self.host = host
        self.path = os.path.join(os.fspath(workdir), f"{host.name}.sock")
        self._proc: subprocess.Popen | None = None
        self._err = None
        self._argv: list[str] | None = None

    @property
    def endpoint(self) -> fioserver.Endpoint:
        return fioserver.Endpoint("unix", path=self.path)

    def argv(self) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise IolabError("ssh is not installed", context=self.host.context,
                             hint="install it with: apt-get install openssh-client")
        remote = self.host.remote_address
        ip = fioserver.parse_ip(remote)
        remote = f"[{ip}]" if ip is not None and ip.version == 6 else remote
        argv = [ssh, "-N", "-T", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                "-o", "StreamLocalBindUnlink=yes", "-o", "StreamLocalBindMask=0177",
                "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.host.ssh_port:
            argv += ["-p", str(self.host.ssh_port)]
        if self.host.identity:
            argv += ["-i", self.host.identity, "-o", "IdentitiesOnly=yes"]
        for key, value in self.host.ssh_options.items():
            argv += ["-o", f"{key}={value}"]
        argv += ["-L", f"{self.path}:{remote}:{self.host.port}", "--", self.host.ssh]
        return argv

    def open(self, timeout: float = TUNNEL_TIMEOUT_S) -> "Tunnel":
        argv = self._argv = self.argv()
        if len(self.path.encode()) >= 108:
            raise IolabError("tunnel socket path too long", context=self.path)
        self._err = tempfile.TemporaryFile(prefix="iolab-ssh-")
        log.info("opening SSH tunnel: %s", " ".join(argv))
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._err, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not fioserver.listening(self._proc.pid, self.endpoint):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                detail = self._stderr() or (f"ssh exited with {self._proc.returncode}" if self._proc.poll() is not None
                                            else f"no tunnel within {timeout:g} s")
                self.close()
                raise IolabError(f"SSH tunnel to {self.host.ssh} failed: {detail}", context=self.host.context)
            time.sleep(0.05)
        log.info("SSH tunnel to %s up (pid %d): %s -> %s:%d", self.host.ssh, self._proc.pid, self.path,
                 self.host.remote_address, self.host.port)
        return self

    def _stderr(self) -> str:
        if self._err is None or self._err.closed:
            return ""
        self._err.seek(0)
        lines = [l.strip() for l in self._err.read().decode(errors="replace").splitlines() if l.strip()]
        lines = [l for l in lines if not l.startswith("Warning: Permanently added")]
        return "; ".join(lines[-3:])

    def describe(self) -> dict:
        return {"ssh": self.host.ssh, "ssh_port": self.host.ssh_port, "local_socket": self.path,
                "remote": f"{self.host.remote_address}:{self.host.port}",
                "argv": self._argv}

    def close(self) -> None:
        if self._proc is not None:
            fioserver.stop_group(self._proc, grace=3.0)
            log.info("SSH tunnel to %s closed", self.host.ssh)
            self._proc = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._err is not None and not self._err.closed:
            self._err.close()

    def __enter__(self) -> "Tunnel":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


# =========================================================================== plan

@dataclasses.dataclass
class HostPlan:
    """A host during a run: its target, run directory, job files, endpoint, state."""

    host: Host
    kind: str                       # dir | file | device
    path: str                       # target as fio sees it on the server
    test_file: str | None = None    # file iolab lays out in a dir target
    run: Run | None = None
    jobs: dict = dataclasses.field(default_factory=dict)   # step id -> job file path
    endpoint: fioserver.Endpoint | None = None
    tunnel: Tunnel | None = None
    status: str = "pending"         # pending | running | completed | failed | interrupted
    reason: str | None = None
    failed_at: str | None = None

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def alive(self) -> bool:
        return self.status in ("pending", "running")

    @property
    def filename(self) -> str:
        return self.test_file or self.path

    def fail(self, reason: str, where: str | None = None) -> None:
        if self.alive:
            self.status, self.reason, self.failed_at = "failed", reason, where
            log.warning("host %s failed%s: %s", self.name, f" at {where}" if where else "", reason)


def _target_kind(host: Host, recipe, writes: bool) -> tuple[str, str]:
    """(kind, path) of a host's target; local servers' targets are checked here like --target."""
    if host.target.startswith(targets_mod.EMULATED_PREFIX):
        raise IolabError("emulated devices need the single-host engine (iolab run --target)",
                         context=f"{host.context}.target")
    if host.local:
        resolved = targets_mod.resolve([host.target], size=recipe.size, writes=writes, confirm=host.confirm)[0]
        kind = {"block": "device"}.get(resolved.kind, resolved.kind)
        if host.target_kind and host.target_kind != kind:
            raise IolabError(f"is a {kind} here, not a {host.target_kind}", context=f"{host.context}.target")
        return kind, resolved.path
    kind = host.target_kind or ("device" if host.target.startswith("/dev/") else "dir")
    if kind == "device" and writes and host.confirm != host.target:
        raise IolabError(
            "writing to a device on another machine: iolab cannot check there whether it is mounted or "
            "holds data", context=f"{host.context}.target",
            hint=f"add 'confirm: {host.target}' to this host if that device may be overwritten")
    return kind, host.target


def _check_job(text: str, source: str, plan: HostPlan, inventory: Inventory) -> None:
    """What a fio server would run (jobcheck) and open (fleetgate: only inside the host's target)."""
    jobcheck.check_text(text, source, allow=inventory.allow_job_options)
    fleetgate.check(text, source, root=plan.path, local=plan.host.local, context=plan.host.context)


def _writes(recipe) -> bool:
    return recipe.jobfile is not None or any(
        "write" in s.rw or s.rw in ("rw", "readwrite", "randrw", "trimwrite") for s in recipe.steps())


def _isolation(recipe) -> dict:
    requested = recipe.isolation
    mode = "none" if requested == "none" else "direct"
    forced = mode == "direct" and requested != "direct" and recipe.buffered and recipe.jobfile is None
    info = {"mode": mode, "requested": requested, "fallback": mode != requested,
            "forced_o_direct": forced, "buffered": recipe.buffered, "verified": None,
            "note": "jobs run inside the fio servers, out of reach of iolab's cgroups and hugepage "
                    "reservations; O_DIRECT keeps the page cache out" if mode == "direct" else
                    "deliberately cached (isolation none)"}
    if mode != requested:
        log.warning("isolation %s cannot be applied to jobs run by fio servers; using direct (O_DIRECT)",
                    requested)
    return info


def _job_text(recipe, step, plan: HostPlan, *, force_direct: bool, last_step: bool) -> str:
    logging_options = {"write_iops_log": plan.name, "log_unix_epoch": 1, "log_avg_msec": LOG_MS}
    if recipe.jobfile is not None:
        lines = [f"; written by iolab for host {plan.name}: these [global] options come first,",
                 "; the job file follows as it was given", "[global]"]
        for key, value in {**fio.REPORTING_OPTIONS, **logging_options}.items():
            lines.append(f"{key}={value}")
        if plan.kind == "dir":
            lines.append(f"directory={plan.path}")
        return "\n".join(lines) + "\n\n" + recipe.jobfile
    from iolab.engine.fio import job_options
    target = targets_mod.Target(spec=plan.host.target, kind={"device": "block"}.get(plan.kind, plan.kind),
                                path=plan.path, name=plan.name, test_file=plan.test_file)
    global_options, options = job_options(recipe, step, target, force_direct=force_direct)
    global_options.update(logging_options)
    if plan.kind == "dir" and last_step:
        global_options["unlink"] = 1  # the server removes iolab's test file after the last test
    return fio.render_job(step.id, options, global_options)


def new_fleet_id(recipe_name: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{safe_name(recipe_name)}-{secrets.token_hex(2)}"


def _new_run(data_dir, host: str, run_id: str, *, recipe: str, label: str, directory: str | None = None,
             **manifest) -> Run:
    """A run directory ``data_dir/<directory or host>/<run_id>`` (the id is given: hosts share the fleet's)."""
    parent = Path(data_dir) / (directory or host)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        (parent / run_id).mkdir()
    except FileExistsError as exc:
        raise IolabError("a run directory with this id exists already", context=str(parent / run_id)) from exc
    except OSError as exc:
        raise IolabError(f"cannot create the run directory: {exc.strerror}", context=str(parent / run_id)) from exc
    base = {"schema": 1, "run_id": run_id, "host": host, "label": label, "recipe": recipe,
            "status": "running", "started": utcnow(), "ended": None}
    run = Run(parent / run_id, {**base, **manifest})
    run.save_manifest()
    return run


# =========================================================================== results

@dataclasses.dataclass
class FleetResult:
    fleet_id: str
    path: Path                      # data/_fleet/<fleet_id>
    manifest: dict                  # the fleet manifest
    hosts: dict                     # host name -> run directory
    results: pd.DataFrame           # every host's rows and the aggregate rows

    @property
    def completed_hosts(self) -> list[str]:
        return list(self.manifest.get("completed_hosts", []))

    @property
    def failed_hosts(self) -> dict:
        return dict(self.manifest.get("failed_hosts", {}))


def _client_key(entry: dict) -> tuple:
    return (str(entry.get("hostname")), entry.get("port"))


def _match(entry: dict, specs: dict) -> str | None:
    """The host an output entry belongs to; ``specs`` maps host -> (hostname, port, kind)."""
    hostname, port = _client_key(entry)
    for name, (h, p, kind) in specs.items():
        if hostname == h and (kind == "unix" or port == p):
            return name
    by_port = [name for name, (h, p, kind) in specs.items() if kind == "tcp" and p == port]
    return by_port[0] if len(by_port) == 1 else None


def _rows_by_host(text: str, per_host: dict) -> dict:
    """:func:`iolab.engine.fioparse.parse_output` of fio's combined client output, its rows split per host.

    The parser names a client by its address, or ``address:port`` where one
    address has several servers; the output entries each host owns (``per_host``,
    matched by :func:`_match`) say which of those names are its own.
    """
    table = parse_output(text)
    split = {}
    for name, entries in per_host.items():
        keys = set()
        for entry in entries:
            hostname, port = _client_key(entry)
            keys.update((hostname, f"{hostname}:{port}"))
        split[name] = table[table["host"].isin(keys)].reset_index(drop=True)
    return split


def _missing_reason(text: str, hostname: str, port, timed_out: bool) -> str:
    lines = [fioserver_line for fioserver_line in (l.strip() for l in text.splitlines()) if fioserver_line]
    hits = [l for l in lines if hostname in l and ("connect" in l or "timed out" in l or "timeout" in l
                                                  or "disconnected" in l or "fio:" in l)]
    exact = [l for l in hits if f"{hostname}:{port}" in l] or hits
    detail = "; ".join(dict.fromkeys(exact))
    if any("failed to connect" in l for l in exact):
        before = [l for l in lines if l.startswith("fio: connect:")]
        return f"did not answer: {'; '.join(before[:1] + exact)}"
    if any("timed out" in l or "timeout on cmd" in l for l in exact):
        return f"did not answer in time: {detail}"
    if any("disconnected" in l for l in exact):
        return f"disconnected mid-run: {detail}"
    if timed_out:
        return "no results before iolab's time limit"
    return f"no results from this host{': ' + detail if detail else ''}"


def global_options(jobfile_text: str) -> dict:
    """The ``[global]`` options of a job file, as fio's JSON lists them (text values)."""
    options, section = {}, None
    for raw in jobfile_text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section == "global":
            key, _, value = line.partition("=")
            options[key.strip()] = value.strip()
    return options


def _host_document(doc: dict, entries: list, hostname: str | None, jobfile_text: str) -> dict:
    """That host's part of a client/server document as a standalone fio JSON document.

    fio's client merges every client's ``[global]`` options into one object
    (duplicate keys: one host's ``filename`` would show up for all), so the
    host's own are taken from the job file it was sent.
    """
    out = {k: doc[k] for k in ("fio version", "timestamp", "timestamp_ms", "time") if k in doc}
    out["global options"] = global_options(jobfile_text)
    out["jobs"] = entries
    disk = [d for d in doc.get("disk_util", []) if hostname is None or str(d.get("hostname")) == hostname]
    if disk:
        out["disk_util"] = disk
    out["iolab"] = {"note": "extracted by iolab from a fio client/server run (client_stats -> jobs); "
                            "fio's untouched output is in the fleet directory"}
    return out


def _start_times(logdir: Path, names: Iterable[str]) -> dict:
    """Per host: Unix time (ms) its jobs started, from the first IOPS log sample."""
    found = {}
    for name in names:
        firsts = []
        for path in logdir.glob(f"{name}_iops.*"):
            if not path.is_file():
                continue
            try:
                with open(path) as handle:
                    first = handle.readline().split(",")[0]
                firsts.append(int(first) - LOG_MS)
            except (OSError, ValueError):
                continue
        if firsts:
            found[name] = min(firsts)
    return found


def aggregate(frames: dict, *, fleet_id: str, label: str, expected: Sequence[str]) -> pd.DataFrame:
    """Sum over hosts per test x rep x direction (see the module notes for each column)."""
    parts = [f for f in frames.values() if f is not None and len(f)]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    table = table[table["direction"].notna()]
    rows = []
    keys = ["recipe", "test", "job", "rep", "direction"]
    for key, group in table.groupby(keys, dropna=False, sort=False):
        measured = sorted(group["host"].unique())
        iops = group["iops"].fillna(0)
        weights = iops if iops.sum() > 0 else None
        mean_lat = (group["lat_mean_us"] * weights).sum() / weights.sum() if weights is not None else math.nan
        missing = [h for h in expected if h not in measured]
        errors = [e for e in group["error"].dropna().unique() if e]
        flags = ["fleet_aggregate"] + (["partial_fleet"] if missing else [])
        error = "; ".join(([f"no results from {', '.join(missing)}"] if missing else []) + errors) or None
        starts = group["start_ms"].dropna() if "start_ms" in group else pd.Series(dtype=float)
        row = dict(zip(keys, key))
        row.update(
            run_id=fleet_id, host=ALL_HOSTS, label=label, bs=group["bs"].iloc[0], iodepth=group["iodepth"].iloc[0],
            numjobs=int(group["numjobs"].fillna(1).sum()), bw_mbps=group["bw_mbps"].sum(), iops=iops.sum(),
            lat_mean_us=mean_lat, lat_p50_us=math.nan, lat_p99_us=math.nan, lat_p999_us=math.nan,
            lat_max_us=group["lat_max_us"].max(), cpu_usr_pct=math.nan, cpu_sys_pct=math.nan,
            io_bytes=group["io_bytes"].sum(), runtime_s=group["runtime_s"].max(),
            isolation=group["isolation"].iloc[0], error=error, target=None, tool="fio",
            valid=error is None, flags=";".join(flags), fleet_id=fleet_id, n_hosts=len(expected),
            hosts_measured=len(measured), hosts=",".join(measured),
            start_spread_ms=(starts.max() - starts.min()) if len(starts) > 1 else (0.0 if len(starts) else math.nan),
        )
        rows.append(row)
    return order_columns(pd.DataFrame(rows))


# =========================================================================== engine

class _FleetRun:
    def __init__(self, recipe, hosts: list[Host], *, inventory: Inventory, fleet_id: str, data_dir, label,
                 sequential: bool, insecure_network: bool, exposed: list, argv, progress, timeout):
        self.recipe, self.hosts, self.inventory = recipe, hosts, inventory
        self.fleet_id, self.data_dir, self.label = fleet_id, Path(data_dir), label
        self.sequential, self.insecure, self.exposed = sequential, insecure_network, exposed
        self.argv, self.progress, self.timeout = argv, progress, timeout
        self.isolation = _isolation(recipe)
        self.force_direct = self.isolation["forced_o_direct"]
        self.steps = recipe.steps()
        self.plans: list[HostPlan] = []
        self.fleet: Run | None = None
        self.frames: list[pd.DataFrame] = []

    # -- set-up ---------------------------------------------------------------------
    def prepare(self) -> None:
        writes = _writes(self.recipe)
        kinds = [(host, *_target_kind(host, self.recipe, writes)) for host in self.hosts]
        for host, kind, path in kinds:  # refuse unsafe job files before anything is created
            draft = HostPlan(host=host, kind=kind, path=path,
                             test_file=f"{path.rstrip('/')}/iolab-draft.dat" if kind == "dir" else None)
            for index, step in enumerate(self.steps):
                text = _job_text(self.recipe, step, draft, force_direct=self.force_direct,
                                 last_step=index == len(self.steps) - 1)
                _check_job(text, f"{host.name}: jobs/{step.id}.fio", draft, self.inventory)
        n = 1 if self.sequential else len(self.hosts)
        security = {"insecure_network": self.insecure, "hosts_over_network": self.exposed,
                    "tunnelled": [h.name for h in self.hosts if h.connection == "ssh"],
                    "allow_job_options": sorted(self.inventory.allow_job_options)}
        fleet_info = {"id": self.fleet_id, "mode": "sequential" if self.sequential else "simultaneous",
                      "inventory": os.path.abspath(self.inventory.source), "hosts": [h.name for h in self.hosts],
                      "n_hosts": n, "dir": str(self.data_dir / FLEET_DIR / self.fleet_id)}
        common = dict(recipe_description=self.recipe.description, tool=self.recipe.tool,
                      versions=sysinfo.versions(), argv=self.argv, isolation=self.isolation, security=security,
                      options={"size": self.recipe.size, "runtime": self.recipe.runtime,
                               "repeat": self.recipe.repeat, "preset": self.recipe.preset,
                               "warmup": self.recipe.defaults.get("warmup"),
                               "pause": self.recipe.defaults.get("pause")})
        self.fleet = _new_run(self.data_dir, ALL_HOSTS, self.fleet_id, directory=FLEET_DIR,
                              recipe=self.recipe.name,
                              label=self.label or f"{len(self.hosts)} hosts", controller=sysinfo.system(),
                              fleet={**fleet_info, "role": "fleet"}, hosts=[h.describe() for h in self.hosts],
                              **common)
        self.fleet.write("recipe.yaml", yaml.safe_dump(self.recipe.to_dict(), sort_keys=False, allow_unicode=True))
        self.fleet.write("inventory.yaml", yaml.safe_dump(
            {"hosts": [h.describe() for h in self.hosts]}, sort_keys=False, allow_unicode=True))
        for host, kind, path in kinds:
            run_id = f"{self.fleet_id}-{host.name}"
            plan = HostPlan(host=host, kind=kind, path=path)
            if kind == "dir":
                plan.test_file = f"{path.rstrip('/')}/iolab-{run_id}.dat"
            system = sysinfo.system() if host.local else {
                "note": f"not collected: the fio server runs on {host.ssh or host.address}"}
            target = {"spec": host.target, "kind": kind, "name": host.name, "path": path,
                      "test_file": plan.test_file, "server": host.describe()}
            if host.local:
                target.update(sysinfo.mount_of(path))
            plan.run = _new_run(self.data_dir, host.name, run_id, recipe=self.recipe.name, label=host.label,
                                system=system, targets=[target], fleet={**fleet_info, "role": "host"},
                                tests=[{"name": s.id, "test": s.test, "rw": s.rw, "status": "pending", "reps": 0}
                                       for s in self.steps], **common)
            plan.run.write("recipe.yaml", yaml.safe_dump(self.recipe.to_dict(), sort_keys=False,
                                                         allow_unicode=True))
            self.plans.append(plan)
        self._write_jobs()

    def _write_jobs(self) -> None:
        """Render, check (jobcheck, then fio --parse-only) and keep every job file before anything runs."""
        paths = []
        for plan in self.plans:
            for index, step in enumerate(self.steps):
                text = _job_text(self.recipe, step, plan, force_direct=self.force_direct,
                                 last_step=index == len(self.steps) - 1)
                path = plan.run.write(f"jobs/{step.id}.fio", text)
                _check_job(text, str(path), plan, self.inventory)
                plan.jobs[step.id] = path
                paths.append(path)
        # fio --parse-only takes a few hundred ms each (fio's start-up): check them side by side
        with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
            for future in [pool.submit(fio.check_job, path) for path in paths]:
                future.result()

    def connect(self, stack: contextlib.ExitStack) -> None:
        """Open SSH tunnels and check every host answers; a host that does not is failed, not fatal."""
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="iolab-fleet-"))
        os.chmod(workdir, 0o700)
        for plan in self.plans:
            if plan.host.connection == "ssh":
                tunnel = Tunnel(plan.host, workdir)
                stack.callback(tunnel.close)
                plan.tunnel = tunnel
            else:
                plan.endpoint = plan.host.direct_endpoint()

        def reach(plan: HostPlan) -> None:
            if plan.tunnel is not None:
                try:
                    plan.tunnel.open()
                except IolabError as exc:
                    plan.fail(exc.message, "connect")
                    return
                plan.endpoint = plan.tunnel.endpoint
            problem = fioserver.probe(plan.endpoint)
            if problem:
                plan.fail(f"did not answer at {plan.endpoint}: {problem}", "connect")

        with ThreadPoolExecutor(max_workers=min(16, len(self.plans))) as pool:
            for future in [pool.submit(reach, plan) for plan in self.plans]:
                future.result()
        for plan in self.plans:
            plan.run.update(connection={"endpoint": plan.endpoint.describe() if plan.endpoint else None,
                                        "tunnel": plan.tunnel.describe() if plan.tunnel else None})

    # -- running --------------------------------------------------------------------
    def execute(self) -> None:
        reps = ([0] if self.recipe.defaults.get("warmup") else []) + list(range(1, self.recipe.repeat + 1))
        pause = self.recipe.defaults.get("pause") or 0
        groups = [[p] for p in self.plans] if self.sequential else [self.plans]
        for group in groups:
            for index, step in enumerate(self.steps):
                active = [p for p in group if p.alive]
                if not active:
                    break
                if index and pause:
                    time.sleep(pause)
                for plan in active:
                    plan.status = "running"
                    record = plan.run.manifest["tests"][index]
                    record.update(status="running", started=utcnow())
                    plan.run.save_manifest()
                for rep in reps:
                    active = [p for p in active if p.alive]
                    if not active:
                        break
                    self._invoke(active, step, rep, n_hosts=len(group))
                for plan in group:
                    record = plan.run.manifest["tests"][index]
                    if record["status"] != "running":
                        continue
                    if not plan.alive:
                        record.update(status="failed", error=plan.reason, ended=utcnow())
                    else:
                        errors = record.pop("_errors", [])
                        record.update(status="failed" if errors else "completed", ended=utcnow(),
                                      error="; ".join(dict.fromkeys(errors)) or None)
                    plan.run.save_manifest()

    def _invoke(self, active: list[HostPlan], step, rep: int, *, n_hosts: int) -> None:
        suffix = "warmup" if rep == 0 else str(rep)
        sub = f"{active[0].name}/" if self.sequential else ""
        logdir = self.fleet.path / "logs" / f"{sub}{step.id}-{suffix}"
        logdir.mkdir(parents=True, exist_ok=True)
        specs, argv = {}, [fio.fio_binary(), f"--output-format={self.recipe.output_format}"]
        links = []
        for plan in active:
            endpoint = plan.endpoint
            if endpoint.kind == "unix":
                # fio names the client's logs "<name>_iops.N.log.<client host>"; a socket path
                # holds "/", so the client connects through a link named after the host
                link = logdir / f"{plan.name}.sock"
                with contextlib.suppress(FileNotFoundError):
                    link.unlink()
                link.symlink_to(endpoint.path)
                links.append(link)
                spec, key = f"sock:{link.name}", (link.name, None, "unix")
            else:
                spec = endpoint.client_spec
                ip = fioserver.parse_ip(endpoint.address)
                key = (str(ip) if ip is not None else endpoint.address, endpoint.port, "tcp")
            specs[plan.name] = key
            argv += [f"--client={spec}", os.path.abspath(plan.jobs[step.id])]  # fio runs in logdir
        raw = self.fleet.path / f"raw/{sub}{step.id}-{suffix}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        commands = self.fleet.manifest.setdefault("commands", {})
        commands[f"{sub}{step.id}"] = argv
        self.fleet.save_manifest()
        expected = _expected_seconds(self.recipe, step)
        limit = self.timeout if self.timeout is not None else (2 * expected + 60 if expected else None)
        label = f"{step.id} x{len(active)} host{'s' if len(active) > 1 else ''}" + (
            " warm-up" if rep == 0 else f" {rep}/{self.recipe.repeat}")
        started = time.monotonic()
        with open(raw, "wb") as out, tempfile.TemporaryFile() as err:
            proc = fio.start(argv, stdout=out, stderr=err, cwd=str(logdir))
            try:
                timed_out = _wait(proc, label, expected, limit, self.progress)
            except BaseException:
                progress_.stop(proc)
                raise
            err.seek(0)
            stderr = err.read().decode(errors="replace")
        wall = time.monotonic() - started
        for link in links:
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
        text = raw.read_text(errors="replace")
        docs = documents(text)
        doc = docs[-1] if docs else {}
        entries = [e for e in doc.get("client_stats", []) if e.get("jobname") != "All clients"]
        per_host: dict[str, list] = {p.name: [] for p in active}
        for entry in entries:
            name = _match(entry, specs)
            if name is None:
                log.warning("fio output entry from %s:%s matches no host", *_client_key(entry))
                continue
            per_host[name].append(entry)
        starts = _start_times(logdir, [p.name for p in active])
        combined = text + "\n" + stderr
        parsed = _rows_by_host(combined, per_host) if docs else {}
        frames = {}
        for plan in active:
            hostname, port, kind = specs[plan.name]
            if not per_host[plan.name]:
                where = f"{step.id} rep {rep}" if rep else f"{step.id} warm-up"
                plan.fail(_missing_reason(combined, hostname, port, timed_out), where)
                continue
            host_doc = _host_document(doc, per_host[plan.name], hostname, plan.jobs[step.id].read_text())
            plan.run.write(f"raw/{step.id}-{'warmup' if rep == 0 else rep}.json",
                           json.dumps(host_doc, indent=2) + "\n")
            frame = self._annotate(parsed[plan.name], plan, step, rep, n_hosts=n_hosts, start_ms=starts.get(plan.name),
                                   wall=wall)
            record = plan.run.manifest["tests"][self.steps.index(step)]
            record["reps"] = rep
            if rep == 0:
                continue
            errors = [e for e in frame["error"].dropna().unique() if e]
            if errors:
                record.setdefault("_errors", []).extend(errors)
            plan.run.add_results(frame)
            self.frames.append(frame)
            frames[plan.name] = frame
            plan.run.save_manifest()
        if rep and not self.sequential:
            agg = aggregate(frames, fleet_id=self.fleet_id, label=self.fleet.manifest["label"],
                            expected=[p.name for p in active])
            if len(agg):
                self.fleet.add_results(agg)
                self.frames.append(agg)

    def _annotate(self, frame, plan: HostPlan, step, rep, *, n_hosts, start_ms, wall) -> pd.DataFrame:
        frame = frame.copy()
        frame.insert(0, "run_id", plan.run.run_id)
        frame["host"] = plan.name
        frame["label"] = plan.host.label
        frame["recipe"] = self.recipe.name
        frame["test"] = frame["job"] if self.recipe.jobfile is not None else step.test
        frame["rep"] = rep
        frame["isolation"] = self.isolation["mode"]
        frame["target"] = plan.host.target
        frame["tool"] = "fio"
        frame["wall_s"] = round(wall, 3)
        frame["flags"] = None
        frame["valid"] = frame["error"].isna()
        frame["fleet_id"] = self.fleet_id
        frame["n_hosts"] = n_hosts
        frame["start_ms"] = start_ms
        return frame

    # -- the end --------------------------------------------------------------------
    def finish(self, status_override: str | None = None, reason: str | None = None) -> None:
        for plan in self.plans:
            if plan.run is None or plan.run.manifest.get("ended"):
                continue
            if status_override and plan.alive:
                plan.status, plan.reason = status_override, reason
                for record in plan.run.manifest["tests"]:
                    record.pop("_errors", None)
                    if record["status"] in ("running", "pending"):
                        record["status"] = status_override if record["status"] == "running" else "pending"
            elif plan.alive:
                failed = [t for t in plan.run.manifest["tests"] if t["status"] != "completed"]
                plan.status = "failed" if failed else "completed"
                plan.reason = "; ".join(f"{t['name']}: {t.get('error') or t['status']}" for t in failed) or None
            plan.run.update(fleet={**plan.run.manifest["fleet"], "failed_at": plan.failed_at})
            plan.run.finish(plan.status, plan.reason)
        completed = [p.name for p in self.plans if p.status == "completed"]
        failed = {p.name: p.reason for p in self.plans if p.status == "failed"}
        if self.fleet is None:
            return
        self.fleet.update(completed_hosts=completed, failed_hosts=failed,
                          host_runs={p.name: {"status": p.status, "reason": p.reason,
                                              "run_dir": str(p.run.path) if p.run else None,
                                              "failed_at": p.failed_at} for p in self.plans})
        if status_override:
            self.fleet.finish(status_override, reason)
        elif failed or len(completed) < len(self.plans):
            not_done = {p.name: p.reason or p.status for p in self.plans if p.status != "completed"}
            self.fleet.finish("failed", f"{len(not_done)} of {len(self.plans)} hosts did not complete: "
                              + "; ".join(f"{k}: {v}" for k, v in not_done.items()))
        else:
            self.fleet.finish("completed")

    def cleanup_local_files(self) -> None:
        for plan in self.plans:
            if plan.host.local and plan.test_file:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(plan.test_file)
                    log.info("removed test file %s", plan.test_file)


def _expected_seconds(recipe, step) -> float | None:
    runtime = step.options.get("runtime")
    if runtime is None:
        return None
    text = str(runtime)
    seconds = float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))
    return seconds + float(recipe.defaults.get("ramp_time") or 0)


def _wait(proc, label: str, expected: float | None, limit: float | None, progress) -> bool:
    """Wait for the fio client; True when iolab had to stop it at ``limit`` seconds."""
    if progress_.wait(proc, label, expected, progress=progress, limit=limit, poll=0.1) == progress_.LIMIT:
        log.warning("%s: no end after %.0f s; stopping fio", label, limit)
        progress_.stop(proc)
        return True
    return False


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM stops a fleet run like Ctrl-C: fio's client is stopped, tunnels closed, manifests written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _prepare(recipe, inventory, *, hosts, insecure_network, size, runtime, repeat, isolation, preset):
    if not isinstance(recipe, recipes.Recipe):
        recipe = recipes.load(recipe)
    recipe = recipe.with_overrides(size=size, runtime=runtime, repeat=repeat, isolation=isolation, preset=preset)
    if recipe.engine != "fio":
        raise IolabError(f"recipe engine {recipe.engine!r} does not run on fio servers", context=recipe.name)
    if not isinstance(inventory, Inventory):
        inventory = load_inventory(inventory)
    chosen = inventory.select(hosts)
    exposed = check_security(chosen, insecure_network=insecure_network)
    fio.fio_binary()
    return recipe, inventory, chosen, exposed


def run(recipe, inventory, *, hosts: Sequence[str] | None = None, label: str | None = None,
        sequential: bool = False, insecure_network: bool = False, isolation: str | None = None,
        size=None, runtime=None, repeat=None, preset=None, data_dir="data", argv=None, progress=None,
        fleet_id: str | None = None, timeout: float | None = None) -> FleetResult:
    """Run ``recipe`` on the inventory's hosts (all, or ``hosts``) at once, or one after another.

    Raises :class:`IolabError` for a bad recipe or inventory, a refused host
    (before any connection), a refused or invalid job file (before anything
    runs). A host that fails during the run does not raise: see the result's
    manifest (``completed_hosts``, ``failed_hosts``).
    """
    recipe, inventory, chosen, exposed = _prepare(
        recipe, inventory, hosts=hosts, insecure_network=insecure_network, size=size, runtime=runtime,
        repeat=repeat, isolation=isolation, preset=preset)
    fleet_id = fleet_id or new_fleet_id(recipe.name)
    engine = _FleetRun(recipe, chosen, inventory=inventory, fleet_id=fleet_id, data_dir=data_dir, label=label,
                       sequential=sequential, insecure_network=insecure_network, exposed=exposed, argv=argv,
                       progress=progress, timeout=timeout)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_sigterm_as_interrupt())
            stack.callback(engine.cleanup_local_files)
            engine.prepare()
            engine.connect(stack)
            engine.execute()
    except KeyboardInterrupt:
        engine.finish("interrupted", "interrupted (Ctrl-C or SIGTERM); results so far are kept")
        raise
    except IolabError as exc:
        engine.finish("failed", str(exc))
        raise
    except Exception as exc:
        engine.finish("failed", f"internal error: {exc!r}")
        raise
    engine.finish()
    results = pd.concat(engine.frames, ignore_index=True) if engine.frames else pd.DataFrame()
    return FleetResult(fleet_id=fleet_id, path=engine.fleet.path, manifest=engine.fleet.manifest,
                       hosts={p.name: p.run.path for p in engine.plans}, results=order_columns(results))


def scale(recipe, inventory, *, max_hosts: int | None = None, fleet_id: str | None = None,
          **kwargs) -> list[FleetResult]:
    """Run with the first 1, 2, ..., N hosts at once (fleet ids ``<id>-n1`` ... ``<id>-nN``)."""
    if kwargs.get("sequential"):
        raise IolabError("scaling runs hosts at the same time; it cannot be sequential", context="--scale-hosts")
    hosts = kwargs.pop("hosts", None)
    recipe_, inventory_, chosen, _ = _prepare(
        recipe, inventory, hosts=hosts, insecure_network=kwargs.get("insecure_network", False),
        size=kwargs.get("size"), runtime=kwargs.get("runtime"), repeat=kwargs.get("repeat"),
        isolation=kwargs.get("isolation"), preset=kwargs.get("preset"))
    names = [h.name for h in chosen][: max_hosts or None]
    base = fleet_id or new_fleet_id(recipe_.name)
    results = []
    for n in range(1, len(names) + 1):
        results.append(run(recipe, inventory_, hosts=names[:n], fleet_id=f"{base}-n{n}", **kwargs))
    return results


def dry_run(recipe, inventory, *, hosts=None, sequential=False, insecure_network=False, isolation=None,
            size=None, runtime=None, repeat=None, preset=None) -> str:
    """The job files and fio command a fleet run would use; nothing is created or connected."""
    recipe, inventory, chosen, exposed = _prepare(
        recipe, inventory, hosts=hosts, insecure_network=insecure_network, size=size, runtime=runtime,
        repeat=repeat, isolation=isolation, preset=preset)
    iso = _isolation(recipe)
    writes = _writes(recipe)
    steps = recipe.steps()
    lines = [f"# recipe {recipe.name}: {recipe.description}",
             f"# {len(chosen)} hosts, {'one after another' if sequential else 'all at once'}; isolation "
             f"{iso['mode']} (requested {iso['requested']})"]
    if exposed:
        lines.append(f"# INSECURE: fio's protocol crosses the network for {', '.join(exposed)}")
    for host in chosen:
        kind, path = _target_kind(host, recipe, writes)
        plan = HostPlan(host=host, kind=kind, path=path)
        if kind == "dir":
            plan.test_file = f"{path.rstrip('/')}/iolab-<run_id>.dat"
        via = {"tcp": f"{host.address}:{host.port}", "unix": f"unix:{host.socket}",
               "ssh": f"ssh tunnel to {host.ssh} -> {host.remote_address}:{host.port}"}[host.connection]
        for index, step in enumerate(steps):
            text = _job_text(recipe, step, plan, force_direct=iso["forced_o_direct"],
                             last_step=index == len(steps) - 1)
            _check_job(text, f"{host.name}: {step.id}", plan, inventory)
            lines += [f"# --- {step.id} on {host.name} ({via}), target {host.target}", text]
    clients = " ".join(f"--client=<{h.name}> <{h.name}/jobs/STEP.fio>" for h in chosen)
    lines.append(f"# per test and repetition: fio --output-format={recipe.output_format} {clients}")
    return "\n".join(lines)


# =========================================================================== tidy data

def load(data_dir="data", fleet_id: str | None = None) -> pd.DataFrame:
    """Every fleet row (per host and aggregate) under ``data_dir``; ``fleet_id`` filters by prefix."""
    table = store_load(data_dir)
    if "fleet_id" not in table.columns:
        return table.iloc[0:0]
    table = table[table["fleet_id"].notna()]
    if fleet_id:
        table = table[table["fleet_id"].astype(str).str.startswith(fleet_id)]
    return table.reset_index(drop=True)


def _usable(data: pd.DataFrame, what: str) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(data).__name__}", context=what)
    needed = ["host", "test", "direction", "rep", "fleet_id", "n_hosts"]
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise IolabError(f"no column {', '.join(map(repr, missing))} (fleet results needed)", context=what)
    rows = data[(data["host"] != ALL_HOSTS) & data["direction"].notna()]
    if "valid" in rows.columns:
        rows = rows[rows["valid"].astype(str).str.lower().isin(["true", "1"])]
    if "error" in rows.columns:
        rows = rows[rows["error"].isna()]
    return rows


def scaling_table(data: pd.DataFrame, *, metric: str = "bw_mbps") -> pd.DataFrame:
    """Aggregate ``metric`` vs number of hosts running at once, one row per fleet run x test x direction.

    Sums the per-host rows of each repetition (a repetition where fewer hosts
    delivered than ran is left out and logged), then averages the repetitions.
    Columns: ``n_hosts, test, direction, fleet_id, total`` (sum over hosts),
    ``per_host`` (total / n_hosts), ``speedup`` (total / total at the smallest
    n of the same test and direction), ``efficiency`` (speedup / (n / n_min)),
    ``reps``, ``metric``.
    """
    rows = _usable(data, "scaling_table")
    if metric not in rows.columns:
        raise IolabError(f"no column {metric!r}", context="scaling_table")
    keys = ["fleet_id", "n_hosts", "test", "direction", "rep"]
    sums = rows.groupby(keys, dropna=False).agg(total=(metric, "sum"), measured=("host", "nunique")).reset_index()
    partial = sums[sums["measured"] < sums["n_hosts"]]
    if len(partial):
        log.warning("scaling_table: leaving out %d repetition(s) where not every host delivered", len(partial))
    sums = sums[sums["measured"] >= sums["n_hosts"]]
    table = sums.groupby(["n_hosts", "test", "direction", "fleet_id"], dropna=False).agg(
        total=("total", "mean"), reps=("rep", "nunique")).reset_index()
    table["n_hosts"] = table["n_hosts"].astype(int)
    table["per_host"] = table["total"] / table["n_hosts"]
    table = table.sort_values(["test", "direction", "n_hosts"]).reset_index(drop=True)
    base = table.loc[table.groupby(["test", "direction"])["n_hosts"].idxmin()].set_index(["test", "direction"])
    ref = table.set_index(["test", "direction"]).index.map(lambda k: base.loc[k, "total"])
    ref_n = table.set_index(["test", "direction"]).index.map(lambda k: base.loc[k, "n_hosts"])
    table["speedup"] = table["total"] / list(ref)
    table["efficiency"] = table["speedup"] / (table["n_hosts"] / list(ref_n))
    table["metric"] = metric
    return table[["n_hosts", "test", "direction", "fleet_id", "total", "per_host", "speedup", "efficiency",
                  "reps", "metric"]]


#: Latency columns of :func:`tail_latency`, and their names in the ``percentile`` column.
TAIL_COLUMNS = {"lat_p50_us": "p50", "lat_p99_us": "p99", "lat_p999_us": "p99.9", "lat_max_us": "max"}


def tail_latency(data: pd.DataFrame, *, statistic: str = "median") -> pd.DataFrame:
    """Per-host tail latency, long form: ``host, label, n_hosts, test, direction, percentile, latency_us``.

    One row per host x fleet size x test x direction x percentile (p50, p99,
    p99.9, max), over the repetitions by ``statistic`` (``median``, ``mean``
    or ``max``).
    """
    if statistic not in ("median", "mean", "max"):
        raise IolabError(f"must be median, mean or max, got {statistic!r}", context="tail_latency: statistic")
    rows = _usable(data, "tail_latency")
    present = [c for c in TAIL_COLUMNS if c in rows.columns]
    keys = ["host", "label", "n_hosts", "test", "direction"] if "label" in rows.columns else \
        ["host", "n_hosts", "test", "direction"]
    long = rows.melt(id_vars=keys + ["rep"], value_vars=present, var_name="column", value_name="latency_us")
    long = long.dropna(subset=["latency_us"])
    table = long.groupby(keys + ["column"], dropna=False)["latency_us"].agg(statistic).reset_index()
    table["percentile"] = table["column"].map(TAIL_COLUMNS)
    order = {name: i for i, name in enumerate(TAIL_COLUMNS.values())}
    table = table.sort_values(keys + ["percentile"], key=lambda s: s.map(order) if s.name == "percentile" else s)
    return table[keys + ["percentile", "latency_us"]].reset_index(drop=True)


def start_spread(data: pd.DataFrame) -> pd.DataFrame:
    """Per fleet run x test x rep: how far apart the hosts' jobs started (ms, by the servers' clocks)."""
    rows = data[(data["host"] != ALL_HOSTS)] if "host" in data else data
    if "start_ms" not in rows.columns:
        raise IolabError("no column 'start_ms' (fleet results needed)", context="start_spread")
    rows = rows.dropna(subset=["start_ms"]).drop_duplicates(["fleet_id", "host", "test", "rep"])
    grouped = rows.groupby(["fleet_id", "test", "rep"])["start_ms"]
    return grouped.agg(first="min", last="max", hosts="count").assign(
        spread_ms=lambda t: t["last"] - t["first"]).reset_index()
