"""iolab's state directory (iolab.core.statedir): only its owner can write there, nothing in it is
reached through a link, and a directory someone else could have prepared is refused.

Root's real ``/run/iolab`` is shared with every iolab run on this machine: the tests that need it
with the wrong mode, owner or a symlink change it only inside a private mount namespace
(``unshare --mount``, a tmpfs mounted over it there), where nothing else sees the change.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iolab.core import ownership, statedir
from iolab.core.errors import IolabError

from cli_helpers import IOLAB, ROOT, needs_root
from user_fixtures import NOBODY, nobody_home  # noqa: F401 - fixture


def test_a_fresh_directory_is_made_private_with_its_parents(tmp_path):
    path = tmp_path / "a" / "b"
    with statedir.opened(path) as fd:
        statedir.write_new(fd, "x", b"1")
        assert statedir.names(fd) == ["x"]
    for level in (tmp_path / "a", path):
        assert stat.S_IMODE(os.lstat(level).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path / "x").st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o701])
def test_a_directory_others_may_enter_is_refused(tmp_path, mode):
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(mode)
    with pytest.raises(statedir.UnsafeStateDir, match=f"mode {mode:04o}, must be 0700"):
        statedir.open_dir(path)
    assert stat.S_IMODE(os.lstat(path).st_mode) == mode  # refused, not repaired


def test_a_symlink_is_refused_not_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(statedir.UnsafeStateDir, match=r"a symbolic link \(not followed\)"):
        statedir.open_dir(tmp_path / "link")


@needs_root
def test_a_directory_of_another_owner_is_refused(tmp_path):
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(statedir.UnsafeStateDir, match=f"owned by uid {NOBODY}, not 0"):
        statedir.open_dir(path)


def test_a_parent_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could rename our directory away and put theirs there
    with pytest.raises(statedir.UnsafeStateDir, match="writable by others .* and not sticky"):
        statedir.open_dir(shared / "state")
    assert not (shared / "state").exists()
    shared.chmod(0o1777)  # sticky, as /tmp: allowed
    os.close(statedir.open_dir(shared / "state"))


def test_entries_never_follow_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    with statedir.opened(tmp_path / "state") as fd:
        os.symlink(victim, "planted", dir_fd=fd)
        with pytest.raises(FileExistsError):
            statedir.write_new(fd, "planted", b"owned")   # O_EXCL: never over an existing name
        with pytest.raises(OSError):
            statedir.read(fd, "planted")                   # O_NOFOLLOW
        with pytest.raises(IolabError, match="a symlink"):
            with statedir.lock(fd, "planted"):
                pass
        statedir.replace(fd, "planted", b"new")          # the link itself is replaced
        assert statedir.read(fd, "planted") == b"new"
        os.mkfifo("fifo", dir_fd=fd)
        with pytest.raises(ValueError, match="not a regular file"):
            statedir.read(fd, "fifo")
    assert victim.read_text() == "precious\n"


def test_a_lock_held_elsewhere_is_waited_for_then_refused_naming_it(tmp_path):
    with statedir.opened(tmp_path / "state") as fd:
        with statedir.lock(fd, "held.lock", timeout=5, what="the huge-page pool"):
            with pytest.raises(IolabError, match=r"^the huge-page pool: timed out after 0.2 s waiting for the lock "):
                with statedir.lock(fd, "held.lock", timeout=0.2, what="the huge-page pool"):  # its own open file
                    pass
        with statedir.lock(fd, "held.lock", timeout=0.2):  # free again
            pass


def test_ledger_under_a_refused_directory_is_not_used(tmp_path, monkeypatch, caplog):
    bad = tmp_path / "owned"
    bad.mkdir()
    bad.chmod(0o755)
    monkeypatch.setenv(ownership.ENV, str(bad))
    assert ownership.record("file", str(tmp_path / "x.img"), undo="rm") is None
    assert "refused as iolab's state directory" in caplog.text
    assert list(bad.iterdir()) == []
    with pytest.raises(statedir.UnsafeStateDir):
        ownership.scan()


def test_cleanup_with_an_unsafe_ledger_says_so_in_one_line(tmp_path):
    bad = tmp_path / "owned"
    bad.mkdir()
    bad.chmod(0o777)
    done = subprocess.run(IOLAB + ["cleanup", "--dry-run", "--data", str(tmp_path / "data")], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, ownership.ENV: str(bad)}, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"iolab: error: {bad}: refused as iolab's state directory: mode 0777")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- /run/iolab itself

IN_PRIVATE_RUN = textwrap.dedent("""
    set -e
    mount -t tmpfs -o {opts} iolab-test {where}
    {setup}
    exec {python} -m iolab cleanup --dry-run --data {data}
