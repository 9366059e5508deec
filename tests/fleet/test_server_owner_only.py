"""A fio server lets in only its owner, and its jobs write only what it was allowed (issue 27, item 3).

Real fio servers, real bubblewrap, and a real other local user (``nobody``
through ``runuser``): the other user cannot connect to the socket, and a job
with ``exec_prerun=touch F`` from that user never runs.
"""
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.core.errors import IolabError
from iolab.fleet import fioserver, privatedir

from cli_helpers import iolab_cli, needs_fio, needs_root
from device_fixtures import make_loop, scratch, sh  # noqa: F401 - fixtures
from user_fixtures import nobody_home  # noqa: F401 - fixture

pytestmark = [needs_fio, needs_root]

needs_runuser = pytest.mark.skipif(shutil.which("runuser") is None, reason="runuser (util-linux) is not installed")


def exec_job(tmp_path, marker) -> str:
    """A job that would create ``marker`` (as the server's user) before doing any I/O."""
    job = tmp_path / "prerun.fio"
    job.write_text(f"[p]\nioengine=null\nsize=1m\nrw=read\nexec_prerun=touch {marker}\n")
    job.chmod(0o644)
    return str(job)


def as_nobody(argv, cwd="/") -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def readable_job_dir() -> str:
    """A directory nobody can read job files from (tmp_path is root's 0700)."""
    path = tempfile.mkdtemp(prefix="iolab-nobody-job-")
    os.chmod(path, 0o755)
    return path


# --------------------------------------------------------------------------- private directories

def test_private_dir_is_made_0700_and_an_open_or_foreign_or_linked_one_is_refused(tmp_path):
    made = privatedir.ensure(tmp_path / "a" / "b")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    with pytest.raises(IolabError, match=r"mode 0755, must be 0700"):
        privatedir.ensure(open_dir)
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)
    with pytest.raises(IolabError, match="owned by uid 65534, not 0"):
        privatedir.ensure(foreign)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(IolabError, match=r"a symbolic link \(not followed\)"):
        privatedir.ensure(link)
    theirs = tmp_path / "theirs"  # another user's link on the way: they could point it elsewhere
    theirs.symlink_to(made)
    os.lchown(theirs, 65534, 65534)
    with pytest.raises(IolabError, match=f"{theirs} is a symlink of uid 65534"):
        privatedir.ensure(theirs / "c")
    assert not (tmp_path / "a" / "b" / "c").exists()  # nothing made through the link
    with pytest.raises(IolabError, match="does not exist"):
        privatedir.ensure(tmp_path / "missing", create=False)


def test_a_socket_in_a_directory_others_can_enter_is_refused_before_fio_starts(tmp_path, monkeypatch):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    def no_popen(*args, **kwargs):
        raise AssertionError("a process was started")
    monkeypatch.setattr(subprocess, "Popen", no_popen)
    with pytest.raises(IolabError) as err:
        fioserver.start(socket=open_dir / "fio.sock")
    assert str(err.value).startswith(f"{open_dir}/fio.sock: the socket's directory is not private: ")
    assert "mode 0755, must be 0700" in str(err.value)


def test_roots_default_socket_directory_is_root_only():
    path = privatedir.default_server_socket()
    assert path == "/run/iolab/servers/fio.sock"
    st = os.lstat("/run/iolab/servers")
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700


# --------------------------------------------------------------------------- the owner only

