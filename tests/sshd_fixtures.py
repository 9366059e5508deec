"""A throwaway sshd and the owner-only fleet scenario (issue 27, item 3), for host and lab tests.

:func:`throwaway_sshd` starts the distribution's sshd as a plain child process (no
system service): a free port on 127.0.0.1, a host key and an authorized key made
for the test, its own config and pid file; it is stopped (and checked gone) on
the way out, also when the test fails.

:func:`owner_only_fleet_run` is the whole chain through the CLI: ``iolab server``
(a confined fio server on its private socket), sshd, ``iolab run --hosts``
reaching the server by forwarding that socket over SSH, and another local user
(``nobody``) who can neither connect to the server's socket nor to a forwarded
one, so that a job with ``exec_prerun=touch F`` from that user never runs.
The host runs it against a throwaway sshd on its own loopback; the lab VM
(tests/lab/test_lab_fleet_ssh.py) runs it inside the guest, whose sshd, fio
server and users are the guest's own.
"""
from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from cli_helpers import IOLAB, ROOT, live_processes

SSHD_CONFIG = """Port {port}
ListenAddress {address}
HostKey {work}/host
PidFile {work}/sshd.pid
AuthorizedKeysFile {work}/authorized_keys
StrictModes no
UsePAM {use_pam}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
X11Forwarding no
PermitTTY no
LogLevel INFO
"""

RECIPE = """
name: fleet-owner-only
description: one short O_DIRECT write test through a forwarded fio server socket
isolation: direct
defaults: {size: 8M, runtime: 1, repeat: 1}
fio: {ioengine: psync, direct: 1, norandommap: 1, randrepeat: 0}
tests:
  - name: RND4K-Q1T1
    rw: randwrite
    bs: 4k
    iodepth: 1
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def throwaway_sshd(work: Path, *, timeout: float = 30.0, address: str = "127.0.0.1", port: int | None = None,
                   authorized: Path | None = None):
    """sshd on ``address``:``port`` (default: a free loopback port) with a throwaway host key and an authorized
    key (default: a throwaway one, ``authorized``: that public key file, whose private key is elsewhere);
    stopped afterwards.

    Yields ``{"port", "identity", "known_hosts", "user", "work", "host_key"}`` (``identity`` None when the
    authorized key came from elsewhere). Skips when openssh-server/openssh-client are missing or sshd does not start.
    """
    from iolab.fleet import fioserver
    binary = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    if binary is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server/openssh-client are not installed (apt-get install openssh-server)")
    work.mkdir(parents=True, exist_ok=True)
    for key in ("host",) if authorized else ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / key)], check=True)
    (work / "authorized_keys").write_text(Path(authorized or work / "user.pub").read_text())
    port = port or _free_port()
    host_key = (work / "host.pub").read_text().strip()
    (work / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    (work / "sshd_config").write_text(SSHD_CONFIG.format(port=port, address=address, work=work,
                                                         use_pam="yes" if locked(getpass.getuser()) else "no"))
    made_run_dir = False
    if not os.path.isdir("/run/sshd"):  # sshd's privilege separation directory
        os.makedirs("/run/sshd", mode=0o755)
        made_run_dir = True
    log = open(work / "sshd.log", "wb")
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(work / "sshd_config")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        endpoint = fioserver.Endpoint("tcp", address="127.0.0.1", port=port)
        deadline = time.monotonic() + timeout
        while not fioserver.listening(proc.pid, endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"sshd did not start: {(work / 'sshd.log').read_text().strip()}")
            time.sleep(0.05)
        yield {"port": port, "identity": None if authorized else str(work / "user"),
               "known_hosts": str(work / "known_hosts"), "user": getpass.getuser(), "work": work, "host_key": host_key}
    finally:
        fioserver.stop_group(proc)
        log.close()
        if made_run_dir:
            shutil.rmtree("/run/sshd", ignore_errors=True)
    assert live_processes(str(work / "sshd_config")) == []


def locked(user: str) -> bool:
    """Whether ``user``'s password is locked ("!..."): sshd without PAM refuses such an account even for
    key logins. virtme-ng's guest locks every account (its generated /etc/shadow); PAM's account check
    does not look at the lock, so sshd uses PAM there."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/shadow").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == user:
                return rest.startswith("!")
    return False


def ssh_entry(name: str, sshd: dict, remote_socket: str | None, target: Path, identity: str | None = None) -> dict:
    """An inventory host reached over ``sshd`` (``remote_socket`` None: the inventory's default)."""
    entry = {"name": name, "ssh": f"{sshd['user']}@127.0.0.1", "ssh_port": sshd["port"],
             "identity": identity or sshd["identity"], "target": str(target), "target_kind": "dir",
             "ssh_options": {"UserKnownHostsFile": sshd["known_hosts"], "StrictHostKeyChecking": "yes",
                             "GlobalKnownHostsFile": "/dev/null"}}
    if remote_socket is not None:
        entry["remote_socket"] = str(remote_socket)
    return entry


def as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True, timeout=300,
                          cwd="/")


