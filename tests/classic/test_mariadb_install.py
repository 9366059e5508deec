"""Making a throw-away MariaDB (mariadb-install-db): whatever $TMPDIR the caller has, and a failure says why.

The $TMPDIR case was found in the lab VM, whose $TMPDIR (/var/tmp/tmp) is made by root, 0755:
mariadb-install-db's bootstrap server, running as the mysql account, put
InnoDB's temporary files in $TMPDIR, could not, and the sqlbench recipe
failed before its first test (an sqlbench run in the lab VM). Here the same
on the host, with a $TMPDIR only root may write.

The pristine cache (iolab.classic.mariadb_pristine): mariadb-install-db runs once per server version and
install options; later servers get a copy of its data directory. Whether install-db ran is counted by a
wrapper around the real one (``counting_install_db``), never judged by time. Each test has a cache of its
own ($IOLAB_CACHE_DIR under tmp_path), not the session's.
"""
import filecmp
import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.classic import mariadb, mariadb_pristine
from iolab.core.errors import IolabError

from cli_helpers import database_server
from test_sqlbench import mariadbd_processes

BINARIES, MISSING, needs_root, needs_mariadb = database_server(mariadb.find_binaries, account="mysql")


def test_copy_writes_data_skips_holes_and_allocates_only_when_asked(tmp_path):
    """The copy is byte for byte (data, explicit zeros, holes, a tail shorter than a chunk); onto a target
    every block is allocated (as install-db's fallocate leaves InnoDB's files), into the cache holes stay."""
    src = tmp_path / "src"
    with open(src, "wb") as f:
        f.write(b"head" * 1000)
        f.seek(3 << 20)
        f.write(bytes(2 << 20))  # zeros written out: data to SEEK_DATA, skipped by the copy
        f.write(b"\x01" * 4096)
        f.seek(9 << 20)  # a hole
        f.write(b"tail" + bytes(100))
    size = src.stat().st_size
    for allocate in (True, False):
        dst = tmp_path / f"dst-{allocate}"
        mariadb_pristine.copy_file(src, dst, allocate=allocate)
        assert dst.stat().st_size == size and dst.read_bytes() == src.read_bytes()
        allocated = dst.stat().st_blocks * 512
        assert allocated >= size if allocate else allocated < 1 << 20, (allocate, allocated)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty pristine cache for this test (root's, 0700 like tmp_path)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("IOLAB_CACHE_DIR", str(path))
    return path


class Counting(dict):
    """``binaries`` whose install_db is the counting wrapper; ``.runs()``: how often it ran."""
    counter: Path

    def runs(self) -> int:
        return len(self.counter.read_text().splitlines())


@pytest.fixture(scope="module")
def install_db_wrapper():
    """A wrapper around the real install_db that counts its runs, then execs it: one for the module, so that
    the pristine cache key (the install argv holds the wrapper's path) is the same in every test."""
    where = Path(tempfile.mkdtemp(prefix="iolab-installdb-", dir="/var/tmp"))
    where.chmod(0o755)
    counter = where / "runs"
    counter.touch(mode=0o666)
    counter.chmod(0o666)  # the wrapper runs as the mysql account
    wrapper = where / "install-db"
    wrapper.write_text(f"#!/bin/sh\necho run >> {counter}\nexec {BINARIES['install_db']} \"$@\"\n")
    wrapper.chmod(0o755)
    try:
        yield wrapper
    finally:
        shutil.rmtree(where, ignore_errors=True)


def counting(wrapper: Path) -> Counting:
    binaries = Counting(BINARIES, install_db=str(wrapper))
    binaries.counter = wrapper.with_name("runs")
    return binaries


@pytest.fixture
def counting_install_db(install_db_wrapper):
    """``binaries`` whose install_db is the counting wrapper, its count at 0 for this test; ``.runs()``."""
    binaries = counting(install_db_wrapper)
    binaries.counter.write_text("")
    return binaries


@pytest.fixture(scope="module")
def pristine_seed(install_db_wrapper, tmp_path_factory):
    """A pristine cache holding the one entry the wrapper's install makes: made once for the module, by the same
    ``make(...).destroy()`` the tests below would each start with (install-db costs seconds per run)."""
    cache = tmp_path_factory.mktemp("pristine-seed") / "cache"
    target = Path(tempfile.mkdtemp(prefix="iolab-sqltest-", dir="/var/tmp"))
    target.chmod(0o755)
    binaries = counting(install_db_wrapper)
    before = binaries.runs()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IOLAB_CACHE_DIR", str(cache))
        try:
            make(target, tmp_path_factory.mktemp("pristine-seed-log"), binaries).destroy()
        finally:
            shutil.rmtree(target, ignore_errors=True)
    assert binaries.runs() == before + 1 and len(entries(cache)) == 1
    return cache


@pytest.fixture
def seeded_cache(cache, counting_install_db, pristine_seed):
    """This test's cache as ``make(target, ..., counting_install_db).destroy()`` leaves it: a copy of the
    module's seed (modes, owner and holes kept), and the one install-db run that made it counted."""
    subprocess.run(["cp", "-a", "--sparse=always", str(pristine_seed), str(cache)], check=True)
    counting_install_db.counter.write_text("run\n")
    return cache


def make(target, log_dir, binaries) -> mariadb.Server:
    """A created server (its data directory made); destroyed by the caller."""
    server = mariadb.Server(target, log_dir=log_dir, buffer_pool=16 * 1024**2, binaries=binaries)
    try:
        server.create()
    except BaseException:
        server.destroy()
        raise
    return server


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "mariadb").iterdir()) if (cache / "mariadb").exists() else []


