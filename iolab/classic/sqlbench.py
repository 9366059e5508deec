"""The sqlbench engine: MySQL's sql-bench (the eight tests of the 2013 article's Table 10) on MariaDB.

A recipe with ``engine: sqlbench`` (``recipes/sqlbench.yaml``) runs, on one
target (a directory, or an emulated device with ``filesystem:`` set):

1. ``mariadb-install-db`` of a throw-away server in ``<target>/iolab-sqlbench/``,
   started inside the run's sandbox (memory cgroup, device throttles) on
   127.0.0.1 and a free port (:mod:`iolab.classic.mariadb`); MyISAM tables (or InnoDB,
   one fsync per commit), buffer pool sized to fit the memory limit;
2. for each recipe test (ATIS, alter-table, big-tables, connect, create,
   insert, select, wisconsin; :mod:`iolab.classic.sqlbench_tests`) and repetition:
   a fresh database, sync + drop caches, the test, with the device's, the
   server process's and InnoDB's I/O counters read before and after;
3. the server stopped and its directory removed, also after errors, Ctrl-C
   and SIGTERM.

Recipe ``options``::

    options:
      scale: quick                # quick (0.01, the default: minutes), published (1.0: sql-bench's own sizes,
                                  # hours per target, warned about), or a fraction of the published sizes
      storage_engine: MyISAM      # the article's (MySQL 5.1's default), or InnoDB (a log flush per commit)
      preset_scale: {published: published}  # the scale a preset (--preset) runs at
      buffer_pool: 128M           # innodb_buffer_pool_size; at most a quarter of the memory limit
      port: null                  # preferred TCP port (in use: another is picked)
      user: null                  # account mariadbd runs as when iolab is root (default mysql)
      settings: {}                # more mariadbd options (name: value)

Result rows (one per test x repetition): ``runtime_s`` = the test's elapsed
seconds (sql-bench's "Time for ..." summed over the test's parts, the figure
of Table 10); ``bw_mbps``/``iops``/latency columns are NaN (sql-bench times
statements, not I/O requests); the storage evidence is in
``dev_read_bytes``/``dev_write_bytes``/``dev_*_ios`` (the target's block
device), ``dev_flushes`` (cache flushes the disks under it received: what
MyISAM's table syncs and ext4's journal commits cost on a disk; 0 where a test
never waits on the device), ``server_read_bytes``/``server_write_bytes`` (/proc/<mariadbd>/io)
and ``fsyncs`` (InnoDB's ``Innodb_data_fsyncs`` + ``Innodb_os_log_fsyncs``: near 0 on MyISAM);
``scale`` and ``storage_engine`` say what was run. The manifest's ``sqlbench`` section has
``scale``, ``scale_name``, ``scale_note`` (one line for reports: scaled figures are not the
article's), ``estimate_hdd_s``, ``storage_engine`` and ``storage_engine_note``.
The parts' seconds are in ``raw/<test>.json``.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import textwrap
import time

import pandas as pd

from iolab.core.errors import IolabError
from iolab.classic.mariadb import Server, find_binaries, server_account
from iolab.classic.dbengine import DatabaseEngine
from iolab.classic.dbserver import recipe_options
from iolab.classic.sqlbench_sizes import SCALES, describe, scaler
from iolab.classic.sqlbench_tests import RUNNERS, TESTS
from iolab.engine.store import utcnow
from iolab.core.units import human_size, parse_size

log = logging.getLogger(__name__)

OPTION_KEYS = {"scale", "preset_scale", "buffer_pool", "port", "user", "settings", "storage_engine"}
#: InnoDB: fsync per commit (MySQL >= 5.5's default); MyISAM: no commit flush, only table files are
#: synced when created (MySQL 5.1's default engine, what a 2013 CentOS 6 server ran).
STORAGE_ENGINES = ("InnoDB", "MyISAM")
#: The 2013 article's engine: its Table 10 shows insert (300000 autocommitted single-row inserts)
#: taking the same 410 s on the SATA HDD, the SSD and the ioDrive while create took 34 s vs 1060 s, so its
#: commits did not wait for a flush: MyISAM (MySQL 5.1's default, CentOS 6's MySQL), not InnoDB at its
#: defaults (MySQL >= 5.5). recipes/sqlbench.yaml gives the whole argument.
DEFAULT_STORAGE_ENGINE = "MyISAM"
#: One line per engine for the manifest and the report: why its figures look as they do.
ENGINE_NOTES = {
    "MyISAM": "MyISAM, the 2013 article's engine (MySQL 5.1's default): no flush at commit; table files are "
              "synced when created, so create is the test that waits on the device",
    "InnoDB": "InnoDB (MySQL >= 5.5's default), not the article's engine: a log flush at every commit, so the "
              "insert-heavy tests wait on the device too",
}
DEFAULT_SCALE = "quick"
#: Seconds per test at scale quick on emulated:hdd (measured 2026-11 on this project's 2-core machine),
#: the basis of :func:`estimate_s`.
QUICK_HDD_S = {
    "MyISAM": {"ATIS": 1.3, "alter-table": 2.7, "big-tables": 0.5, "connect": 4.1, "create": 29.9, "insert": 0.3,
               "select": 0.1, "wisconsin": 1.0},
    "InnoDB": {"ATIS": 20.0, "alter-table": 4.6, "big-tables": 23.4, "connect": 6.6, "create": 56.3, "insert": 57.9,
               "select": 3.2, "wisconsin": 6.8},
}
#: Above this many seconds the run warns before it starts (and says how to run quick instead).
WARN_ESTIMATE_S = 30 * 60
TEST_FIELDS_OK = {"name", "description", "rw", "bs", "runtime"}
DEFAULT_BUFFER_POOL = "128M"
MIN_BUFFER_POOL = 8 * 1024**2
EXTRA_COLUMNS = ["target", "tool", "job", "valid", "flags", "scale", "storage_engine", "dev_read_bytes",
                 "dev_write_bytes", "dev_read_ios", "dev_write_ios", "dev_flushes", "server_read_bytes",
                 "server_write_bytes", "fsyncs",
                 "buffer_pool_bytes", "cg_peak_bytes", "cg_cache_bytes", "wall_s"]
STATUS = ("Innodb_data_fsyncs", "Innodb_os_log_fsyncs", "Innodb_data_reads", "Innodb_data_writes")


def parse_options(recipe, *, mem_limit: int | None = None) -> dict:
    """Check a sqlbench recipe's options and tests; errors name the file and the field."""
    source, ctx, data = recipe_options(recipe, OPTION_KEYS)
    scale, scale_name = _scale(recipe, ctx, data)
    pool = parse_size(str(data.get("buffer_pool", DEFAULT_BUFFER_POOL)), context=f"{ctx}.buffer_pool")
    if mem_limit and recipe.isolation == "cgroup":
        pool = min(pool, mem_limit // 4)
    if pool < MIN_BUFFER_POOL:
        raise IolabError(f"{human_size(pool)} is below MariaDB's usable minimum of {human_size(MIN_BUFFER_POOL)}",
                         context=f"{ctx}.buffer_pool", hint="raise --mem-limit or buffer_pool")
    port = data.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535):
        raise IolabError(f"must be a TCP port 1024-65535, got {port!r}", context=f"{ctx}.port")
    engine = data.get("storage_engine", DEFAULT_STORAGE_ENGINE)
    if engine not in STORAGE_ENGINES:
        raise IolabError(f"must be one of {', '.join(STORAGE_ENGINES)}, got {engine!r}",
                         context=f"{ctx}.storage_engine")
    settings = data.get("settings") or {}
    if not isinstance(settings, dict) or any(isinstance(v, (dict, list)) for v in settings.values()):
        raise IolabError("must map mariadbd option names to single values", context=f"{ctx}.settings")
    for index, test in enumerate(recipe.tests):
        tctx = f"{source}: tests[{index}] ({test.name})"
        if test.name not in RUNNERS:
            raise IolabError(f"is not a sql-bench test (tests: {', '.join(TESTS)})", context=f"{tctx}.name")
        pristine = type(test)(name=test.name)
        ignored = [f for f in vars(test) if f not in TEST_FIELDS_OK and getattr(test, f) != getattr(pristine, f)]
        if ignored:
            raise IolabError(f"{ignored[0]!r} means nothing to sql-bench", context=f"{tctx}.{ignored[0]}")
    return {"scale": scale, "scale_name": scale_name, "buffer_pool": pool, "port": port, "user": data.get("user"),
            "storage_engine": engine,
            "settings": {"default-storage-engine": engine, **{str(k): str(v) for k, v in settings.items()}}}


