"""A throw-away MariaDB server on a target, for the sqlbench engine.

``Server(parent, log_dir=..., buffer_pool=...)`` lays out ``<parent>/iolab-sqlbench/``
(``data/`` made by ``mariadb-install-db``, or copied from the pristine one an earlier run's
install-db made for the same version and options: :mod:`iolab.classic.mariadb_pristine`;
the socket and pid file beside it),
starts ``mariadbd`` through a caller's ``popen`` (the sandbox's: the server
then runs inside the memory-limited cgroup and under the device throttles) on
127.0.0.1 and a free TCP port (a port in use: another is picked), and stops
(SIGTERM = normal shutdown, then SIGKILL) and removes everything afterwards.

The server runs as the ``mysql`` account when iolab is root (mariadbd refuses
root unless told otherwise; we never tell it), through ``setpriv`` like
:mod:`iolab.classic.pgcluster`. The tables' engine is the caller's
(``settings={"default-storage-engine": ...}``; the sqlbench recipe's default is
MyISAM, the 2013 article's); for InnoDB the settings mirror a MySQL 5.5: one
``fsync`` per commit (``innodb_flush_log_at_trx_commit=1``), buffered data
files flushed with fsync (``innodb_flush_method=fsync``), one ``.ibd`` per
table. No binary log; the buffer pool is sized by the caller to fit the
memory limit.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from iolab.core import ownership, processes, procstat
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.classic import dbserver
from iolab.classic import mariadb_pristine as pristine
from iolab.classic.dbserver import Account, ServerLifecycle, tail

log = logging.getLogger(__name__)

SERVER_DIR = "iolab-sqlbench"
#: The ownership ledger's kind for a server directory (recorded once iolab.core.ownership knows the kind).
LEDGER_KIND = "mariadb"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
PORT_TRIES = 5
INSTALL_HINT = ("install it with: apt-get install mariadb-server (or run tools/install-system-deps.sh); "
                "the server is never started as a system service by iolab")
SERVER_NAMES = ("mariadbd", "mysqld")
INSTALL_DB_NAMES = ("mariadb-install-db", "mysql_install_db")
SEARCH = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")


def _which(names) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SEARCH)
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def find_binaries() -> dict:
    """``{"server": mariadbd, "install_db": mariadb-install-db, "version": ...}``; a one-line error if missing."""
    server, install_db = _which(SERVER_NAMES), _which(INSTALL_DB_NAMES)
    if not server or not install_db:
        missing = "mariadbd" if not server else "mariadb-install-db"
        raise IolabError(f"MariaDB is not installed ({missing} not found on PATH or in /usr/sbin)",
                         context="sqlbench", hint=INSTALL_HINT)
    proc = subprocess.run([server, "--version"], capture_output=True, text=True)
    return {"server": server, "install_db": install_db, "version": (proc.stdout or proc.stderr).strip()}


def server_account(name: str | None = None) -> Account:
    """Who runs mariadbd: ourselves unless root; as root ``name``, else ``mysql``, else ``nobody``."""
    return dbserver.server_account(name, candidates=("mysql", "nobody"), server="mariadbd",
                                   context="sqlbench: options.user", only_root_chooses=False)


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(preferred: int | None = None) -> int:
    """``preferred`` when nothing listens there, else one the kernel hands out."""
    if preferred and port_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_group(argv, *, cwd) -> subprocess.CompletedProcess:
    """Run ``argv`` in a process group of its own; interrupted: the whole group is killed.

    ``mariadb-install-db`` is a shell script that starts ``mariadbd --bootstrap``: killing
    only the script (what subprocess.run does on Ctrl-C) would leave that server writing
    into the directory being removed.
    """
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        processes.end(proc, first=[], group=True)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class Server(ServerLifecycle):
    """One server under ``parent/iolab-sqlbench``; see the module docstring."""

    def __init__(self, parent, *, log_dir, buffer_pool: int, binaries: dict | None = None,
                 account: Account | None = None, port: int | None = None, settings: dict | None = None):
        self.root = Path(parent) / SERVER_DIR
        self.data = self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.binaries = binaries or find_binaries()
        self.account = account or server_account()
        self.log_dir = Path(log_dir)
        self.error_log = self.root / "mariadb.err"  # the server's account writes it; copied to log_dir/mariadb.log
        self.buffer_pool = int(buffer_pool)
        self.preferred_port = port
        self.port: int | None = None
        self.settings = dict(settings or {})
        self.proc: subprocess.Popen | None = None
        self.created = False
        self.ports_tried: list[int] = []
        # the workloads' connections: the Unix socket, unless its path is too long for sun_path
        self.via = "unix" if len(os.fsencode(str(self.socket))) < 108 else "tcp"

    # ---- creation
    def create(self) -> None:
        if self.root.exists():
            raise IolabError("a server directory from an earlier run (or a running server) is in the way",
                             context=str(self.root), hint="remove it (iolab never deletes what it did not create)")
        try:
            self.root.mkdir(mode=0o750)
        except OSError as exc:
            raise IolabError(f"cannot create the server directory: {exc.strerror}", context=str(self.root)) from exc
        self.created = True
        if LEDGER_KIND in ownership.KINDS:  # a killed iolab's server can then be reaped (undo_stale)
            ownership.record(LEDGER_KIND, str(self.root), undo=f"kill mariadbd of {self.data}; rm -r {self.root}",
                             undone_by=__name__,
                             data=str(self.data))
        os.chown(self.root, self.account.uid, self.account.gid)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # --tmpdir: the bootstrap server's temporary files go beside its data, not in the caller's $TMPDIR,
        # which the server's account may not write (the lab VM's /var/tmp/tmp, made by root: InnoDB aborts)
        argv = self.account.wrap([self.binaries["install_db"], "--no-defaults", f"--datadir={self.data}",
                                  "--auth-root-authentication-method=normal", "--skip-test-db",
                                  "--skip-name-resolve", f"--tmpdir={self.root}"])
        key = pristine.Key.of(self.binaries["version"], argv)
        output = self.log_dir / "install-db.txt"
        if self._copy_pristine(key, output):
            return
        started = time.monotonic()
        proc = _run_group(argv, cwd=self.root)
        output.write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}[exit {proc.returncode}]\n")
        if proc.returncode != 0:
            raise IolabError(f"mariadb-install-db exited with {proc.returncode}: {_first_errors(output)}",
                             context=str(self.data), hint=f"its output is {output}")
        seconds = time.monotonic() - started
        log.info("mariadb-install-db made %s in %.2f s", self.data, seconds)
        entry = pristine.store(key, self.data, install_output=output, seconds=seconds, argv=argv)
        if entry is not None:
            with open(output, "a") as f:
                f.write(f"# ran in {seconds:.2f} s; the data directory (before its server started) is the pristine "
                        f"cache entry {entry.path} for later runs\n")

    def _copy_pristine(self, key, output: Path) -> bool:
        """The data directory copied from the pristine cache (see :mod:`iolab.classic.mariadb_pristine`),
        ``output`` saying so; False (why logged at INFO) when there is no cache, no usable entry or the copy
        fails: install-db then runs (and its copy replaces a damaged entry)."""
        try:
            entry = pristine.lookup(key)
        except pristine.NoCache as exc:
            log.info("no pristine MariaDB data directory to copy: %s", exc)
            return False
        except pristine.Unusable as exc:
            log.info("not using the pristine cache entry %s: %s (this run's install-db replaces it)", key.path(),
                     exc)
            return False
        if entry is None:
            log.info("no pristine MariaDB data directory cached yet for this version (%s)", key.path())
            return False
        started = time.monotonic()
        try:
            pristine.copy_out(entry, self.data, uid=self.account.uid, gid=self.account.gid)
        except (OSError, pristine.Unusable) as exc:  # Unusable: the entry changed since its lookup
            log.info("copying the pristine data directory %s to %s failed (%s); running mariadb-install-db",
                     entry.data, self.data, exc)
            shutil.rmtree(self.data, ignore_errors=True)
            return False
        seconds = time.monotonic() - started
        log.info("copied the pristine data directory %s to %s in %.2f s (mariadb-install-db not run)", entry.data,
                 self.data, seconds)
        output.write_text(pristine.describe(entry, seconds) + entry.output)
        return True

    def argv(self, port: int) -> list[str]:
        options = {"datadir": self.data, "socket": self.socket, "pid-file": self.root / "mariadbd.pid",
                   "port": port, "bind-address": "127.0.0.1", "log-error": self.error_log,
                   "skip-name-resolve": None, "skip-log-bin": None, "default-storage-engine": "InnoDB",
                   "innodb-buffer-pool-size": self.buffer_pool, "innodb-log-file-size": "48M",
                   "innodb-flush-log-at-trx-commit": 1, "innodb-flush-method": "fsync",
                   "innodb-file-per-table": 1, "max-connections": 50, "performance-schema": "OFF",
                   "query-cache-type": 0, "query-cache-size": 0, "tmpdir": self.root, **self.settings}
        return [self.binaries["server"], "--no-defaults",
                *[f"--{k}" if v is None else f"--{k}={v}" for k, v in options.items()]]

    def start(self, *, popen=subprocess.Popen) -> None:
        """Start mariadbd and wait until it answers; a port taken meanwhile: another one."""
        for _ in range(PORT_TRIES):
            self.port = free_port(self.preferred_port if not self.ports_tried else None)
            self.ports_tried.append(self.port)
            argv = self.account.wrap(self.argv(self.port))
            offset = self.error_log.stat().st_size if self.error_log.exists() else 0
            self.proc = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=self.root, start_new_session=True, env={"PATH": "/usr/sbin:/usr/bin:/bin",
                                                                          "LC_ALL": "C", "TZ": "UTC"})
            log.info("mariadbd started (PID %d) on 127.0.0.1:%d, data directory %s", self.proc.pid, self.port,
                     self.data)
            if self._wait_ready(offset):
                return
            log.warning("port %d was taken before mariadbd bound it; trying another", self.port)
        raise IolabError(f"no free TCP port after {PORT_TRIES} tries ({self.ports_tried})", context="sqlbench")

    def _wait_ready(self, offset: int) -> bool:
        """True once mariadbd answers, False when its port was taken (it exited saying so)."""
        error = None

        def answers() -> str | None:
            nonlocal error
            if self.proc.poll() is not None:
                text = self._log_since(offset)
                if "Address already in use" in text or "Do you already have another" in text:
                    return "port taken"
                raise IolabError(f"mariadbd exited with {self.proc.returncode} while starting: {self.last_words()}",
                                 context=str(self.data), hint=f"its log is kept as {self.log_dir / 'mariadb.log'}")
            try:
                self.connect(connect_timeout=2).close()
                return "up"
            except Exception as exc:  # pymysql.err.OperationalError while it starts
                error = exc
        try:
            return wait_until(answers, START_TIMEOUT_S, interval=0.1, context=f"127.0.0.1:{self.port}",
                              what=lambda: f"mariadbd to accept connections ({error}): {self.last_words()}") == "up"
        except IolabError:
            self.stop()  # (nothing to do when it has exited)
            raise

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.error_log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def last_words(self, lines: int = 5) -> str:
        """The error log's last ERROR lines, else its last lines."""
        return tail(self.error_log, lines, pattern=r"\[(ERROR|FATAL)\]|Aborting|No space") or "(no log)"

    def connect(self, *, database: str | None = None, connect_timeout: float = 10, via: str = "tcp"):
        import pymysql
        where = {"host": "127.0.0.1", "port": self.port} if via == "tcp" else {"unix_socket": str(self.socket)}
        # no TLS on the loopback: PyMySQL would build an SSL context (CA paths) at every connect (~0.1 s)
        return pymysql.connect(user="root", password="", database=database, autocommit=True, ssl_disabled=True,
                               connect_timeout=connect_timeout, **where)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise IolabError(f"mariadbd stopped unexpectedly (exit {self.proc.returncode}): {self.last_words()}",
                             context=str(self.data))

    def io_counters(self) -> dict:
        """The server process's /proc/<pid>/io (read_bytes, write_bytes, syscr, syscw), {} when gone."""
        if not self.running():
            return {}
        try:
            text = Path(f"/proc/{self.proc.pid}/io").read_text()
        except OSError:
            return {}
        return {k.strip(): int(v) for k, v in (line.split(":") for line in text.splitlines())}

    # ---- clean-up
    def _orphan(self) -> int | None:
        """The server's PID from its pid file when we lost its handle (interrupted inside popen), if it is ours."""
        try:
            pid = int((self.root / "mariadbd.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if f"--datadir={self.data}" in (procstat.argv_of(pid) or []) else None

    def stop(self) -> list[str]:
        """SIGTERM (mariadbd's normal shutdown), SIGKILL after :data:`STOP_TIMEOUT_S`; the steps taken."""
        if self.proc is None and self.created:
            pid = self._orphan()
            if pid is not None:
                log.warning("stopping mariadbd (PID %d) found by its pid file", pid)
                return [f"{step} (pid file)" for step in processes.end(pid, first=[], kill_wait=STOP_TIMEOUT_S)]
        return processes.end(self.proc, grace=STOP_TIMEOUT_S) if self.proc is not None else []

    def remove(self) -> None:
        if self.created and self.error_log.exists():
            with contextlib.suppress(OSError):
                self.log_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.error_log, self.log_dir / "mariadb.log")
        if self.created and self.root.exists():
            shutil.rmtree(self.root)
            log.info("removed server directory %s", self.root)
        if self.created and LEDGER_KIND in ownership.KINDS:
            ownership.forget(LEDGER_KIND, str(self.root))
        self.created = False

    def describe(self) -> dict:
        return {"root": str(self.root), "data_directory": str(self.data), "host": "127.0.0.1", "port": self.port,
                "ports_tried": self.ports_tried, "socket": str(self.socket), "clients_via": self.via,
                "user": self.account.name,
                "buffer_pool_bytes": self.buffer_pool, "server": self.binaries["server"],
                "version": self.binaries["version"], "argv": self.argv(self.port or 0)}


def _first_errors(output: Path, count: int = 2) -> str:
    """What made ``mariadb-install-db`` fail: the first ERROR lines of its output (the cause, e.g. InnoDB's
    "failed with error 28"; the last ones are consequences and its last lines boilerplate), else its end."""
    lines = [line.strip() for line in output.read_text(errors="replace").splitlines()[1:-1] if line.strip()]
    errors = [line for line in lines if re.search(r"\[(ERROR|FATAL)\]", line)]
    if not errors:  # (the file's first line is the command, its last the exit status)
        return " | ".join(lines[-3:]) or "no output"
    more = f" (and {len(errors) - count} more ERROR lines)" if len(errors) > count else ""
    return " | ".join(errors[:count]) + more


def undo_stale(root: str, details: dict, *, dry_run: bool) -> str | None:
    """Kill the mariadbd of a server directory whose iolab process is gone, then remove the directory.

    For the reaper (:mod:`iolab.engine.reaper`), once ``mariadb`` is one of
    :data:`iolab.core.ownership.KINDS`; the data are throw-away, so SIGKILL is enough.
    """
    root_path = Path(root)
    if not root_path.exists():
        return None
    server = Server.__new__(Server)
    server.root, server.data, server.created = root_path, Path(details.get("data") or root_path / "data"), True
    pid = server._orphan()
    if dry_run:
        return f"would {'kill mariadbd (PID %d) and ' % pid if pid else ''}remove server directory {root}"
    if pid is not None:
        processes.end(pid, first=[], kill_wait=STOP_TIMEOUT_S)
    shutil.rmtree(root_path)
    return f"{'killed mariadbd (PID %d) and ' % pid if pid else ''}removed server directory {root}"
