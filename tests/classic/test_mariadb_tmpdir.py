"""A throw-away MariaDB is made whatever $TMPDIR the caller has.

Found in the lab VM, whose $TMPDIR (/var/tmp/tmp) is made by root, 0755:
mariadb-install-db's bootstrap server, running as the mysql account, put
InnoDB's temporary files in $TMPDIR, could not, and the sqlbench recipe
failed before its first test (an sqlbench run in the lab VM). Here the same
on the host, with a $TMPDIR only root may write.
"""
import shutil
import tempfile
from pathlib import Path

import pytest

from iolab.classic import mariadb

from cli_helpers import database_server
from test_sqlbench import mariadbd_processes

BINARIES, MISSING, needs_root, needs_mariadb = database_server(mariadb.find_binaries, account="mysql")


@needs_root
@needs_mariadb
def test_server_is_created_when_the_account_cannot_write_tmpdir(tmp_path, monkeypatch):
    private = tmp_path / "root-only-tmp"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    target = Path(tempfile.mkdtemp(prefix="iolab-sqltest-", dir="/var/tmp"))
    target.chmod(0o755)
    server = mariadb.Server(target, log_dir=tmp_path / "log", buffer_pool=16 * 1024**2)
    assert server.account.uid != 0  # the server runs as the mysql account, which cannot write $TMPDIR
    try:
        server.create()
        assert (server.data / "mysql").is_dir()
        assert list(private.iterdir()) == []
    finally:
        server.destroy()
        shutil.rmtree(target, ignore_errors=True)
    assert not server.root.exists() and mariadbd_processes(target) == []