@needs_runuser
def test_another_local_user_cannot_connect_nor_run_an_exec_prerun_job(servers, tmp_path):
    # root's own server directory, under a name of this test's (the default fio.sock may be in use)
    sock = f"{privatedir.server_socket_dir()}/test-{os.getpid()}.sock"
    server = servers(socket=sock)
    marker = tmp_path / "F"
    jobs = readable_job_dir()
    try:
        job = exec_job(Path(jobs), marker)
        proc = as_nobody(["fio", f"--client=sock:{sock}", job])
        assert proc.returncode != 0
        assert "connect" in proc.stderr and "Permission denied" in proc.stderr, proc.stderr
        probe = as_nobody(["python3", "-c", f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({sock!r})"])
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr
        assert not marker.exists()
        assert server.members() and len(server.members()) == idle_members(server)  # no job ever reached it
        # control: the owner does reach it (and the server is confined: exec_prerun's touch of a
        # path it was not allowed to write fails, so F is not made by the owner either)
        owner = subprocess.run(["fio", f"--client=sock:{sock}", job], capture_output=True, text=True, timeout=120)
        assert "connect" not in owner.stderr, owner.stderr
        assert not marker.exists()
    finally:
        shutil.rmtree(jobs)


def idle_members(server) -> int:
    """Processes of a server with no job: fio alone, or bwrap, bwrap's PID 1 and fio."""
    return 3 if server.confinement["confined"] else 1


def test_confined_server_writes_only_its_allowed_place(servers, tmp_path):
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    precious = elsewhere / "precious"
    precious.write_bytes(b"keep")
    server = servers(socket=tmp_path / "s.sock", writable=[allowed])
    assert server.confinement["confined"] and server.confinement["writable"] == [str(allowed)]
    job = tmp_path / "two.fio"
    job.write_text(f"[global]\nrw=write\nsize=64k\nbs=4k\n[in]\nfilename={allowed}/in.dat\n"
                   f"[out]\nfilename={precious}\n[run]\nioengine=null\nexec_prerun=touch {elsewhere}/F\n")
    proc = subprocess.run(["fio", f"--client={server.endpoint.client_spec}", str(job)],
                          capture_output=True, text=True, timeout=120)
    assert (allowed / "in.dat").stat().st_size == 64 * 1024
    assert precious.read_bytes() == b"keep" and sorted(p.name for p in elsewhere.iterdir()) == ["precious"]
    assert "Read-only file system" in proc.stdout + proc.stderr


def test_unconfined_only_on_request_and_recorded(servers, tmp_path):
    server = servers(socket=tmp_path / "u.sock", confined=False)
    assert server.confinement == {"confined": False, "writable": [], "devices": [],
                                  "reason": "started unconfined on request"}
    assert "bwrap" not in server.argv[0]


def test_allowed_places_must_exist_and_not_be_the_root(tmp_path, monkeypatch):
    def no_popen(*args, **kwargs):
        raise AssertionError("a process was started")
    monkeypatch.setattr(subprocess, "Popen", no_popen)
    with pytest.raises(IolabError, match="does not exist"):
        fioserver.start(socket=tmp_path / "x.sock", writable=[tmp_path / "missing"])
    with pytest.raises(IolabError, match="the whole file system"):
        fioserver.start(socket=tmp_path / "x.sock", writable=["/"])


def in_child_as(uid: int, func):
    """``func()`` in a forked child running with effective uid ``uid``; its result or error text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on
        os.close(read)
        try:
            os.setegid(uid)
            os.seteuid(uid)
            text = f"ok {func()}"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            text = f"error {exc}"
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return text


def test_a_normal_users_default_is_their_state_directory_not_tmp(monkeypatch, nobody_home):  # noqa: F811
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(nobody_home))
    mine = nobody_home / ".cache" / "iolab" / "run"  # iolab.core.statedir's place for a normal user
    assert in_child_as(65534, privatedir.default_server_socket) == f"ok {mine}/servers/fio.sock"
    for path in (nobody_home / ".cache", mine, mine / "servers"):
        st = os.lstat(path)
        assert st.st_uid == 65534 and stat.S_IMODE(st.st_mode) == 0o700
    assert not os.path.lexists("/tmp/iolab-65534")
    # someone else's directory there (made before the user's first server) is refused, not used
    shutil.rmtree(mine)
    os.mkdir(mine, 0o700)
    result = in_child_as(65534, privatedir.default_server_socket)
    assert result.startswith(f"error {mine}: refused as iolab's state directory: cannot be entered by uid 65534 "
                             "(mode 0700, owner uid 0)"), result
    assert os.listdir(mine) == []


def test_an_allowed_device_is_the_one_device_the_server_can_write(servers, make_loop, tmp_path):  # noqa: F811
    """--allow-path /dev/loopA binds that device; a job naming another device (ext4-signed, never allowed)
    finds no such node in the server's /dev, and the device keeps its signature."""
    allowed, other = make_loop("16M"), make_loop("16M")
    sh("mkfs.ext4", "-q", "-F", other)
    before = Path(other).read_bytes()[:2 * 1024 * 1024]
    server = servers(socket=tmp_path / "d.sock", writable=[allowed])
    assert server.confinement["devices"] == [allowed] and server.confinement["writable"] == []
    job = tmp_path / "dev.fio"
    job.write_text(f"[global]\nrw=write\nsize=1m\nbs=64k\ndirect=1\n[ok]\nfilename={allowed}\n"
                   f"[other]\nfilename={other}\n")
    proc = subprocess.run(["fio", f"--client={server.endpoint.client_spec}", str(job)],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert "No such file or directory" in out or "Read-only file system" in out, out
    assert Path(other).read_bytes()[:2 * 1024 * 1024] == before
    assert Path(allowed).read_bytes()[:1024 * 1024] != bytes(1024 * 1024)  # the allowed one was written


def test_cli_refuses_a_socket_others_could_reach_in_one_line(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    proc = iolab_cli("server", "--socket", open_dir / "fio.sock", timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"iolab: error: {open_dir}/fio.sock: the socket's directory is not private: {open_dir}: mode 0755, "
        "must be 0700 (iolab server's default place is one (leave out --socket))"]
    assert list(open_dir.iterdir()) == []
