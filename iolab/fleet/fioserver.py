"""Start and stop fio servers (``fio --server``) that only their owner can reach.

fio's server has no authentication: whoever can connect to it can make it run
any job, and a job can write any device and run programs (``exec_prerun``,
``ioengine=exec``). iolab therefore starts servers by default on a **Unix
socket** (mode ``0600``) in a **directory only the owner can enter** (root:
``/run/iolab/servers``, mode 0700; see :mod:`iolab.fleet.privatedir`): another
local user cannot even reach the socket file. TCP on the loopback address is
open to *every local user* of the machine and is used only when the caller asks
for a port on purpose (``iolab server --tcp-loopback-any-local-user``), with a
warning; a network address needs ``allow_network=True`` besides. Machines
elsewhere are reached by forwarding the server's socket over SSH
(:mod:`iolab.fleet.tunnel`), which brings SSH's authentication::

    with fioserver.start(writable=["/srv/iolab"]) as server:   # /run/iolab/servers/fio.sock
        print(server.endpoint.client_spec)       # sock:/run/iolab/servers/fio.sock -> fio --client=...
    # stopped here: fio and every child it forked are gone, the socket file removed

**Confinement.** The server runs inside :mod:`iolab.isolation.confine` (bubblewrap)
like local fio runs: ``/`` read-only, only ``writable`` paths (and the socket's
directory) writable, ``/dev`` with null/zero/random/urandom and the named
``devices``, no capabilities, ``no_new_privs``; whatever job a client sends, fio
can write nothing else. Where confinement cannot be had, :func:`start` refuses
unless ``confined=False`` is passed on purpose (``iolab server --unconfined``).

How a start is checked: fio 3.33 does not say when it is ready; when it
cannot bind it prints ``fio: bind: ...`` and keeps running; and it binds with
``SO_REUSEPORT``, so a second server on a port already in use *shares* it
(the kernel then hands each connection to either). iolab refuses a port that
something listens on, then watches ``/proc`` until a process of the server owns a
listening socket on the asked port or path (and nobody else does), and gives
up with fio's own message otherwise. fio forks one child per connection; the server runs in its
own session, so :meth:`FioServer.stop` signals the whole process group and every
descendant (``SIGTERM``, then ``SIGKILL`` after a grace period) and waits until
none is alive.
"""
from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import socket as _socket
import stat
import subprocess
import tempfile
import time

from iolab.engine import fio
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.core.procstat import group_members  # noqa: F401 - tests and callers use it from here
from iolab.fleet import privatedir
from iolab.fleet.procsockets import (STOP_GRACE_S, listening, socket_inodes, stop_group,  # noqa: F401 - also
                                     tcp_listeners, tree)  # this module's API, as before the /proc part moved

log = logging.getLogger(__name__)

#: fio's own default port (``fio --server`` without a port).
DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"
#: Seconds a server gets to listen after it was started.
START_TIMEOUT_S = 60.0  # fio under bubblewrap in the lab VM (TCG) took over 20 s


# --------------------------------------------------------------------------- addresses

def parse_ip(address: str):
    """``address`` as an :mod:`ipaddress` object, ``localhost`` as 127.0.0.1; ``None`` for a host name."""
    text = str(address).strip()
    if text.lower() == "localhost":
        return ipaddress.ip_address(LOOPBACK)
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; a host name that needs DNS is not (no look-up is made)."""
    ip = parse_ip(address)
    return ip is not None and ip.is_loopback


def is_unspecified(address: str) -> bool:
    """True for 0.0.0.0 and :: ("every interface" when binding, never a place to connect to)."""
    ip = parse_ip(address)
    return ip is not None and ip.is_unspecified


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where a fio server listens: TCP ``address``/``port`` or a Unix socket ``path``."""

    kind: str                 # "tcp" | "unix"
    address: str | None = None
    port: int | None = None
    path: str | None = None

    @property
    def client_spec(self) -> str:
        """What ``fio --client=`` (and ``fio --server=``) take for this endpoint."""
        if self.kind == "unix":
            return f"sock:{self.path}"
        ip = parse_ip(self.address)
        if ip is not None and ip.version == 6:
            return f"ip6:{ip},{self.port}"
        if ip is not None:
            return f"ip:{ip},{self.port}"
        return f"{self.address},{self.port}"  # a host name; fio resolves it

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        ip = parse_ip(self.address)
        return f"[{ip}]:{self.port}" if ip is not None and ip.version == 6 else f"{self.address}:{self.port}"

    def describe(self) -> dict:
        data = {"kind": self.kind, "client_spec": self.client_spec}
        if self.kind == "unix":
            data["path"] = self.path
        else:
            data.update(address=self.address, port=self.port)
        return data