def _scale(recipe, ctx: str, data: dict) -> tuple[float, str]:
    """The run's fraction of the published sizes and its name (``quick``, ``published`` or ``custom``):
    the chosen preset's ``preset_scale``, else ``options.scale``, else ``quick``."""
    presets = data.get("preset_scale") or {}
    if not isinstance(presets, dict):
        raise IolabError("must map preset names to scales", context=f"{ctx}.preset_scale")
    if recipe.preset in presets:
        value, where = presets[recipe.preset], f"{ctx}.preset_scale.{recipe.preset}"
    else:
        value, where = data.get("scale", DEFAULT_SCALE), f"{ctx}.scale"
    if isinstance(value, str):
        if value not in SCALES:
            raise IolabError(f"must be {' or '.join(SCALES)} or a number above 0 and at most 10, got {value!r}",
                             context=where)
        return SCALES[value], value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 10:
        raise IolabError(f"must be {' or '.join(SCALES)} or a number above 0 and at most 10, got {value!r}",
                         context=where)
    named = [name for name, fraction in SCALES.items() if fraction == value]
    return float(value), named[0] if named else "custom"


def scale_note(scale: float, name: str) -> str:
    """One line saying which sizes the figures are at (the manifest's ``sqlbench.scale_note``, for reports)."""
    if scale == 1.0:
        return "sql-bench's published sizes (comparable with the article's seconds)"
    return (f"{scale:g} x sql-bench's published sizes (scale {name}): not comparable with the article's seconds, "
            "only between runs at the same scale")


