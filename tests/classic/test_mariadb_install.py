"""Making a throw-away MariaDB (mariadb-install-db): whatever $TMPDIR the caller has, and a failure says why.

The $TMPDIR case was found in the lab VM, whose $TMPDIR (/var/tmp/tmp) is made by root, 0755:
mariadb-install-db's bootstrap server, running as the mysql account, put
InnoDB's temporary files in $TMPDIR, could not, and the sqlbench recipe
failed before its first test (an sqlbench run in the lab VM). Here the same
on the host, with a $TMPDIR only root may write.
"""
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.classic import mariadb
from iolab.core.errors import IolabError

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


@needs_root
@needs_mariadb
def test_a_failed_install_quotes_its_cause_not_its_boilerplate(tmp_path):
    """A target with no room for InnoDB's 12 MiB ibdata1: the error quotes InnoDB's first ERROR lines (error 28),
    not the consequences after it nor mariadb-install-db's closing 'Please check all of the above'."""
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
