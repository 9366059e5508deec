"""A throw-away PostgreSQL cluster on the device under test, for :mod:`iolab.classic.pgbench`.

Life cycle (every step checked, every failure an :class:`IolabError` that
quotes PostgreSQL's own message)::

    binaries = find_binaries()                      # initdb, pg_ctl, postgres, pgbench, psql
    cluster = Cluster(root, binaries, log_dir=run_dir / "raw")
    try:
        cluster.create(settings)                    # initdb + postgresql.conf
        cluster.start(popen=sandbox.popen)          # postgres in the sandbox's cgroup
        cluster.sql("CHECKPOINT")
    finally:
        cluster.destroy()                           # stop (fast, immediate, kill), remove the directory

``initdb`` runs with ``--no-sync`` (the cluster is thrown away after the run),
and one ``sync -f`` of the target's file system writes its files before
anything is measured: the same pages reach the disk, without a flush per file.

Layout on the target: ``<target>/iolab-pgbench/`` (mode 0700, owned by the
server's account) holds the data directory ``data/`` and the Unix socket
``.s.PGSQL.5432`` with its lock file. The server listens on no TCP port
(``listen_addresses = ''``), so it cannot clash with a PostgreSQL already
running on the machine; two runs on the same target do clash, on purpose,
and the second one says so.

PostgreSQL refuses to run as root: as root, ``initdb``, ``postgres`` and
``pg_ctl`` run as the ``postgres`` account (``nobody`` when there is none)
through ``setpriv`` (util-linux), which drops privileges *after* the sandbox
has placed the process in its cgroup. The account must be able to reach the
target directory (every parent searchable by others). Not root: everything
runs as the calling user. Clients (``psql``, ``pgbench``) connect as the
database superuser ``postgres`` with trust authentication over the socket.

Debian packages the server programs in ``postgresql-<major>`` under
``/usr/lib/postgresql/<major>/bin`` (not on ``PATH``); they are looked for
there after ``PATH``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import logging
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from iolab.core import ownership, processes, procstat
from iolab.core.errors import IolabError
from iolab.classic import dbserver
from iolab.classic.dbserver import Account, ServerLifecycle, tail
from iolab.core.deadline import wait_until

log = logging.getLogger(__name__)

PROGRAMS = ("initdb", "pg_ctl", "postgres", "pgbench", "psql")
#: Where Debian/Ubuntu install the server programs (one directory per major version).
DEBIAN_BINDIRS = "/usr/lib/postgresql/*/bin"
INSTALL_HINT = ("install it with: apt-get install postgresql "
                "(Debian 12: the postgresql-15 package holds initdb, postgres and pgbench)")
CLUSTER_DIR = "iolab-pgbench"
PORT = 5432
SUPERUSER = "postgres"
#: Longest Unix socket path the kernel takes (sun_path is 108 bytes with the NUL).
MAX_SOCKET_PATH = 107
START_TIMEOUT_S = 120
#: How long each stop mode gets before the next, harder one.
STOP_TIMEOUTS_S = {"fast": 20, "immediate": 10}
#: Settings iolab sets itself; a recipe's free-form settings may not override them.
RESERVED_SETTINGS = {"listen_addresses", "port", "unix_socket_directories", "shared_buffers",
                     "fsync", "synchronous_commit", "huge_pages", "data_directory",
                     "hba_file", "ident_file", "config_file", "include", "include_dir",
                     "include_if_exists", "logging_collector"}
SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")
MODE_FILE = "iolab-mode.conf"


@dataclasses.dataclass(frozen=True)
class Binaries:
    bindir: str
    version: str  # ``postgres --version``, e.g. "postgres (PostgreSQL) 15.18 (Debian ...)"

    def __getattr__(self, program: str) -> str:
        if program in PROGRAMS:
            return os.path.join(self.bindir, program)
        raise AttributeError(program)

    @property
    def major(self) -> int | None:
        match = re.search(r"\)\s*(\d+)", self.version)
        return int(match.group(1)) if match else None


def find_binaries(bindir: str | None = None) -> Binaries:
    """The directory holding all of :data:`PROGRAMS`: ``bindir``, else ``PATH``, else Debian's.

    On ``PATH`` the directory of the real ``postgres`` (symlinks resolved) is
    used, so ``pgbench`` and ``psql`` come from the same PostgreSQL version as
    the server (Debian's ``/usr/bin/pgbench`` is a version-picking wrapper).
    """
    if bindir is not None:
        candidates = [bindir]
    else:
        candidates = []
        on_path = shutil.which("postgres")
        if on_path:
            candidates.append(os.path.dirname(os.path.realpath(on_path)))
        candidates += sorted(glob.glob(DEBIAN_BINDIRS), key=_version_key, reverse=True)
    for directory in candidates:
        missing = [p for p in PROGRAMS if not os.access(os.path.join(directory, p), os.X_OK)]
        if not missing:
            proc = subprocess.run([os.path.join(directory, "postgres"), "--version"],
                                  capture_output=True, text=True)
            return Binaries(bindir=directory, version=proc.stdout.strip())
        log.info("PostgreSQL programs in %s: %s missing", directory, ", ".join(missing))
    where = f"in {bindir}" if bindir is not None else f"on PATH or in {DEBIAN_BINDIRS}"
    raise IolabError(f"PostgreSQL is not installed: {', '.join(PROGRAMS)} were not found together {where}",
                     context="pgbench", hint=INSTALL_HINT)


def _version_key(path: str):
    name = Path(path).parent.name
    return [int(x) for x in re.findall(r"\d+", name)] or [0]


def server_account(name: str | None = None) -> Account:
    """The account the server runs as: ``name``, else ``postgres``, else ``nobody``; ourselves unless root."""
    return dbserver.server_account(name, candidates=("postgres", "nobody"), server="PostgreSQL",
                                   context="pgbench: options.user", only_root_chooses=True)


def quote(value) -> str:
    """A postgresql.conf value in single quotes."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def socket_in_use(path: str | os.PathLike) -> bool:
    """Whether something accepts connections on the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True


def _lock_pid(lock_file: Path) -> int | None:
    try:
        first = lock_file.read_text().splitlines()[0]
        return int(first.strip().lstrip("-"))
    except (OSError, IndexError, ValueError):
        return None


class Cluster(ServerLifecycle):
    """One cluster under ``parent/iolab-pgbench``; see the module docstring."""

    def __init__(self, parent: str | os.PathLike, binaries: Binaries, *, log_dir: str | os.PathLike,
                 account: Account | None = None):
        self.root = Path(parent) / CLUSTER_DIR
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.socket = self.root / f".s.PGSQL.{PORT}"
        self.binaries = binaries
        self.account = account or server_account()
        self.log_dir = Path(log_dir)
        self.server_log = self.log_dir / "postgres.log"
        self.proc: subprocess.Popen | None = None
        self.created = False
        self.env = {"PATH": f"{binaries.bindir}:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC",
                    "PGHOST": str(self.socket_dir), "PGPORT": str(PORT), "PGUSER": SUPERUSER,
                    "PGDATABASE": "postgres"}  # nothing of the caller's PG* settings leaks in

    # ---- creation
    def check_free(self) -> None:
        """Refuse a target where another run's cluster (live or left over) sits."""
        if len(str(self.socket)) > MAX_SOCKET_PATH:
            raise IolabError(f"the Unix socket path would be {len(str(self.socket))} bytes, the kernel takes "
                             f"at most {MAX_SOCKET_PATH}", context=str(self.socket),
                             hint="use a target directory with a shorter path")
        if not self.root.exists():
            return
        if socket_in_use(self.socket):
            pid = _lock_pid(Path(f"{self.socket}.lock"))
            owner = f" (server PID {pid}, from its lock file)" if pid else ""
            raise IolabError(f"the socket is in use by a running server{owner}: another pgbench run on this "
                             "target, or a PostgreSQL someone started there", context=str(self.socket),
                             hint="wait for it to finish or use another target")
        raise IolabError("a cluster directory from an earlier run is in the way and no server answers on "
                         "its socket", context=str(self.root),
                         hint="remove it (iolab never deletes what it did not create)")

    def create(self, settings: dict) -> None:
        """``initdb`` and a postgresql.conf with ``settings`` appended (last one wins)."""
        self.check_free()
        try:
            self.root.mkdir(mode=0o700)
        except FileExistsError:  # a run that started a moment ago
            self.check_free()
            raise
        except OSError as exc:
            raise IolabError(f"cannot create the cluster directory: {exc.strerror}", context=str(self.root)) from exc
        self.created = True
        ownership.record("pgcluster", str(self.root), undo=f"pg_ctl stop -D {self.data} -m immediate; rm -r {self.root}",
                         undone_by=__name__,
                         data=str(self.data), bindir=self.binaries.bindir, account=self.account.name,
                         uid=self.account.uid, gid=self.account.gid)
        os.chown(self.root, self.account.uid, self.account.gid)
        self._check_reachable()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # --no-sync: initdb's own fsync of each of its ~1000 files (a journal commit and a cache flush
        # apiece) buys durability a throw-away cluster never needs. Its pages are still written before
        # anything is measured: one syncfs of the target's file system right after (the CHECKPOINT before
        # each timed run leaves the catalog files the server never touched dirty; sandbox.prepare_test's
        # global sync would catch them, but not under --isolation none).
        self._run([self.binaries.initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                   "-E", "UTF8", "--locale=C", "--no-instructions", "--no-sync"],
                  what="initdb", log_name="initdb.txt", as_server=True, timeout=600)
        self._syncfs(self.log_dir / "initdb.txt")
        conf = self.data / "postgresql.conf"
        lines = ["", "# ---- iolab pgbench: these settings override initdb's above ----",
                 "listen_addresses = ''", f"port = {PORT}",
                 f"unix_socket_directories = {quote(self.socket_dir)}",
                 "huge_pages = off  # shared memory stays in the memory cgroup, not iolab's huge-page reserve"]
        lines += [f"{name} = {quote(value)}" for name, value in settings.items()]
        lines += [f"include_if_exists = {quote(MODE_FILE)}  # fsync / synchronous_commit of the current test", ""]
        with open(conf, "a") as handle:
            handle.write("\n".join(lines))

    def _syncfs(self, record: Path) -> None:
        """Write the data directory's file system to its device (``sync -f``), noted in ``record``."""
        argv = ["sync", "-f", str(self.data)]
        started = time.monotonic()
        self._run(argv, what=f"sync -f {self.data} (after initdb --no-sync)", timeout=600)
        with open(record, "a") as handle:
            handle.write(f"$ {' '.join(argv)}\n[exit 0, {time.monotonic() - started:.3f} s]\n")

    def _check_reachable(self) -> None:
        if os.geteuid() == self.account.uid:
            return
        proc = subprocess.run(self.account.wrap(["/usr/bin/test", "-w", str(self.root)]), env=self.env)
        if proc.returncode != 0:
            blocked = next((str(p) for p in [*reversed(self.root.parents)]
                            if not (p.stat().st_mode & 0o001)), str(self.root.parent))
            raise IolabError(f"the server's account {self.account.name!r} cannot reach the target "
                             f"({blocked} is not searchable by others)", context=str(self.root),
                             hint="use a target under a directory others may enter, e.g. /var/tmp/...")

    def size_bytes(self) -> int:
        """Bytes the cluster occupies (allocated blocks)."""
        total = 0
        for dirpath, _, files in os.walk(self.data):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
        return total

    # ---- running
    def set_mode(self, settings: dict) -> dict:
        """Write ``settings`` (reloadable ones) to the mode file, reload, and check they took effect."""
        text = "".join(f"{name} = {quote(value)}\n" for name, value in settings.items())
        mode_file = self.data / MODE_FILE
        mode_file.write_text(text)
        os.chown(mode_file, self.account.uid, self.account.gid)
        self.sql("SELECT pg_reload_conf()")
        seen = {}

        def taken():  # the reload is asynchronous: until a new session sees it
            seen.update({name: self.sql(f"SHOW {name}") for name in settings})
            return all(seen[name] == str(value) for name, value in settings.items())
        wait_until(taken, 10, interval=0.1, context=str(self.data / MODE_FILE),
                   what=lambda: f"PostgreSQL to take {settings} (it shows {seen}): {tail(self.server_log)}")
        return seen

    def start(self, *, popen=subprocess.Popen) -> None:
        """Start ``postgres`` in the foreground through ``popen`` and wait until it accepts connections."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        argv = self.account.wrap([self.binaries.postgres, "-D", str(self.data)])
        with open(self.server_log, "ab") as out:
            self.proc = popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              env=self.env, start_new_session=True)
        log.info("postgres started (PID %d), data directory %s", self.proc.pid, self.data)
        probe = None

        def accepts() -> bool:
            nonlocal probe
            if self.proc.poll() is not None:
                raise IolabError(f"postgres exited with {self.proc.returncode} while starting: {tail(self.server_log)}",
                                 context=str(self.data), hint=f"its log is {self.server_log}")
            probe = subprocess.run([self.binaries.psql, "-X", "-A", "-t", "-c", "SELECT 1"],
                                   capture_output=True, text=True, env=self.env)
            return probe.returncode == 0
        wait_until(accepts, START_TIMEOUT_S, interval=0.1, context=str(self.socket),
                   what=lambda: f"postgres to accept connections ({probe.stderr.strip() or tail(self.server_log)})")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def server_errors(self, lines: int = 3) -> str:
        """The server log's last PANIC/FATAL/ERROR lines ("" when there are none)."""
        return tail(self.server_log, lines, pattern=r"(PANIC|FATAL|ERROR):", fallback=False)

    def check_running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise IolabError(f"postgres stopped unexpectedly (exit {self.proc.returncode}): "
                             f"{tail(self.server_log)}", context=str(self.data))

    def sql(self, query: str, *, timeout: float = 600) -> str:
        """Run one SQL statement with psql; its unaligned, tuples-only output."""
        proc = self._run([self.binaries.psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query],
                         what=f"psql -c {query!r}", timeout=timeout)
        return proc.stdout.strip()

    def _run(self, argv, *, what: str, log_name: str | None = None, as_server: bool = False,
             timeout: float | None = None) -> subprocess.CompletedProcess:
        if as_server:
            argv = self.account.wrap(argv)
        log.debug("running %s", " ".join(argv))
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise IolabError(f"did not finish within {timeout:.0f} s", context=what) from exc
        if log_name:
            (self.log_dir / log_name).write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}"
                                                 f"[exit {proc.returncode}]\n")
        if proc.returncode != 0:
            lines = [x.strip() for x in (proc.stderr or proc.stdout).splitlines() if x.strip()]
            errors = [x for x in lines if re.search(r"(FATAL|PANIC|ERROR|error|could not)", x)] or lines
            raise IolabError(f"exited with {proc.returncode}: {' | '.join(errors[-3:]) or 'no output'}",
                             context=what)
        return proc

    # ---- clean-up
    def stop(self) -> list[str]:
        """Stop the server: ``pg_ctl stop -m fast``, then ``-m immediate``, then SIGKILL of the postmaster and
        its backends (each in a session of its own). Returns the steps taken."""
        if self.proc is None:
            return []
        return processes.end(self.proc, grace=5, family=True, first=[
            (f"pg_ctl stop -m {mode}", functools.partial(self._pg_ctl_stop, mode, timeout))
            for mode, timeout in STOP_TIMEOUTS_S.items()])

    def _pg_ctl_stop(self, mode: str, timeout: int) -> None:
        argv = self.account.wrap([self.binaries.pg_ctl, "stop", "-D", str(self.data), "-m", mode, "-w", "-t",
                                  str(timeout)])
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout + 5)
            if proc.returncode != 0:
                log.warning("pg_ctl stop -m %s: %s", mode, (proc.stderr or proc.stdout).strip())
        except subprocess.TimeoutExpired:
            log.warning("pg_ctl stop -m %s did not return within %d s", mode, timeout)

    def remove(self) -> None:
        if self.created and self.root.exists():
            shutil.rmtree(self.root)
            log.info("removed cluster %s", self.root)
        if self.created:
            ownership.forget("pgcluster", str(self.root))
        self.created = False

    def describe(self) -> dict:
        return {"root": str(self.root), "data_directory": str(self.data), "socket": str(self.socket),
                "port": PORT, "listen_addresses": "", "user": self.account.name, "uid": self.account.uid,
                "bindir": self.binaries.bindir, "version": self.binaries.version}