def estimate_s(scale: float, engine: str, tests) -> float:
    """Seconds ``tests`` are expected to take on an HDD-like device (emulated:hdd), extrapolated linearly
    from :data:`QUICK_HDD_S`; a floor, since some tests' work grows faster than their sizes."""
    return sum(QUICK_HDD_S[engine][name] for name in tests) * scale / SCALES["quick"]


def describe_tests(recipe) -> list[str]:
    """The recipe's tests as sql-bench tests (not fio jobs) for ``iolab recipes``: what each runs at the
    recipe's scale (its preset's, when one is chosen) and what it stresses."""
    options = parse_options(recipe)
    scale, engine = options["scale"], options["storage_engine"]
    estimate = _duration(estimate_s(scale, engine, [t.name for t in recipe.tests]))
    lines = [f"tests at scale {options['scale_name']} ({scale:g} x sql-bench's published sizes), {engine} tables;"
             f" at least {estimate} on an HDD-like device:"]
    width = max((len(t.name) for t in recipe.tests), default=0)
    indent = " " * (width + 4)
    for test in recipe.tests:
        work, stresses = describe(test.name, scale)
        lines += textwrap.wrap(work, 100, initial_indent=f"  {test.name:<{width}}  ", subsequent_indent=indent)
        lines += textwrap.wrap(f"stresses: {stresses}", 100, initial_indent=indent, subsequent_indent=indent)
    return lines


class _Database:
    """What a workload gets: ``connect()`` to the test's database on the server."""

    def __init__(self, server: Server, name: str):
        self.server, self.name = server, name

    def connect(self):
        # sql-bench's default: the local socket (its --tcpip option caps connect's loop at 1000)
        return self.server.connect(database=self.name, via=self.server.via)