def install_log(server) -> str:
    return (server.log_dir / "install-db.txt").read_text()


def serves_queries(server) -> None:
    """The server starts on its data directory, root logs in, and an InnoDB table takes a row and gives it back."""
    server.start()
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM mysql.global_priv WHERE User='root'")
            assert cur.fetchone()[0] >= 1
            cur.execute("CREATE DATABASE t")
            cur.execute("CREATE TABLE t.x (a INT PRIMARY KEY, b VARCHAR(20)) ENGINE=InnoDB")
            cur.execute("INSERT INTO t.x VALUES (1, 'pristine')")
            cur.execute("SELECT b FROM t.x WHERE a=1")
            assert cur.fetchone()[0] == "pristine"
    finally:
        conn.close()


@needs_root
@needs_mariadb
def test_server_is_created_when_the_account_cannot_write_tmpdir(tmp_path, monkeypatch, cache, target):
    private = tmp_path / "root-only-tmp"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    server = mariadb.Server(target, log_dir=tmp_path / "log", buffer_pool=16 * 1024**2)
    assert server.account.uid != 0  # the server runs as the mysql account, which cannot write $TMPDIR
    try:
        server.create()
        assert (server.data / "mysql").is_dir()
        assert install_log(server).startswith("$ ")  # install-db ran (an empty cache), with its --tmpdir
        assert list(private.iterdir()) == []
    finally:
        server.destroy()
    assert not server.root.exists() and mariadbd_processes(target) == []


@needs_root
@needs_mariadb
def test_second_server_is_copied_from_the_cache_and_works_without_install_db(tmp_path, cache, target,
                                                                             counting_install_db):
    first = make(target, tmp_path / "log1", counting_install_db)
    try:
        assert counting_install_db.runs() == 1
        installed = mariadb_pristine.manifest(first.data)
        [key] = entries(cache)
    finally:
        first.destroy()
    entry = cache / "mariadb" / key
    # the root account's tables: nobody but root may enter any directory of the cache
    for path in [cache / "mariadb", entry, *(p for p in entry.rglob("*") if p.is_dir())]:
        assert path.stat().st_mode & 0o077 == 0 and path.stat().st_uid == 0, path
    second = mariadb.Server(target, log_dir=tmp_path / "log2", buffer_pool=16 * 1024**2,
                            binaries=counting_install_db)
    try:
        second.create()
        assert counting_install_db.runs() == 1  # install-db did not run again
        text = install_log(second)
        assert text.startswith("# mariadb-install-db was not run") and str(entry) in text, text
        assert "$ " in text and "[exit 0]" in text  # the install that made the entry, quoted
        # install-db's files, sizes and modes, owned by the server's account as install-db leaves them
        assert mariadb_pristine.manifest(second.data) == installed
        for path in (entry / "data").rglob("*"):
            if path.is_file():
                assert filecmp.cmp(path, second.data / path.relative_to(entry / "data"), shallow=False), path
        assert {p.stat().st_uid for p in [second.data, *second.data.rglob("*")]} == {second.account.uid}
        serves_queries(second)
    finally:
        second.destroy()
    assert not second.root.exists() and mariadbd_processes(target) == []