""")


def _in_mount_namespace(tmp_path, opts: str, setup: str = "", where: str = statedir.ROOT_DIR):
    script = IN_PRIVATE_RUN.format(opts=opts, where=where, setup=setup, python=sys.executable,
                                   data=tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if k != ownership.ENV}
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def _ensure_run_iolab():
    os.close(statedir.open_dir(statedir.ROOT_DIR))  # the mount point (it is there on a machine iolab ran on)


@needs_root
@pytest.mark.parametrize("opts, why", [
    ("mode=0755", "mode 0755, must be 0700"),
    (f"mode=0700,uid={NOBODY}", f"owned by uid {NOBODY}, not 0"),
])
def test_run_iolab_with_the_wrong_mode_or_owner_is_refused(tmp_path, opts, why):
    _ensure_run_iolab()
    done = _in_mount_namespace(tmp_path, opts)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"iolab: error: /run/iolab: refused as iolab's state directory: {why} (iolab keeps its marks, locks "
        f"and ledger only where nobody else can write; remove it (or fix owner and mode) once you know who made it)")


@needs_root
def test_run_iolab_as_a_symlink_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    # a private /run in which /run/iolab is a link to a directory root owns, mode 0700: still refused
    done = _in_mount_namespace(tmp_path, "mode=0755", where="/run",
                               setup=f"ln -s {elsewhere} /run/iolab")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "/run/iolab: refused as iolab's state directory: a symbolic link (not followed)" in done.stderr
    assert list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------- another local user

def _as_nobody(home, body) -> dict:
    """Run ``body()`` in a child process that has become uid/gid nobody; returns what it returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.environ.pop(ownership.ENV, None)
            os.environ.pop("XDG_RUNTIME_DIR", None)
            os.environ["HOME"] = str(home)
            os.write(write, json.dumps(body()).encode())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write, json.dumps({"crash": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return json.loads(out)


def _attempts() -> dict:
    found = {}
    for name, path, flags in [
        ("ledger entry", "/run/iolab/owned/file-0000000000000000.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL),
        ("lock", "/run/iolab/hugepages.lock", os.O_RDWR),
        ("new mark", "/run/iolab/hugepages.99999", os.O_WRONLY | os.O_CREAT | os.O_EXCL),
    ]:
        try:
            os.close(os.open(path, flags | os.O_NOFOLLOW, 0o644))
            found[name] = "created"
        except OSError as exc:
            found[name] = exc.strerror
    try:
        os.close(statedir.open_dir("/run/iolab", create=False))
        found["open /run/iolab"] = "opened"
    except (OSError, IolabError) as exc:
        found["open /run/iolab"] = str(exc)
    path = ownership.record("file", "/var/tmp/iolab-nobody-test.img", undo="rm")
    found["own ledger"] = str(path)
    found["own ledger mode"] = f"{stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode):04o}" if path else None
    os.environ[ownership.ENV] = "/run/iolab/owned"  # pointing iolab at root's ledger does not help
    found["root's ledger"] = str(ownership.record("file", "/var/tmp/iolab-nobody-test2.img", undo="rm"))
    return found


@needs_root
def test_another_user_cannot_create_entries_and_gets_a_place_of_their_own(nobody_home):  # noqa: F811
    _ensure_run_iolab()
    (Path(statedir.ROOT_DIR) / "owned").mkdir(mode=0o700, exist_ok=True)
    found = _as_nobody(nobody_home, _attempts)
    assert "crash" not in found, found
    assert found["ledger entry"] == found["lock"] == found["new mark"] == "Permission denied"
    assert "cannot be entered by uid 65534 (mode 0700, owner uid 0)" in found["open /run/iolab"], found
    assert found["own ledger"].startswith(f"{nobody_home}/.cache/iolab/run/owned/file-"), found
    assert found["own ledger mode"] == "0700"
    assert found["root's ledger"] == "None"
    assert ownership.find("file", "/var/tmp/iolab-nobody-test2.img") is None


RECIPE = """
name: tiny-read
description: one 1-second read (state directory tests)
isolation: direct
defaults: {size: 4M, runtime: 1, repeat: 1}
fio: {ioengine: psync, direct: 1}
tests:
  - name: seqread
    rw: [read]
    bs: 1M
"""


@needs_root
def test_a_run_refuses_to_start_when_run_iolab_is_not_private(tmp_path):
    _ensure_run_iolab()
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(RECIPE)
    (tmp_path / "target").mkdir()
    script = (f"mount -t tmpfs -o mode=0775 iolab-test /run/iolab && exec {sys.executable} -m iolab run {recipe} "
              f"--target {tmp_path / 'target'} --data {tmp_path / 'data'} --no-progress")
    env = {k: v for k, v in os.environ.items() if k != ownership.ENV}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "iolab: error: /run/iolab: refused as iolab's state directory: mode 0775, must be 0700"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists() and list((tmp_path / "target").iterdir()) == []


@needs_root
def test_a_link_on_the_way_is_judged_where_it_leads(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "via").symlink_to(shared)  # root's link, but into a directory anyone may change
    with pytest.raises(statedir.UnsafeStateDir, match=f"{shared} is writable by others"):
        statedir.open_dir(tmp_path / "via" / "state")
    theirs = tmp_path / "theirs"
    os.symlink(tmp_path / "a", theirs)
    os.lchown(theirs, NOBODY, NOBODY)
    with pytest.raises(statedir.UnsafeStateDir, match=f"{theirs} is a symlink of uid {NOBODY}"):
        statedir.open_dir(theirs / "state")
    assert not (tmp_path / "a").exists()
    # root's link to a safe place (as Fedora's /home -> /var/home): followed, the place judged by descriptor
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "mine").symlink_to(tmp_path / "real")
    os.close(statedir.open_dir(tmp_path / "mine" / "state"))
    assert stat.S_IMODE(os.lstat(tmp_path / "real" / "state").st_mode) == 0o700