class Engine(DatabaseEngine):
    """Runs an ``engine: sqlbench`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    TOOL = "sqlbench"
    SERVER_WORD = "server"
    DIRECT_REFUSAL = ("MariaDB's I/O is its own; O_DIRECT isolation cannot apply to it",
                      "use cgroup (default) or none")
    ROOT_REFUSAL = ("", "run as root, or use --isolation none")
    REMOVED_KEY = "server_removed"

    def _check(self):
        options = parse_options(self.recipe, mem_limit=self.mem_limit)
        target = self.check_target()
        try:
            import pymysql  # noqa: F401
        except ImportError:
            raise IolabError("the MySQL client PyMySQL is not installed", context="sqlbench",
                             hint="pip install pymysql (make setup installs it)") from None
        return options, target, find_binaries(), server_account(options["user"])

    def execute(self) -> None:
        options, target, binaries, account = self._check()
        scale, engine = options["scale"], options["storage_engine"]
        estimate = estimate_s(scale, engine, [t.name for t in self.recipe.tests]) * self.recipe.repeat
        info = {"server": None, "scale": scale, "scale_name": options["scale_name"],
                "scale_note": scale_note(scale, options["scale_name"]), "estimate_hdd_s": round(estimate),
                "storage_engine": engine, "storage_engine_note": ENGINE_NOTES[engine],
                "buffer_pool_bytes": options["buffer_pool"],
                "mem_limit": self.mem_limit, "bw_mbps_iops": "NaN: sql-bench times statements; device bytes are "
                "in dev_read_bytes/dev_write_bytes", "cleanup": None}
        self.run.update(sqlbench=info)
        if estimate > WARN_ESTIMATE_S:
            log.warning("sqlbench at scale %s (%g x sql-bench's published sizes): expect at least %s per target "
                        "on an HDD-like device (%s at scale quick on emulated:hdd, x %g); scale quick, the "
                        "default, takes minutes", options["scale_name"], scale, _duration(estimate), engine,
                        scale / SCALES["quick"])
        with contextlib.ExitStack() as stack:
            base, sandbox = self.open_target(stack, target)
            server = Server(base, log_dir=self.run.path / "raw", buffer_pool=options["buffer_pool"],
                            binaries=binaries, account=account, port=options["port"], settings=options["settings"])
            stack.callback(self.destroy, server, info)
            self.run.update(isolation=sandbox.describe())  # recorded before anything can fail
            self.prepare(server, sandbox, info)
            self.run.update(isolation=sandbox.describe(), sqlbench=info)
            counter = self.device_counter(base)
            for test in self.recipe.tests:
                self._test(server, sandbox, test.name, options, counter)
            self.run.update(isolation=sandbox.describe())

    def prepare(self, server, sandbox, info: dict) -> None:
        """Create the server's files and start it in the sandbox, caches dropped first."""
        server.create()
        sandbox.prepare_test()
        server.start(popen=sandbox.popen)
        info["server"] = server.describe()

    def base_dir(self, target) -> str:
        base = super().base_dir(target)
        if target.kind != "dir":
            os.chmod(base, 0o755)  # the server's account must reach its directory
        return base

    def _test(self, server, sandbox, name: str, options: dict, counter) -> None:
        record = next(t for t in self.run.manifest["tests"] if t["name"] == name)
        record.update(status="running", started=utcnow())

        def measure() -> list:
            errors = []
            for rep in range(1, self.recipe.repeat + 1):
                if self.recipe.pause and rep > 1:
                    time.sleep(self.recipe.pause)
                row = self.measure_step(server, sandbox, name, rep, options, counter)
                if row["error"]:
                    errors.append(row["error"])
                record["reps"] = rep
                self.run.save_manifest()
            return errors

        self.run_test(record, measure)

    def measure_step(self, server, sandbox, name: str, rep: int, options: dict, counter) -> dict:
        """One sql-bench test in a fresh database; its row, annotated and stored."""
        scale = options["scale"]
        database = f"bench_{name.replace('-', '_').lower()}_{rep}"
        admin = server.connect()
        admin.cursor().execute(f"create database {database}")
        sandbox.prepare_test()
        before = (counter.snapshot() if counter else None, server.io_counters(), _status(admin))
        self.progress and log.info("sql-bench %s (scale %g)", name, scale)
        error, parts = None, {}
        started = time.perf_counter()
        try:
            parts = RUNNERS[name](_Database(server, database), scaler(scale))
        except Exception as exc:  # the server's own error (pymysql.err.*), or it died
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - started
        if not server.running():
            server.check_running()  # raises with the server's last words
        device = counter.delta(before[0]) if counter else {}
        io_after, status_after = server.io_counters(), _status(admin)
        admin.cursor().execute(f"drop database if exists {database}")
        admin.close()
        evidence = sandbox.test_evidence()
        stem = name if self.recipe.repeat == 1 else f"{name}-{rep}"
        self.run.write(f"raw/{stem}.json", json.dumps({"test": name, "scale": scale, "elapsed_s": elapsed,
                                                         "parts_s": parts, "error": error}, indent=1) + "\n")
        if evidence.get("oom_killed"):
            error = "; ".join(filter(None, [error, evidence.get("oom_reason") or "OOM kill in the memory cgroup"]))
        fsyncs = sum(status_after.get(k, 0) - before[2].get(k, 0) for k in STATUS[:2]) if status_after else None
        row = self.annotate(name, rep, stem, options, sandbox, error=error, elapsed=elapsed, device=device,
                            evidence=evidence, server_io=(before[1], io_after), fsyncs=fsyncs)
        self.store(pd.DataFrame([row]))
        return row

    def annotate(self, name: str, rep: int, stem: str, options: dict, sandbox, *, error, elapsed, device, evidence,
                 server_io, fsyncs) -> dict:
        """The result row of one test (contract columns, then sql-bench's, the device's and the server's)."""
        scale, (io_before, io_after) = options["scale"], server_io
        m = self.run.manifest
        row = {"run_id": m["run_id"], "host": m["host"], "label": m["label"], "recipe": self.recipe.name,
               "test": name, "rep": rep, "direction": "sql", "bs": math.nan, "iodepth": 1, "numjobs": 1,
               "bw_mbps": math.nan, "iops": math.nan, "lat_mean_us": math.nan, "lat_p50_us": math.nan,
               "lat_p99_us": math.nan, "lat_p999_us": math.nan, "lat_max_us": math.nan, "cpu_usr_pct": math.nan,
               "cpu_sys_pct": math.nan, "io_bytes": math.nan, "runtime_s": round(elapsed, 3),
               "isolation": sandbox.mode, "error": error, "target": self.targets[0].name, "tool": "sql-bench",
               "job": stem, "flags": "oom_killed" if evidence.get("oom_killed") else None, "scale": scale,
               "storage_engine": options["storage_engine"],
               "dev_read_bytes": device.get("read_bytes"), "dev_write_bytes": device.get("write_bytes"),
               "dev_read_ios": device.get("read_ios"), "dev_write_ios": device.get("write_ios"),
               "dev_flushes": device.get("flushes"),
               "server_read_bytes": _diff(io_after, io_before, "read_bytes"),
               "server_write_bytes": _diff(io_after, io_before, "write_bytes"), "fsyncs": fsyncs,
               "buffer_pool_bytes": options["buffer_pool"], "cg_peak_bytes": evidence.get("cg_peak_bytes"),
               "cg_cache_bytes": evidence.get("cg_cache_bytes"), "wall_s": round(elapsed, 3)}
        row["valid"] = row["error"] is None
        return row


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _status(conn) -> dict:
    cur = conn.cursor()
    cur.execute("show global status where Variable_name in (" + ",".join(f"'{k}'" for k in STATUS) + ")")
    return {k: int(v) for k, v in cur.fetchall()}


def _diff(after: dict, before: dict, key: str):
    return after[key] - before[key] if key in after and key in before else None