def check_bind_address(address: str, *, allow_network: bool = False, context: str = "fio server") -> None:
    """Refuse to put a fio server anywhere but the loopback address, unless told to."""
    if is_loopback(address):
        return
    if allow_network:
        log.warning("fio server on %s: reachable from the network, with no authentication", address)
        return
    what = "every network interface" if is_unspecified(address) else f"the network address {address}"
    raise IolabError(
        f"refusing to start a fio server on {what}: fio's server has no authentication and runs "
        f"whatever job a client sends (writing any device, running programs)", context=context,
        hint="serve on a private Unix socket (iolab server's default) and reach other machines through SSH")


def check_port(port, *, context: str = "fio server") -> int:
    """``port`` as an int in 0-65535 (0: the kernel picks a free one); anything else is refused at once."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise IolabError(f"must be a TCP port 1-65535 (or 0 for a free one), got {port!r}", context=context)
    return port


def free_port(address: str = LOOPBACK) -> int:
    """A TCP port nobody listens on at ``address`` right now (the kernel picks it)."""
    family = _socket.AF_INET6 if (parse_ip(address) and parse_ip(address).version == 6) else _socket.AF_INET
    with _socket.socket(family, _socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- server

class FioServer:
    """One ``fio --server`` child process; a context manager that stops it on exit."""

    def __init__(self, endpoint: Endpoint, proc: subprocess.Popen, output, *, owns_socket: bool,
                 confinement: dict | None = None):
        self.endpoint = endpoint
        self._proc = proc
        self._output = output
        self._owns_socket = owns_socket
        #: a confined server binds its socket in this private directory (the only writable place
        #: besides its allowed paths); iolab then renames the socket to ``endpoint.path``
        self.staging: str | None = None
        #: what confines the server: {"confined": bool, "writable": [...], "devices": [...], "reason": ...}
        self.confinement = confinement or {"confined": False}
        self.started = time.time()

    def members(self) -> list[int]:
        """The server's live processes: the one iolab started and every descendant (fio's per-job children)."""
        return tree(self._proc.pid)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    @property
    def argv(self) -> list[str]:
        return list(self._proc.args)

    def output(self) -> str:
        """What the server printed so far."""
        if self._output is None or self._output.closed:
            return ""
        self._output.flush()
        self._output.seek(0)
        return self._output.read().decode(errors="replace")

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Stop the server and every child it forked; remove its socket file. Safe to call twice."""
        if self._proc is not None:
            stop_group(self._proc, grace=grace)
            log.info("fio server %s (pid %d) stopped", self.endpoint, self._proc.pid)
        if self._owns_socket and self.endpoint.path:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(self.endpoint.path).st_mode):
                    os.unlink(self.endpoint.path)
            self._owns_socket = False
        if self.staging:
            for name in os.listdir(self.staging):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.staging, name))
            with contextlib.suppress(OSError):
                os.rmdir(self.staging)
            self.staging = None
        if self._output is not None and not self._output.closed:
            self._output.close()

    def __enter__(self) -> "FioServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<FioServer {self.endpoint} pid={self.pid} {'running' if self.running else 'stopped'}>"


def _prepare_socket(path: str) -> str:
    path = privatedir.check_socket_dir(path)
    if len(path.encode()) >= 108:
        raise IolabError("a Unix socket path must be shorter than 108 bytes", context=path)
    if os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise IolabError("exists and is not a socket; not touching it", context=path)
        with _socket.socket(_socket.AF_UNIX) as probe:
            try:
                probe.connect(path)
            except (ConnectionRefusedError, FileNotFoundError):
                log.info("removing the stale socket %s", path)
                os.unlink(path)  # fio 3.33 exits silently when the path exists
            else:
                raise IolabError("a server already listens on this socket", context=path)
    return path


def _umask_077() -> None:  # runs in the child before exec: the socket file is 0600
    os.umask(0o077)


def confinement_problem() -> str | None:
    """Why fio servers cannot be confined here (``None``: they can)."""
    from iolab.isolation import confine
    return confine.unavailable()