@needs_root
@needs_mariadb
def test_entries_are_keyed_by_server_version(tmp_path, cache, target, counting_install_db):
    for n, version in enumerate(["MariaDB 10.11.19 as found", "MariaDB 11.4.2 after an upgrade",
                                 "MariaDB 10.11.19 as found"]):
        make(target, tmp_path / f"log{n}", dict(counting_install_db, version=version)).destroy()
    assert counting_install_db.runs() == 2  # the third found the first's entry
    assert len(entries(cache)) == 2
    assert (tmp_path / "log2" / "install-db.txt").read_text().startswith("# mariadb-install-db was not run")


@needs_root
@needs_mariadb
def test_unwritable_cache_falls_back_to_install_db(tmp_path, monkeypatch, target, counting_install_db, caplog):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1M", "tmpfs", str(readonly)], check=True)
    monkeypatch.setenv("IOLAB_CACHE_DIR", str(readonly / "iolab"))
    caplog.set_level(logging.INFO, logger="iolab.classic.mariadb_pristine")
    try:
        for n in range(2):
            server = make(target, tmp_path / f"log{n}", counting_install_db)
            try:
                assert install_log(server).startswith("$ ")
                serves_queries(server)
            finally:
                server.destroy()
    finally:
        subprocess.run(["umount", str(readonly)], check=True)
    assert counting_install_db.runs() == 2
    assert "is not cached (" in caplog.text and "Read-only file system" in caplog.text, caplog.text
    assert mariadbd_processes(target) == []


@needs_root
@needs_mariadb
@pytest.mark.parametrize("damage", ["marker removed", "table file truncated", "file missing"])
def test_a_damaged_entry_is_not_used(tmp_path, cache, target, counting_install_db, seeded_cache, caplog, damage):
    [key] = entries(cache)  # the seeded entry: one install-db run so far
    entry = cache / "mariadb" / key
    if damage == "marker removed":
        (entry / "entry.json").unlink()
    elif damage == "table file truncated":
        os.truncate(entry / "data" / "mysql" / "global_priv.MAD", 100)
    else:
        (entry / "data" / "ibdata1").unlink()
    caplog.set_level(logging.INFO, logger="iolab.classic.mariadb")
    server = make(target, tmp_path / "log1", counting_install_db)
    try:
        assert counting_install_db.runs() == 2
        assert install_log(server).startswith("$ ")
        serves_queries(server)
    finally:
        server.destroy()
    assert f"not using the pristine cache entry {entry}" in caplog.text
    assert mariadbd_processes(target) == []