def _is_postgres(pid: int) -> bool:
    return any("postgres" in arg for arg in procstat.argv_of(pid) or [])


def undo_stale(root: str, details: dict, *, dry_run: bool) -> str | None:
    """Stop the server of a cluster whose iolab process is gone and remove the cluster directory.

    ``pg_ctl stop -m immediate`` as the server's account (the data are
    throw-away), then SIGKILL of the postmaster and its processes if it is
    still there; then the directory goes (iolab made it: the record was written
    right after its ``mkdir``).
    """
    root_path = Path(root)
    data = Path(details.get("data") or root_path / "data")
    if not root_path.exists():
        return None
    pid = _lock_pid(data / "postmaster.pid")
    running = pid is not None and ownership.pid_alive(pid) and _is_postgres(pid)
    if dry_run:
        return f"would {'stop postgres (PID %d) and ' % pid if running else ''}remove cluster {root}"
    steps = []
    if running:
        account = Account(str(details.get("account")), int(details.get("uid", os.geteuid())),
                          int(details.get("gid", os.getegid())))
        argv = account.wrap([os.path.join(str(details.get("bindir")), "pg_ctl"), "stop", "-D", str(data),
                             "-m", "immediate", "-w", "-t", str(STOP_TIMEOUTS_S["immediate"])])
        try:
            subprocess.run(argv, capture_output=True, text=True, timeout=STOP_TIMEOUTS_S["immediate"] + 5)
            steps.append("pg_ctl stop -m immediate")
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("pg_ctl stop of %s: %s", data, exc)
        if ownership.pid_alive(pid) and _is_postgres(pid):
            steps += processes.end(pid, first=[], family=True)
    shutil.rmtree(root_path)
    return f"{'stopped postgres (PID %d: %s) and ' % (pid, ', '.join(steps)) if running else ''}removed cluster {root}"