def _checked_paths(writable, devices) -> tuple[list[str], list[str]]:
    paths, devs = [], []
    for item in writable or ():
        path = os.path.abspath(os.fspath(item))
        if not os.path.exists(path):
            raise IolabError("does not exist (a fio server's writable place must be there first)", context=path)
        if os.path.realpath(path) == "/":
            raise IolabError("the whole file system cannot be a fio server's writable place", context=path)
        if stat.S_ISBLK(os.stat(path).st_mode):
            devs.append(path)
        else:
            paths.append(path)
    for item in devices or ():
        path = os.path.abspath(os.fspath(item))
        if not os.path.exists(path) or not stat.S_ISBLK(os.stat(path).st_mode):
            raise IolabError("is not a block device", context=path)
        devs.append(path)
    return paths, devs


def confined_argv(argv: list[str], *, writable: list[str], devices: list[str], network: bool) -> list[str]:
    """``argv`` run inside the kernel's confinement: the one call site for fio servers."""
    from iolab.isolation import confine
    return confine.Confinement(writable=tuple(writable), devices=tuple(devices), network=network).wrap(argv)


def _place(port, socket, address: str, allow_network: bool) -> tuple:
    """(socket, address, port) checked: a private socket (the default one when neither is given) or loopback TCP."""
    if socket is not None and port is not None:
        raise IolabError("give a port or a socket, not both", context="fio server")
    if socket is None and port is None:
        socket = privatedir.default_server_socket()
    if socket is not None:
        return privatedir.check_socket_dir(socket), address, None
    check_bind_address(address, allow_network=allow_network)
    ip = parse_ip(address)
    if ip is None:
        raise IolabError("bind a fio server to an IP address, not a host name", context=f"fio server {address}")
    return None, str(ip), check_port(port, context=f"fio server {ip}")


def _confinement(writable, devices, confined: bool) -> dict:
    paths, devs = _checked_paths(writable, devices)
    confinement = {"confined": bool(confined), "writable": paths, "devices": devs}
    if confined:
        problem = confinement_problem()
        if problem:
            raise IolabError(f"cannot confine the fio server: {problem}", context="fio server",
                             hint="without confinement any job a client sends can write anything root can; "
                                  "pass --unconfined (confined=False) only if you accept that")
    else:
        confinement["reason"] = "started unconfined on request"
        log.warning("fio server unconfined: a job it is sent can write anything its user can")
    return confinement


def _launch(binary: str, endpoint: Endpoint, confinement: dict) -> FioServer:
    """Start fio for ``endpoint``; a confined server on a socket binds it in a fresh private staging
    directory (the only place it can write besides its allowed paths: the socket's own directory may
    hold other things), from where :func:`start` moves the socket into place."""
    staging, bind = None, endpoint
    if confinement["confined"] and endpoint.kind == "unix":
        staging = tempfile.mkdtemp(prefix=".fio-server-", dir=os.path.dirname(endpoint.path))
        bind = Endpoint("unix", path=os.path.join(staging, "s.sock"))
        if len(bind.path.encode()) >= 108:
            os.rmdir(staging)
            raise IolabError("the socket's directory is too deep for a Unix socket (108 bytes) with "
                             "iolab's staging directory in it", context=endpoint.path)
    argv = [binary, f"--server={bind.client_spec}"]
    if confinement["confined"]:
        argv = confined_argv(argv, writable=confinement["writable"] + ([staging] if staging else []),
                             devices=confinement["devices"], network=endpoint.kind == "tcp")
    output = tempfile.TemporaryFile(prefix="iolab-fio-server-")
    log.info("starting %s", " ".join(argv))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=_umask_077 if endpoint.kind == "unix" else None)
    server = FioServer(bind, proc, output, owns_socket=endpoint.kind == "unix", confinement=confinement)
    server.staging = staging
    return server