@needs_root
@needs_mariadb
@pytest.mark.parametrize("cached", [False, True])
def test_a_failed_install_quotes_its_cause_not_its_boilerplate(tmp_path, cache, cached):
    """A target with no room for InnoDB's 12 MiB ibdata1: the error quotes InnoDB's first ERROR lines (error 28),
    not the consequences after it nor mariadb-install-db's closing 'Please check all of the above'.
    With a pristine entry cached, its copy fails for want of room too, and install-db says why as before."""
    if cached:
        with tempfile.TemporaryDirectory(prefix="iolab-sqltest-", dir="/var/tmp") as roomy:
            os.chmod(roomy, 0o755)
            make(roomy, tmp_path / "log0", BINARIES).destroy()
        assert len(entries(cache)) == 1
    target = Path(tempfile.mkdtemp(prefix="iolab-sqltest-", dir="/var/tmp"))  # the mysql account reaches it
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M,mode=755", "tmpfs", str(target)], check=True)
    server = mariadb.Server(target, log_dir=tmp_path / "log", buffer_pool=16 * 1024**2)
    try:
        with pytest.raises(IolabError) as failed:
            server.create()
    finally:
        server.destroy()
        subprocess.run(["umount", str(target)], check=True)
        target.rmdir()
    message = failed.value.message
    assert message.startswith("mariadb-install-db exited with 1: ") and "error 28" in message, message
    assert "Please check" not in message and "more ERROR lines" in message
    assert failed.value.hint == f"its output is {tmp_path / 'log' / 'install-db.txt'}"
    assert mariadbd_processes(target) == []
    assert len(entries(cache)) == int(cached)  # a failed install is never cached


@needs_root
@needs_mariadb
def test_no_cache_directory_falls_back_to_install_db(tmp_path, monkeypatch, target, counting_install_db, caplog):
    """No $IOLAB_CACHE_DIR, no $XDG_CACHE_HOME, no $HOME and no passwd entry (Path.home raising stands for
    the latter, which root cannot be made into): every run installs, logged, and none fails."""
    for name in ("IOLAB_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def homeless(cls=None):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", classmethod(homeless))
    monkeypatch.chdir(tmp_path)  # a cache made relative to the working directory would show here
    caplog.set_level(logging.INFO, logger="iolab.classic")
    for n in range(2):
        server = make(target, tmp_path / f"log{n}", counting_install_db)
        try:
            assert counting_install_db.runs() == n + 1
            assert install_log(server).startswith("$ ") and "pristine cache entry" not in install_log(server)
            if n == 0:
                serves_queries(server)
        finally:
            server.destroy()
    assert "no pristine MariaDB data directory to copy: IOLAB_CACHE_DIR and XDG_CACHE_HOME are unset" in caplog.text
    assert "is not cached (IOLAB_CACHE_DIR and XDG_CACHE_HOME are unset" in caplog.text, caplog.text
    assert "Could not determine home directory" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log0", "log1"]
    assert mariadbd_processes(target) == []


@needs_root
@needs_mariadb
@pytest.mark.parametrize("damage", ["table file truncated", "of another format"])
def test_a_damaged_entry_is_replaced_by_the_next_install(tmp_path, cache, target, counting_install_db, seeded_cache,
                                                         caplog, damage):
    """A damaged entry costs one install-db: its fresh copy takes the entry's place, and the run after copies."""
    [key] = entries(cache)  # the seeded entry: one install-db run so far
    entry = cache / "mariadb" / key
    if damage == "table file truncated":
        os.truncate(entry / "data" / "mysql" / "global_priv.MAD", 100)
    else:  # as an older iolab's entry would be
        meta = json.loads((entry / "entry.json").read_text())
        (entry / "entry.json").write_text(json.dumps(dict(meta, format=0)))
    caplog.set_level(logging.INFO, logger="iolab.classic")
    second = make(target, tmp_path / "log1", counting_install_db)
    try:
        assert counting_install_db.runs() == 2
        assert install_log(second).startswith("$ ") and f"is the pristine cache entry {entry}" in install_log(second)
        installed = mariadb_pristine.manifest(second.data)
    finally:
        second.destroy()
    assert f"not using the pristine cache entry {entry}" in caplog.text  # the damage was seen
    assert f"replaced the damaged pristine cache entry {entry}" in caplog.text, caplog.text
    assert entries(cache) == [key]  # the damaged one removed, no temporary sibling left
    third = make(target, tmp_path / "log2", counting_install_db)
    try:
        assert counting_install_db.runs() == 2  # copied: install-db did not run again
        assert install_log(third).startswith("# mariadb-install-db was not run") and str(entry) in install_log(third)
        assert mariadb_pristine.manifest(third.data) == installed
        serves_queries(third)
    finally:
        third.destroy()
    assert mariadbd_processes(target) == []