@contextlib.contextmanager
def cli_server(*args: str, timeout: float = 600.0):
    """``iolab server ARGS`` as a real process; yields (process, first line); SIGTERM and checked on the way out."""
    proc = subprocess.Popen(IOLAB + ["server", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        first = proc.stdout.readline()  # blocks until the server listens (or iolab ends)
        assert first.startswith("fio server listening on "), first + proc.stderr.read()
        yield proc, first
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def prerun_job(directory: Path, marker: Path) -> Path:
    """A job that touches ``marker`` before it starts, in a directory ``nobody`` can read (made here)."""
    directory.mkdir(mode=0o755, exist_ok=True)
    directory.chmod(0o755)
    job = directory / "prerun.fio"
    job.write_text(f"[p]\nioengine=null\nsize=1m\nrw=read\nexec_prerun=touch {marker}\n")
    job.chmod(0o644)
    return job


def check_server_socket(server, first: str, target: Path | str) -> str:
    """The path of ``iolab server``'s socket from its first line, checked owner-only, and its confinement line."""
    sock = first.split("unix:", 1)[1].split()[0]
    st, dir_st = os.stat(sock), os.stat(os.path.dirname(sock))
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert dir_st.st_uid == os.geteuid() and stat.S_IMODE(dir_st.st_mode) == 0o700
    confined = server.stdout.readline()
    assert confined.split() == ["confined:", "yes;", "jobs", "may", "write", str(target)], confined
    return sock


def fleet_run_over_ssh(tmp_path: Path, run_cli, sshd: dict, remote_socket: str | None, target: Path | str,
                       *, expect_socket: str) -> dict:
    """``iolab run --hosts`` (through ``run_cli``) to one host reached over ``sshd``, checked completed with its
    row, the tunnel to ``expect_socket`` gone afterwards. Returns the tunnel's argv and the first row."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": [ssh_entry("far", sshd, remote_socket, target)]}))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    rc, out, err = run_cli("run", str(recipe), "--hosts", str(inventory), "--data", str(tmp_path / "data"),
                           "--no-progress")
    sshd_log = sshd["work"] / "sshd.log" if sshd.get("work") else None
    assert rc == 0, err + ("\nsshd: " + sshd_log.read_text()[-2000:] if sshd_log else "")
    fleet_dir = Path(out.strip().splitlines()[-1])
    manifest = json.loads((fleet_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["completed_hosts"] == ["far"], manifest
    host_manifest = json.loads(next((tmp_path / "data" / "far").glob("*/manifest.json")).read_text())
    tunnel = host_manifest["connection"]["tunnel"]
    assert tunnel["remote"] == f"unix:{expect_socket}" and not os.path.exists(tunnel["local_socket"])
    results = (next((tmp_path / "data" / "far").glob("*/results.csv"))).read_text()
    assert "RND4K-Q1T1" in results
    return {"tunnel": tunnel["argv"], "rows": results.strip().splitlines()[1][:160]}


def nobody_is_refused(tmp_path: Path, sshd: dict, sock: str, target: Path | str, job: Path,
                      *, direct: bool = True) -> dict:
    """``nobody`` cannot connect to the server's socket (``direct``: it is on this machine) nor to the owner's
    SSH-forwarded one, so its job (``prerun_job``) never runs. Returns what nobody was told, per socket."""
    from iolab.fleet import inventory as fleet_inventory
    from iolab.fleet.tunnel import Tunnel
    if shutil.which("runuser") is None:
        pytest.skip("runuser (util-linux) is not installed")
    seen = {}
    host = fleet_inventory.parse_inventory({"hosts": [ssh_entry("far", sshd, sock, target)]}, "inventory").hosts[0]
    near = tmp_path / "near"
    near.mkdir(mode=0o700)
    with Tunnel(host, near) as forwarded:
        for path in ([sock] if direct else []) + [str(forwarded.path)]:
            seen[f"sock:{path}"] = nobody_refused(path, job)
        probe = as_nobody(["python3", "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                            "s.connect(sys.argv[1])", forwarded.path])
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr
    return seen


def nobody_refused(sock: str, job: Path) -> str:
    """``nobody`` on this machine cannot send ``job`` to a fio server's socket ``sock``: what fio told it."""
    proc = as_nobody(["fio", f"--client=sock:{sock}", str(job)])
    assert proc.returncode != 0 and "Permission denied" in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def owner_only_fleet_run(tmp_path: Path, run_cli, *, socket_path: str | None = None) -> dict:
    """The scenario (see the module's docstring). ``run_cli(*args) -> (rc, stdout, stderr)`` runs iolab's CLI;
    ``socket_path`` None: ``iolab server``'s default socket. Returns what it saw, for the test to print."""
    if shutil.which("runuser") is None:
        pytest.skip("runuser (util-linux) is not installed")
    target = tmp_path / "target"
    target.mkdir()
    jobs = Path(tempfile.mkdtemp(prefix="iolab-nobody-job-"))  # a job file nobody can read
    marker = tmp_path / "F"
    job = prerun_job(jobs, marker)
    seen = {}
    server_args = ["--allow-path", str(target)] + (["--socket", socket_path] if socket_path else [])
    try:
        with cli_server(*server_args) as (server, first):
            sock = check_server_socket(server, first, target)
            seen["socket"] = sock
            assert socket_path in (None, sock)
            with throwaway_sshd(tmp_path / "sshd") as sshd:
                # 1. the owner's fleet run, through SSH's forwarding of the server's socket
                seen["fleet"] = fleet_run_over_ssh(tmp_path, run_cli, sshd, None if socket_path is None else sock,
                                                   target, expect_socket=sock)
                assert list(target.iterdir()) == []  # the server removed iolab's test file
                # 2. nobody, on the server's socket and on a forwarded one
                seen.update(nobody_is_refused(tmp_path, sshd, sock, target, job))
                assert not marker.exists()
        assert not os.path.exists(sock)
        assert live_processes(f"--server=sock:{os.path.dirname(sock)}/.fio-server-") == []
    finally:
        shutil.rmtree(jobs)
    assert not marker.exists()
    return seen