def start(*, port: int | None = None, socket: str | os.PathLike | None = None, address: str = LOOPBACK,
          allow_network: bool = False, writable=(), devices=(), confined: bool = True,
          timeout: float = START_TIMEOUT_S, attempts: int = 5) -> FioServer:
    """Start ``fio --server`` on a private Unix ``socket`` (default: :func:`privatedir.default_server_socket`),
    or on TCP ``address:port`` when a ``port`` is given (``0``: a free one; open to every local user).

    ``writable`` (directories, files or block devices) and ``devices`` (block
    devices) are what jobs may write; with ``confined`` (the default) nothing
    else is writable to the server. Returns a started :class:`FioServer` (a
    context manager: ``with start(...) as s:``). Raises :class:`IolabError` if
    fio is missing, the socket's directory is not private, the address is not
    loopback (unless ``allow_network``), confinement cannot be had (unless
    ``confined=False``), or the server does not listen within ``timeout``.
    """
    binary = fio.fio_binary()
    socket, address, port = _place(port, socket, address, allow_network)
    confinement = _confinement(writable, devices, confined)
    last_error = None
    for _ in range(attempts):
        if socket is not None:
            endpoint = Endpoint("unix", path=_prepare_socket(socket))
        else:
            endpoint = Endpoint("tcp", address=address, port=int(port) if port else free_port(address))
            if tcp_listeners(endpoint.port):
                # fio sets SO_REUSEPORT: a second server would share the port and
                # the kernel would hand connections to either of them
                last_error = IolabError(f"port {endpoint.port} is in use", context=f"fio server {endpoint}")
                if port:
                    raise last_error
                continue
        server = _launch(binary, endpoint, confinement)
        try:
            _wait_listening(server, timeout)
            if server.staging:
                os.chmod(server.endpoint.path, 0o600)
                os.rename(server.endpoint.path, endpoint.path)
                server.endpoint = endpoint
            others = tcp_listeners(endpoint.port) - _member_sockets(server) if endpoint.kind == "tcp" else set()
            if others:
                raise IolabError(f"port {endpoint.port} is in use by another process too",
                                 context=f"fio server {endpoint}")
        except IolabError as exc:
            server.stop()
            last_error = exc
            if port or socket is not None or "in use" not in exc.message:
                raise
            continue  # the free port was taken in between: try another
        except BaseException:
            server.stop()
            raise
        if endpoint.kind == "unix":
            os.chmod(endpoint.path, 0o600)
        else:
            log.warning("fio server on TCP %s: EVERY local user of this machine can connect and have it run "
                        "any job (fio's server has no authentication)", endpoint)
        log.info("fio server listening on %s (pid %d, %s)", endpoint, server.pid,
                 "confined" if confinement["confined"] else "unconfined")
        return server
    raise last_error  # pragma: no cover - five ports taken in a row


def _member_sockets(server: FioServer) -> set[int]:
    inodes = set()
    for pid in server.members():
        inodes |= socket_inodes(pid)
    return inodes


def _wait_listening(server: FioServer, timeout: float) -> None:
    def up() -> bool:
        if listening(server.pid, server.endpoint):
            return True
        text = server.output()
        problems = [line.strip() for line in text.splitlines() if line.startswith("fio:")]
        if server._proc.poll() is not None or problems:
            detail = "; ".join(problems) or text.strip() or f"fio exited with {server._proc.poll()}"
            if "Address already in use" in detail:
                detail += " (port in use)"
            raise IolabError(f"the fio server did not start: {detail}", context=f"fio server {server.endpoint}")
        return False
    wait_until(up, timeout, what="the fio server to listen", context=f"fio server {server.endpoint}")


def stop(server: FioServer, grace: float = STOP_GRACE_S) -> None:
    """Stop ``server`` (same as ``server.stop()``)."""
    server.stop(grace)


def probe(endpoint: Endpoint, *, timeout: float = 3.0, settle: float = 0.3) -> str | None:
    """Check that something answers at ``endpoint``; ``None`` when it does, else why not.

    A fio server accepts the connection and waits for a command, so a
    connection that stays open for ``settle`` seconds counts as alive; one
    closed at once (an SSH tunnel whose far end is not listening) does not.
    Callers make sure the endpoint is one iolab may talk to.
    """
    if endpoint.kind == "unix":
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        target = endpoint.path
    else:
        ip = parse_ip(endpoint.address)
        family = _socket.AF_INET6 if ip is not None and ip.version == 6 else _socket.AF_INET
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        target = (endpoint.address, endpoint.port)
    with sock:
        sock.settimeout(timeout)
        try:
            sock.connect(target)
        except _socket.timeout:
            return f"no answer within {timeout:g} s"
        except OSError as exc:
            return f"cannot connect: {exc.strerror or exc}"
        sock.settimeout(settle)
        try:
            data = sock.recv(1)
        except _socket.timeout:
            return None
        except OSError as exc:
            return f"connection dropped: {exc.strerror or exc}"
        return None if data else "the connection was closed at once (nothing listens behind it?)"
