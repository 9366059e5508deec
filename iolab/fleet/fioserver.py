"""Start and stop fio servers (``fio --server``) that only this machine can reach.

fio's server has no authentication: whoever can connect to it can make it run
any job, and a job can write any device and run programs (``exec_prerun``,
``ioengine=exec``). iolab therefore starts servers on the **loopback address**
(``127.0.0.1``) or on a **Unix socket** (made ``0600``: only its owner can
connect), never on a network address unless the caller passes
``allow_network=True`` on purpose. Machines elsewhere are reached through an
SSH tunnel (:mod:`iolab.fleet.runs`), which brings SSH's authentication and
encryption::

    with fioserver.start(port=0) as server:      # a free port on 127.0.0.1
        print(server.endpoint.client_spec)       # ip:127.0.0.1,40123 -> fio --client=...
    # stopped here: fio and every child it forked are gone, a socket file removed

    server = fioserver.start(socket="/run/iolab/fio.sock")
    ...
    fioserver.stop(server)

A loopback server still accepts any *local* user; use a Unix socket where
other people log in to the same machine.

How a start is checked: fio 3.33 does not say when it is ready; when it
cannot bind it prints ``fio: bind: ...`` and keeps running; and it binds with
``SO_REUSEPORT``, so a second server on a port already in use *shares* it
(the kernel then hands each connection to either). iolab refuses a port that
something listens on, then watches ``/proc`` until the fio process owns a
listening socket on the asked port or path (and nobody else does), and gives
up with fio's own message otherwise. fio forks one child per connection; the server runs in its
own session, so :meth:`FioServer.stop` signals the whole process group
(``SIGTERM``, then ``SIGKILL`` after a grace period) and waits until no member
is alive.
"""
from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import signal
import socket as _socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from iolab.engine import fio
from iolab.core.errors import IolabError
from iolab.core.procstat import group_members

log = logging.getLogger(__name__)

#: fio's own default port (``fio --server`` without a port).
DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"
#: Seconds a server gets to listen after it was started.
START_TIMEOUT_S = 10.0
#: Seconds a stopping server (and its children) gets after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0


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
        hint="serve on 127.0.0.1 or a Unix socket and reach other machines through an SSH tunnel")


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


# --------------------------------------------------------------------------- /proc

def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            link = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def tcp_listeners(port: int) -> set[int]:
    """Socket inodes listening on TCP ``port`` (any address, IPv4 or IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(fields[9]))
    return found


def _tcp_listening(port: int, inodes: set[int]) -> bool:
    return bool(tcp_listeners(port) & inodes)


def _unix_listening(path: str, inodes: set[int]) -> bool:
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split(None, 7)
        # Num RefCount Protocol Flags Type St Inode Path; flag 0x10000: __SO_ACCEPTCON (listening)
        if len(fields) == 8 and fields[7] == path and int(fields[3], 16) & 0x10000 and int(fields[6]) in inodes:
            return True
    return False


def listening(pid: int, endpoint: Endpoint) -> bool:
    """Whether process ``pid`` owns a listening socket for ``endpoint`` (read from /proc, no connection)."""
    inodes = _socket_inodes(pid)
    if not inodes:
        return False
    if endpoint.kind == "unix":
        return _unix_listening(endpoint.path, inodes)
    return _tcp_listening(endpoint.port, inodes)


def stop_group(proc: subprocess.Popen, *, grace: float = STOP_GRACE_S, first=signal.SIGTERM) -> None:
    """Stop a child started with ``start_new_session=True`` and every process of its group."""
    pgid = proc.pid
    for sig in (first, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + (grace if sig != signal.SIGKILL else 5.0)
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_members(pgid):
                break
            time.sleep(0.05)
        else:
            if sig == signal.SIGKILL:
                log.warning("process group %d still has members after SIGKILL: %s", pgid, group_members(pgid))
            continue
        break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


# --------------------------------------------------------------------------- server

class FioServer:
    """One ``fio --server`` child process; a context manager that stops it on exit."""

    def __init__(self, endpoint: Endpoint, proc: subprocess.Popen, output, *, owns_socket: bool):
        self.endpoint = endpoint
        self._proc = proc
        self._output = output
        self._owns_socket = owns_socket
        self.started = time.time()

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
        if self._output is not None and not self._output.closed:
            self._output.close()

    def __enter__(self) -> "FioServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<FioServer {self.endpoint} pid={self.pid} {'running' if self.running else 'stopped'}>"


def _prepare_socket(path: str) -> str:
    path = os.path.abspath(path)
    if len(path.encode()) >= 108:
        raise IolabError("a Unix socket path must be shorter than 108 bytes", context=path)
    if not os.path.isdir(os.path.dirname(path)):
        raise IolabError("the socket's directory does not exist", context=path)
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


def start(*, port: int | None = None, socket: str | os.PathLike | None = None, address: str = LOOPBACK,
          allow_network: bool = False, timeout: float = START_TIMEOUT_S, attempts: int = 5) -> FioServer:
    """Start ``fio --server`` on ``address:port`` (``port=0`` or ``None``: a free one) or a Unix ``socket``.

    Returns a started :class:`FioServer` (a context manager: ``with start(...) as s:``).
    Raises :class:`IolabError` if fio is missing, the address is not loopback
    (unless ``allow_network``), or the server does not listen within ``timeout``.
    """
    binary = fio.fio_binary()
    if socket is not None and port is not None:
        raise IolabError("give a port or a socket, not both", context="fio server")
    if socket is None:
        check_bind_address(address, allow_network=allow_network)
        ip = parse_ip(address)
        if ip is None:
            raise IolabError("bind a fio server to an IP address, not a host name", context=f"fio server {address}")
        address = str(ip)
        if port is not None:
            port = check_port(port, context=f"fio server {address}")
    last_error = None
    for _ in range(attempts):
        if socket is not None:
            endpoint = Endpoint("unix", path=_prepare_socket(os.fspath(socket)))
        else:
            endpoint = Endpoint("tcp", address=address, port=int(port) if port else free_port(address))
            if tcp_listeners(endpoint.port):
                # fio sets SO_REUSEPORT: a second server would share the port and
                # the kernel would hand connections to either of them
                last_error = IolabError(f"port {endpoint.port} is in use", context=f"fio server {endpoint}")
                if port:
                    raise last_error
                continue
        argv = [binary, f"--server={endpoint.client_spec}"]
        output = tempfile.TemporaryFile(prefix="iolab-fio-server-")
        log.info("starting %s", " ".join(argv))
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_umask_077 if socket is not None else None)
        server = FioServer(endpoint, proc, output, owns_socket=socket is not None)
        try:
            _wait_listening(server, timeout)
            others = tcp_listeners(endpoint.port) - _socket_inodes(server.pid) if endpoint.kind == "tcp" else set()
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
        log.info("fio server listening on %s (pid %d)", endpoint, proc.pid)
        return server
    raise last_error  # pragma: no cover - five ports taken in a row


def _wait_listening(server: FioServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if listening(server.pid, server.endpoint):
            return
        text = server.output()
        problems = [line.strip() for line in text.splitlines() if line.startswith("fio:")]
        if server._proc.poll() is not None or problems:
            detail = "; ".join(problems) or text.strip() or f"fio exited with {server._proc.poll()}"
            if "Address already in use" in detail:
                detail += " (port in use)"
            raise IolabError(f"the fio server did not start: {detail}", context=f"fio server {server.endpoint}")
        if time.monotonic() > deadline:
            raise IolabError(f"the fio server did not listen within {timeout:g} s",
                             context=f"fio server {server.endpoint}")
        time.sleep(0.05)


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
