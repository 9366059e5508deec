"""fio servers on private Unix sockets and (on purpose) loopback TCP: start, refuse, confine, stop
(with every forked child), and another local user (nobody) locked out; the CLI."""
import os
import signal
import socket
import stat
import subprocess
import time

import pytest

from iolab.fleet import fioserver
from iolab.core.errors import IolabError
from iolab.core.procstat import processes

from cli_helpers import IOLAB, ROOT, live_processes, needs_fio

pytestmark = needs_fio


def run_client(spec: str, tmp_path, seconds: int = 1) -> subprocess.CompletedProcess:
    job = tmp_path / "probe.fio"
    job.write_text(f"[probe]\nioengine=null\nsize=1m\nrw=read\nruntime={seconds}s\ntime_based=1\n")
    return subprocess.run(["fio", "--output-format=json", f"--client={spec}", str(job)],
                          capture_output=True, text=True, timeout=60)


def test_tcp_server_on_loopback_runs_jobs_and_stops_with_its_children(servers, tmp_path):
    server = servers(port=0)
    ep = server.endpoint
    assert ep.kind == "tcp" and ep.address == "127.0.0.1" and ep.port > 0
    assert ep.client_spec == f"ip:127.0.0.1,{ep.port}"
    assert server.running and fioserver.listening(server.pid, ep)
    assert fioserver.probe(ep) is None
    idle = len(server.members())
    # a job makes the server fork a child; stop() must take it down too
    job = tmp_path / "long.fio"
    job.write_text("[long]\nioengine=null\nsize=1m\nrw=read\nruntime=30s\ntime_based=1\n")
    client = subprocess.Popen(["fio", f"--client={ep.client_spec}", str(job)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(server.members()) <= idle and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(server.members()) > idle, "the server forked no child for the job"
        members = server.members()
        server.stop()
        # SIGTERM was enough: the server did not have to be killed after the grace period
        assert server._proc.returncode != -signal.SIGKILL, server._proc.returncode
        assert not server.running and server.members() == [] and fioserver.group_members(server.pid) == []
        live = {p.pid for p in processes() if p.state not in ("Z", "X")}
        assert live.isdisjoint(members)  # fio's children in the server's namespace too
        assert live_processes(f"--server={ep.client_spec}") == []
        assert not fioserver.tcp_listeners(ep.port)
    finally:
        client.kill()
        client.wait()
    server.stop()  # twice is fine


def test_unix_socket_is_private_and_removed(servers, tmp_path):
    path = tmp_path / "fio.sock"
    with fioserver.start(socket=path) as server:
        assert server.endpoint.client_spec == f"sock:{path}"
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert fioserver.probe(server.endpoint) is None
        assert run_client(server.endpoint.client_spec, tmp_path).returncode == 0
    assert not path.exists()
    assert live_processes(f"--server=sock:{path}") == []


def test_stale_socket_is_replaced_and_other_files_are_left_alone(servers, tmp_path):
    path = tmp_path / "stale.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on (fio 3.33 would exit silently on it)
    server = servers(socket=path)
    assert fioserver.probe(server.endpoint) is None
    with pytest.raises(IolabError, match="a server already listens on this socket"):
        servers(socket=path)
    plain = tmp_path / "notes.txt"
    plain.write_text("keep me")
    with pytest.raises(IolabError, match="not a socket; not touching it"):
        servers(socket=plain)
    assert plain.read_text() == "keep me"


@pytest.mark.parametrize("address, what", [("0.0.0.0", "every network interface"), ("::", "every network interface"),
                                           ("192.0.2.10", "the network address 192.0.2.10")])
def test_network_addresses_are_refused_before_anything_starts(monkeypatch, address, what):
    def no_popen(*args, **kwargs):
        raise AssertionError("a process was started")
    monkeypatch.setattr(subprocess, "Popen", no_popen)
    with pytest.raises(IolabError) as err:
        fioserver.start(address=address, port=0)
    message = str(err.value)
    assert f"refusing to start a fio server on {what}" in message and "no authentication" in message
    assert "Unix socket" in message and "through SSH" in message


def test_a_port_in_use_is_refused(servers):
    first = servers(port=0)
    # fio binds with SO_REUSEPORT: a second server would silently share the port
    with pytest.raises(IolabError, match=f"port {first.endpoint.port} is in use"):
        servers(port=first.endpoint.port)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        with pytest.raises(IolabError, match="is in use"):
            servers(port=other.getsockname()[1])


def test_context_manager_stops_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with fioserver.start(port=0) as server:
            spec = server.endpoint.client_spec
            raise RuntimeError("boom")
    assert live_processes(f"--server={spec}") == []


def test_addresses():
    assert fioserver.is_loopback("127.0.0.1") and fioserver.is_loopback("127.8.9.1")
    assert fioserver.is_loopback("::1") and fioserver.is_loopback("localhost")
    assert not fioserver.is_loopback("0.0.0.0") and not fioserver.is_loopback("10.0.0.1")
    assert not fioserver.is_loopback("db1.example.net")  # no DNS look-up: not known to be loopback
    assert fioserver.is_unspecified("0.0.0.0") and fioserver.is_unspecified("::")
    assert fioserver.Endpoint("tcp", address="::1", port=9).client_spec == "ip6:::1,9"


def _cli_server(*args):
    return subprocess.Popen(IOLAB + ["server", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_tcp_only_on_purpose_says_who_can_connect_and_stops_cleanly(sig, tmp_path):
    proc = _cli_server("--tcp-loopback-any-local-user", "--port", "0")
    try:
        first = proc.stdout.readline()
        assert first.startswith("fio server listening on 127.0.0.1:"), first + proc.stderr.read()
        port = int(first.split("127.0.0.1:")[1].split()[0])
        lines = [proc.stdout.readline() for _ in range(4)]
        assert "WARNING: every local user of this machine can connect" in lines[0]
        assert lines[1].split() == ["confined:", "yes;", "jobs", "may", "write", "nothing"]
        assert f"fio --client=ip:127.0.0.1,{port}" in lines[2]
        assert f"address: 127.0.0.1, port: {port}" in lines[3]
        endpoint = fioserver.Endpoint("tcp", address="127.0.0.1", port=port)
        assert fioserver.probe(endpoint) is None
        proc.send_signal(sig)
        assert proc.wait(30) == 0
        err = proc.stderr.read()
        assert "fio server stopped" in err
        assert "WARNING: fio server on TCP 127.0.0.1:" in err and "EVERY local user" in err  # logged too
        assert live_processes(f"--server=ip:127.0.0.1,{port}") == []
        assert not fioserver.tcp_listeners(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_server_on_a_socket(tmp_path):
    path = tmp_path / "s.sock"
    proc = _cli_server("--socket", str(path))
    try:
        first = proc.stdout.readline()
        assert first.startswith(f"fio server listening on unix:{path}"), first + proc.stderr.read()
        rest = "".join(proc.stdout.readline() for _ in range(4))
        assert f"socket: {path}" in rest and f"remote_socket: {path}" in rest
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not path.exists()
        assert live_processes(f"--server=sock:{path}") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_port_without_the_tcp_flag_is_refused_in_one_line():
    proc = subprocess.run(IOLAB + ["server", "--port", "8765"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "iolab: error: --port: TCP on 127.0.0.1 lets every local user run jobs on this server; add "
        "--tcp-loopback-any-local-user to mean that, or drop --port for the private Unix socket"]
    help_text = subprocess.run(IOLAB + ["server", "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=60).stdout
    assert "--tcp-loopback-any-local-user" in help_text and "EVERY local user" in help_text


@pytest.mark.parametrize("port", [-1, 65536, 70000, "8765", 1.5, True])
def test_a_bad_port_is_refused_before_anything_starts(monkeypatch, port):
    def no_popen(*args, **kwargs):
        raise AssertionError("a process was started")
    monkeypatch.setattr(subprocess, "Popen", no_popen)
    with pytest.raises(IolabError, match=r"must be a TCP port 1-65535 \(or 0 for a free one\)"):
        fioserver.start(port=port)


@pytest.mark.parametrize("port, message", [
    ("-1", "must be a TCP port 1-65535 (or 0 for a free one), got -1"),
    ("65536", "must be a TCP port 1-65535 (or 0 for a free one), got 65536"),
    ("http", "must be a TCP port number, got 'http'"),
])
def test_cli_server_refuses_a_bad_port_at_once(port, message):
    # before: fio was started with --server=ip:127.0.0.1,-1 and iolab waited 10 s for it to listen
    proc = subprocess.run(IOLAB + ["server", "--tcp-loopback-any-local-user", f"--port={port}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"iolab: error: --port: {message}"]
    assert "did not listen" not in proc.stderr and proc.stdout == ""
