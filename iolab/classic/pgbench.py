"""The pgbench engine: PostgreSQL's TPC-B-like benchmark on the device under test.

A recipe with ``engine: pgbench`` (``recipes/pgbench.yaml``) runs, on one
target (a directory, or an emulated device with ``filesystem:`` set):

1. ``initdb`` of a throw-away cluster in ``<target>/iolab-pgbench/``, started
   inside the run's sandbox (memory cgroup, device throttles) on a Unix
   socket in that directory, no TCP (:mod:`iolab.classic.pgcluster`);
2. ``pgbench -i -s SCALE`` (output in ``raw/pgbench-init.txt``);
3. for each test (one per mode: ``synchronous_commit`` x ``fsync``), each
   repetition and each client count: ``CHECKPOINT``, sync + drop caches,
   ``pgbench -c CLIENTS -j min(CLIENTS, cores) -T RUNTIME -l`` (the builtin
   TPC-B-like script), with the device's and PostgreSQL's I/O counters read
   before and after;
4. the server stopped (``pg_ctl stop -m fast``, then ``-m immediate``, then
   SIGKILL) and the cluster removed, also after errors and Ctrl-C.

Recipe ``options`` (checked by :func:`parse_options`, errors name the file
and field)::

    options:
      scale: 50                   # pgbench -i -s: 100 000 x scale accounts (~15 MiB each)
      clients: [1, 2, 4, 8]       # one measurement per client count (-c), threads -j = min(clients, cores)
      protocol: simple            # -M: simple | extended | prepared
      shared_buffers: 128MB       # PostgreSQL's own cache; at most half the memory limit in cgroup mode
      settings: {max_wal_size: 1GB}   # more postgresql.conf settings (not the ones iolab sets)
      user: postgres              # account the server runs as when iolab is root (default postgres, else nobody)
      bindir: null                # directory with initdb, pg_ctl, postgres, pgbench, psql (default: PATH, then
                                  # /usr/lib/postgresql/<newest>/bin)
      modes:                      # one entry per recipe test, same names
        tpcb-sync_on:  {synchronous_commit: "on",  fsync: "on"}
        tpcb-sync_off: {synchronous_commit: "off", fsync: "on"}

``defaults.runtime`` (``--runtime``) is pgbench's ``-T`` per client count,
``defaults.repeat`` (``--repeat``) the repetitions, ``defaults.pause`` a
pause between measurements, ``defaults.warmup`` one unrecorded run per test
at the largest client count, ``defaults.size`` (``--size``) the room the
cluster may take on the target (free-space check; emulated device size).

Each recipe test is ``{name, description, rw: randrw, bs: 8k}``: the loader
asks every test for an I/O pattern, and TPC-B's is 8 KiB random reads and
writes of heap and index pages (plus sequential WAL appends); a test may set
``runtime``. Other test fields are refused, since pgbench would ignore them.

Result rows (one per test x repetition x client count), contract columns:
``test`` = the recipe test (``tpcb-sync_on``), ``direction`` = ``randrw``,
``numjobs`` = clients, ``bs`` = PostgreSQL's block size, ``iodepth`` = 1
(each backend does synchronous I/O), ``lat_mean/p50/p99/p999/max_us`` from
the per-transaction log (``-l``), ``runtime_s`` = pgbench's duration;
``bw_mbps``, ``iops``, ``io_bytes`` and the CPU columns are **NaN**: pgbench
measures transactions, not I/O requests — the device's bytes are in
``dev_read_bytes``/``dev_write_bytes``. Extra columns: :data:`EXTRA_COLUMNS`.

Files in the run directory: ``postgresql.conf`` (as used; the per-test
``fsync``/``synchronous_commit`` are in the manifest's test records and in
``raw/<test>-settings.txt``), ``raw/initdb.txt``, ``raw/pgbench-init.txt``,
``raw/postgres.log``, ``raw/<test>-<clients>.txt`` (pgbench's output;
``-<rep>`` added when repeated) and ``raw/<test>-<clients>.log.gz``: the
per-transaction logs of all threads concatenated, pgbench's format
``client_id transaction_no latency_us script_no epoch_s epoch_us``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from iolab.core import progress as progress_
from iolab.engine import targets as targets_mod
from iolab.core.errors import IolabError
from iolab.classic.pgcluster import RESERVED_SETTINGS, SETTING_NAME, Cluster, find_binaries, server_account
from iolab.engine.store import utcnow
from iolab.core.units import human_size, parse_size

log = logging.getLogger(__name__)

DEFAULT_CLIENTS = (1, 2, 4, 8)
DEFAULT_SCALE = 10
DEFAULT_SHARED_BUFFERS = "128MB"
PROTOCOLS = ("simple", "extended", "prepared")
OPTION_KEYS = {"scale", "clients", "protocol", "shared_buffers", "settings", "modes", "user", "bindir"}
MODE_KEYS = ("synchronous_commit", "fsync")
SYNC_COMMIT_VALUES = ("on", "off", "local", "remote_write", "remote_apply")
#: Test fields that make sense for pgbench (the loader fills the others with defaults).
TEST_FIELDS_OK = {"name", "description", "rw", "bs", "runtime"}
#: pgbench gets this long beyond -T before it is killed (vacuum before the run, slow connections).
PGBENCH_GRACE_S = 120
#: Extra result columns of a pgbench row (after the contract columns).
EXTRA_COLUMNS = ["target", "tool", "job", "valid", "flags", "tps", "clients", "threads", "scale", "protocol",
                 "sync_commit", "fsync", "transactions", "failed_transactions", "lat_avg_ms", "lat_stddev_ms",
                 "conn_time_ms", "dev_read_bytes", "dev_write_bytes", "dev_read_ios", "dev_write_ios",
                 "wal_bytes", "wal_writes", "wal_syncs", "data_read_bytes", "data_write_bytes",
                 "shared_buffers_bytes", "cg_peak_bytes", "cg_cache_bytes", "wall_s"]


@dataclasses.dataclass
class Mode:
    test: str
    synchronous_commit: str
    fsync: str
    runtime: float

    @property
    def settings(self) -> dict:
        return {"synchronous_commit": self.synchronous_commit, "fsync": self.fsync}


@dataclasses.dataclass
class Options:
    scale: int
    clients: list
    protocol: str
    shared_buffers: str
    shared_buffers_bytes: int
    settings: dict
    modes: list
    user: str | None
    bindir: str | None


def _onoff(value, ctx: str, allowed=("on", "off")) -> str:
    if isinstance(value, bool):  # YAML 1.1 reads on/off as booleans
        value = "on" if value else "off"
    value = str(value).lower()
    if value not in allowed:
        raise IolabError(f"must be one of {', '.join(allowed)}, got {value!r}", context=ctx)
    return value


def parse_options(recipe, *, mem_limit: int | None = None) -> Options:
    """Check a pgbench recipe's ``options`` and tests; errors name the file and the field."""
    source = recipe.source or recipe.name
    ctx = f"{source}: options"
    data = recipe.options or {}
    extra = sorted(set(data) - OPTION_KEYS)
    if extra:
        raise IolabError(f"unknown field {extra[0]!r} (allowed: {', '.join(sorted(OPTION_KEYS))})", context=ctx)
    scale = data.get("scale", DEFAULT_SCALE)
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise IolabError(f"must be a whole number >= 1, got {scale!r}", context=f"{ctx}.scale")
    clients = data.get("clients", list(DEFAULT_CLIENTS))
    if not isinstance(clients, list) or not clients or any(
            isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in clients):
        raise IolabError(f"must be a non-empty list of whole numbers >= 1, got {clients!r}", context=f"{ctx}.clients")
    if len(set(clients)) != len(clients):
        raise IolabError(f"lists a client count twice: {clients!r}", context=f"{ctx}.clients")
    protocol = data.get("protocol", "simple")
    if protocol not in PROTOCOLS:
        raise IolabError(f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}", context=f"{ctx}.protocol")
    shared_buffers = str(data.get("shared_buffers", DEFAULT_SHARED_BUFFERS))
    sb_bytes = parse_size(shared_buffers, context=f"{ctx}.shared_buffers")
    if sb_bytes < 1024**2:
        raise IolabError(f"must be at least 1 MiB, got {shared_buffers!r}", context=f"{ctx}.shared_buffers")
    if mem_limit and recipe.isolation == "cgroup" and sb_bytes > mem_limit // 2:
        raise IolabError(f"{shared_buffers} leaves less than half of the {human_size(mem_limit)} memory limit for "
                         "the page cache and the server's processes", context=f"{ctx}.shared_buffers",
                         hint="lower shared_buffers or raise --mem-limit")
    # PostgreSQL reads a bare number as 8 kB pages: give it the unit it understands
    sb_setting = f"{sb_bytes // 1024}kB"
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise IolabError("must be a mapping of postgresql.conf settings", context=f"{ctx}.settings")
    for name, value in settings.items():
        if not isinstance(name, str) or not SETTING_NAME.match(name):
            raise IolabError(f"not a setting name: {name!r}", context=f"{ctx}.settings")
        if name in RESERVED_SETTINGS:
            raise IolabError("is set by iolab (modes, shared_buffers, the socket)", context=f"{ctx}.settings.{name}")
        if isinstance(value, (dict, list)) or value is None:
            raise IolabError(f"must be a single value, got {value!r}", context=f"{ctx}.settings.{name}")
    settings = {name: (_onoff(v, f"{ctx}.settings.{name}") if isinstance(v, bool) else str(v))
                for name, v in settings.items()}
    for key in ("user", "bindir"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise IolabError(f"must be text, got {data[key]!r}", context=f"{ctx}.{key}")

    modes_in = data.get("modes")
    if not isinstance(modes_in, dict) or not modes_in:
        raise IolabError("must map each test name to {synchronous_commit, fsync}", context=f"{ctx}.modes")
    tests = {t.name: t for t in recipe.tests}
    for name in modes_in:
        if name not in tests:
            raise IolabError(f"names no test of the recipe (tests: {', '.join(tests)})", context=f"{ctx}.modes.{name}")
    modes = []
    for index, test in enumerate(recipe.tests):
        tctx = f"{source}: tests[{index}] ({test.name})"
        if test.name not in modes_in:
            raise IolabError(f"has no entry in options.modes (synchronous_commit, fsync)", context=tctx)
        _check_test(test, tctx)
        entry = modes_in[test.name]
        mctx = f"{ctx}.modes.{test.name}"
        if not isinstance(entry, dict):
            raise IolabError("must be a mapping {synchronous_commit, fsync}", context=mctx)
        unknown = sorted(set(entry) - set(MODE_KEYS))
        if unknown:
            raise IolabError(f"unknown field {unknown[0]!r} (allowed: {', '.join(MODE_KEYS)}; other settings go in "
                             "options.settings)", context=mctx)
        missing = [k for k in MODE_KEYS if k not in entry]
        if missing:
            raise IolabError(f"missing field {missing[0]!r}", context=mctx)
        runtime = test.runtime or recipe.runtime
        if not runtime:
            raise IolabError("pgbench needs a duration (-T): set defaults.runtime or --runtime", context=tctx)
        modes.append(Mode(test=test.name,
                          synchronous_commit=_onoff(entry["synchronous_commit"], f"{mctx}.synchronous_commit",
                                                    SYNC_COMMIT_VALUES),
                          fsync=_onoff(entry["fsync"], f"{mctx}.fsync"),
                          runtime=float(runtime)))
    return Options(scale=scale, clients=list(clients), protocol=protocol, shared_buffers=sb_setting,
                   shared_buffers_bytes=sb_bytes, settings=settings, modes=modes, user=data.get("user"),
                   bindir=data.get("bindir"))


def _check_test(test, ctx: str) -> None:
    if test.rw != ["randrw"]:
        raise IolabError(f"rw must be randrw (TPC-B's 8 KiB random heap I/O), got {test.rw!r}", context=f"{ctx}.rw")
    if test.bs is not None and parse_size(test.bs) != 8192:
        raise IolabError(f"bs must be 8k (PostgreSQL's page), got {test.bs!r}", context=f"{ctx}.bs")
    pristine = type(test)(name=test.name)  # every field the recipe left at the loader's default
    ignored = [f.name for f in dataclasses.fields(test)
               if f.name not in TEST_FIELDS_OK and getattr(test, f.name) != getattr(pristine, f.name)]
    if ignored:
        raise IolabError(f"{ignored[0]!r} means nothing to pgbench (clients are options.clients)",
                         context=f"{ctx}.{ignored[0]}")


# --------------------------------------------------------------------------- pgbench output

_OUTPUT_PATTERNS = {
    "scale": r"^scaling factor:\s*(\d+)",
    "clients": r"^number of clients:\s*(\d+)",
    "threads": r"^number of threads:\s*(\d+)",
    "duration_s": r"^duration:\s*([\d.]+)\s*s",
    "transactions": r"^number of transactions actually processed:\s*(\d+)",
    "failed_transactions": r"^number of failed transactions:\s*(\d+)",
    "lat_avg_ms": r"^latency average\s*=\s*([\d.]+)\s*ms",
    "lat_stddev_ms": r"^latency stddev\s*=\s*([\d.]+)\s*ms",
    "conn_time_ms": r"^initial connection time\s*=\s*([\d.]+)\s*ms",
    # PG >= 14 "(without initial connection time)"; older "(excluding connections establishing)"
    "tps": r"^tps\s*=\s*([\d.]+)\s*\((?:without initial connection time|excluding connections establishing)\)",
}


def parse_output(text: str) -> dict:
    """pgbench's summary as numbers (missing lines are absent from the dict), plus ``aborted``."""
    found: dict = {}
    for key, pattern in _OUTPUT_PATTERNS.items():
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            value = float(match.group(1))
            found[key] = int(value) if key in ("scale", "clients", "threads", "transactions",
                                               "failed_transactions") else value
    found["aborted"] = "Run was aborted" in text
    return found


def latency_summary(lines) -> dict:
    """Per-transaction latencies (µs) from pgbench ``-l`` log lines: count, mean, p50, p99, p99.9, max.

    Failed or skipped transactions (latency ``failed``/``skipped``) are counted apart.
    """
    values, other = [], 0
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        if fields[2].isdigit():
            values.append(int(fields[2]))
        else:
            other += 1
    if not values:
        return {"count": 0, "not_completed": other}
    lat = np.asarray(values, dtype=float)
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    return {"count": len(values), "not_completed": other, "mean_us": float(lat.mean()), "p50_us": float(p50),
            "p99_us": float(p99), "p999_us": float(p999), "max_us": float(lat.max())}


def _log_files(directory: Path, prefix: str) -> list[Path]:
    """pgbench's per-thread logs ``<prefix>.<pid>`` (thread 0) and ``<prefix>.<pid>.<n>``, in thread order."""
    def thread(path: Path) -> int:
        parts = path.name[len(prefix) + 1:].split(".")
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return sorted(directory.glob(f"{prefix}.*"), key=thread)


# --------------------------------------------------------------------------- the engine

class Engine:
    """Runs a ``engine: pgbench`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    def __init__(self, recipe, targets, run_, *, mem_limit, progress, scratch_dir):
        self.recipe, self.targets, self.run = recipe, targets, run_
        self.mem_limit, self.progress, self.scratch_dir = mem_limit, progress, scratch_dir
        self.commands: dict = {}

    # ---- checks before anything is created on the target
    def _check(self):
        options = parse_options(self.recipe, mem_limit=self.mem_limit)
        if len(self.targets) != 1:
            raise IolabError(f"pgbench runs on one target at a time, got {len(self.targets)}", context="--target",
                             hint="run the recipe once per target; iolab.load() merges the runs")
        target = self.targets[0]
        if target.kind not in ("dir", "emulated"):
            raise IolabError(f"pgbench needs a directory on a mounted file system, not a {target.kind}",
                             context=f"--target {target.spec}",
                             hint="make a file system on the device and mount it (iolab setup), then give its directory")
        if self.recipe.isolation == "direct":
            raise IolabError("PostgreSQL does buffered I/O; O_DIRECT isolation cannot apply to it",
                             context="--isolation direct", hint="use cgroup (default), hugepages or none")
        if os.geteuid() != 0 and self.recipe.isolation in ("cgroup", "hugepages"):
            raise IolabError(f"{self.recipe.isolation} isolation needs root (memory cgroup or huge pages, drop_caches)",
                             context=f"--isolation {self.recipe.isolation}",
                             hint="run as root, or use --isolation none: caches are then kept and the results say so")
        binaries = find_binaries(options.bindir)
        account = server_account(options.user)
        return options, target, binaries, account

    def execute(self) -> None:
        from iolab.isolation.sandbox import open_sandbox
        options, target, binaries, account = self._check()
        cores = len(os.sched_getaffinity(0))
        info = {"server": None, "scale": options.scale, "clients": options.clients,
                "threads": {str(c): min(c, cores) for c in options.clients}, "cores": cores,
                "protocol": options.protocol, "shared_buffers": options.shared_buffers,
                "shared_buffers_bytes": options.shared_buffers_bytes, "mem_limit": self.mem_limit,
                "settings": options.settings,
                "modes": {m.test: {**m.settings, "runtime_s": m.runtime} for m in options.modes},
                "bw_mbps_iops": "NaN: pgbench measures transactions; device bytes are in dev_read_bytes/"
                                "dev_write_bytes", "cleanup": None}
        self.run.update(pgbench=info)
        with contextlib.ExitStack() as stack:
            stack.enter_context(_signals(signal.SIGTERM, _interrupt))  # `kill` cleans up like Ctrl-C
            stack.enter_context(targets_mod.opened(
                target, run_id=self.run.run_id, size=self.recipe.size, filesystem=self.recipe.filesystem,
                scratch_dir=self.scratch_dir))
            base = self._base_dir(target)
            self.run.update(targets=[target.describe()])
            throttles = list(target.emulated.throttles) if target.emulated is not None else []
            sandbox = stack.enter_context(open_sandbox(
                self.recipe.isolation, mem_limit=self.mem_limit, throttles=throttles, buffered=True))
            cluster = Cluster(base, binaries, log_dir=self.run.path / "raw", account=account)
            info["server"] = cluster.describe()
            self.run.update(isolation=sandbox.describe(), pgbench=info)
            stack.callback(self._destroy, cluster, info)
            self._prepare(cluster, sandbox, options, info)
            counter = self._counter(base)
            for mode in options.modes:
                self._mode(cluster, sandbox, options, mode, counter, cores)
            self.run.update(isolation=sandbox.describe())

    @staticmethod
    def _base_dir(target) -> str:
        if target.kind == "dir":
            # iolab lays out no test file here: the cluster directory takes its place
            target.test_file, target.created_file = None, False
            return target.path
        mountpoint = target.emulated.mountpoint if target.emulated is not None else None
        if not mountpoint:
            raise IolabError("the emulated device has no file system for the cluster", context=target.spec,
                             hint="set `filesystem: ext4` in the recipe")
        target.test_file = None
        return mountpoint

    def _counter(self, base: str):
        from iolab.isolation.blockstat import BlockCounter
        try:
            return BlockCounter.for_path(base)
        except IolabError as exc:
            log.warning("no device I/O counters for %s: %s", base, exc)
            self.run.manifest["pgbench"]["device_counters"] = str(exc)
            return None

    def _destroy(self, cluster: Cluster, info: dict) -> None:
        """Stop and remove the cluster; a second Ctrl-C or SIGTERM does not cut this short."""
        try:
            with _signals(signal.SIGINT, signal.SIG_IGN), _signals(signal.SIGTERM, signal.SIG_IGN):
                steps = cluster.destroy()
            info["cleanup"] = {"stop": steps, "cluster_removed": not cluster.root.exists(), "at": utcnow()}
        finally:
            self.run.save_manifest()

    def _prepare(self, cluster: Cluster, sandbox, options: Options, info: dict) -> None:
        settings = {"shared_buffers": options.shared_buffers,
                    "max_connections": str(max(100, max(options.clients) + 10)), **options.settings}
        cluster.create(settings)
        self.run.write("postgresql.conf", (cluster.data / "postgresql.conf").read_text())
        sandbox.prepare_test()
        cluster.start(popen=sandbox.popen)
        info["block_size"] = int(cluster.sql("SHOW block_size"))
        init_argv = [cluster.binaries.pgbench, "-i", "-s", str(options.scale), "--quiet"]
        self.commands["raw/pgbench-init.txt"] = init_argv
        self.run.update(commands=self.commands)
        started = time.monotonic()
        out_path = self.run.path / "raw" / "pgbench-init.txt"
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(init_argv, stdout=out, stderr=subprocess.STDOUT, env=cluster.env,
                                    stdin=subprocess.DEVNULL)
            self._wait(proc, f"pgbench -i -s {options.scale}", None, timeout=None, cluster=cluster)
        text = out_path.read_text(errors="replace")
        if proc.returncode != 0:
            raise IolabError(_failure(proc.returncode, text, cluster), context=f"pgbench -i -s {options.scale}",
                             hint=_hint(text, cluster, f"its output is {out_path}"))
        done = re.search(r"^done in .*$", text, re.MULTILINE)
        info["init"] = {"seconds": round(time.monotonic() - started, 3), "pgbench": done.group(0) if done else None,
                        "cluster_bytes": cluster.size_bytes()}
        self.run.save_manifest()

    def _mode(self, cluster, sandbox, options, mode: Mode, counter, cores) -> None:
        index = next(i for i, t in enumerate(self.run.manifest["tests"]) if t["name"] == mode.test)
        record = self.run.manifest["tests"][index]
        record.update(status="running", started=utcnow(), settings=mode.settings, runs=[])
        self.run.save_manifest()
        errors = []
        try:
            cluster.set_mode(mode.settings)
            shown = cluster.sql("SELECT name || ' = ' || setting || coalesce(' ' || unit, '') || '  (' || source || ')'"
                                " FROM pg_settings WHERE source NOT IN ('default', 'override') ORDER BY name")
            self.run.write(f"raw/{mode.test}-settings.txt", shown + "\n")
            if self.recipe.defaults.get("warmup"):
                self._one(cluster, sandbox, options, mode, max(options.clients), 0, counter, cores)
            for rep in range(1, self.recipe.repeat + 1):
                for clients in options.clients:
                    if self.recipe.defaults.get("pause") and (rep, clients) != (1, options.clients[0]):
                        time.sleep(self.recipe.defaults["pause"])
                    row = self._one(cluster, sandbox, options, mode, clients, rep, counter, cores)
                    record["runs"].append({"clients": clients, "rep": rep, "tps": row["tps"], "error": row["error"],
                                           "raw": row["raw"]})
                    if row["error"]:
                        errors.append(f"{clients} clients: {row['error']}")
                    record["reps"] = rep
                    self.run.save_manifest()
        except KeyboardInterrupt:
            record.update(status="interrupted", ended=utcnow())
            self.run.save_manifest()
            raise
        except IolabError as exc:
            record.update(status="failed", ended=utcnow(), error=str(exc))
            self.run.save_manifest()
            raise
        record.update(status="failed" if errors else "completed", ended=utcnow(),
                      error="; ".join(errors) or None)
        self.run.save_manifest()

    def _one(self, cluster, sandbox, options, mode: Mode, clients: int, rep: int, counter, cores) -> dict:
        """One pgbench measurement; its row is added to the results (warm-up: not)."""
        from iolab.isolation.sandbox import flag_cache_suspect
        threads = min(clients, cores)
        stem = f"{mode.test}-warmup" if rep == 0 else (
            f"{mode.test}-{clients}" if self.recipe.repeat == 1 else f"{mode.test}-{clients}-{rep}")
        argv = [cluster.binaries.pgbench, "-c", str(clients), "-j", str(threads), "-T", _fmt(mode.runtime),
                "-M", options.protocol, "-P", str(max(1, int(mode.runtime // 10))), "-l", "--log-prefix", "pgbench"]
        self.commands[f"raw/{stem}.txt"] = argv
        cluster.check_running()
        cluster.sql("CHECKPOINT")  # every measurement starts with no dirty buffers of the one before
        sandbox.prepare_test()
        stats_before = self._server_stats(cluster)
        dev_before = counter.snapshot() if counter else None
        label = f"{mode.test} {clients} client{'s' if clients > 1 else ''}" + (
            " warm-up" if rep == 0 else f" {rep}/{self.recipe.repeat}" if self.recipe.repeat > 1 else "")
        raw = self.run.path / "raw" / f"{stem}.txt"
        logdir = Path(tempfile.mkdtemp(prefix="iolab-pgbench-log-", dir=_log_tmp(self.scratch_dir)))
        started = time.monotonic()
        try:
            with open(raw, "wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=cluster.env, cwd=logdir,
                                        stdin=subprocess.DEVNULL)
                timed_out = self._wait(proc, label, mode.runtime, timeout=mode.runtime + PGBENCH_GRACE_S,
                                       cluster=cluster)
            elapsed = time.monotonic() - started
            device = counter.delta(dev_before) if counter else {}
            evidence = sandbox.test_evidence()
            server_error = None
            if cluster.running():
                stats_after = self._server_stats(cluster, wait_idle=True)
            else:
                stats_after, server_error = {}, "postgres stopped during the run"
            files = _log_files(logdir, "pgbench")
            with gzip.open(self.run.path / "raw" / f"{stem}.log.gz", "wt") as packed:
                lines = []
                for path in files:
                    text = path.read_text(errors="replace")
                    packed.write(text)
                    lines += text.splitlines()
            latency = latency_summary(lines)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        self.run.update(commands=self.commands)
        text = raw.read_text(errors="replace")
        summary = parse_output(text)
        errors = []
        if timed_out:
            errors.append(f"pgbench did not finish within {mode.runtime + PGBENCH_GRACE_S:.0f} s and was killed")
        elif proc.returncode != 0:
            errors.append("pgbench " + _failure(proc.returncode, text, cluster))
        if server_error:
            errors.append(server_error)
        if "tps" not in summary and not errors:
            errors.append("pgbench printed no tps line")
        if evidence.get("oom_killed"):
            errors.append(evidence.get("oom_reason") or "OOM kill in the memory cgroup")
        if rep == 0:
            cluster.check_running()
            return {"tps": summary.get("tps"), "error": "; ".join(errors) or None, "raw": f"raw/{stem}.txt"}
        block = self.run.manifest["pgbench"].get("block_size") or 8192
        delta = {k: stats_after[k] - stats_before[k] for k in stats_after if stats_before.get(k) is not None}
        data_read = delta.get("blks_read") * block if "blks_read" in delta else None
        flags = []
        if counter and data_read and flag_cache_suspect(data_read, device.get("read_bytes") or 0):
            flags.append("cache_suspect")
        if evidence.get("oom_killed"):
            flags.append("oom_killed")
        m = self.run.manifest
        row = {
            "run_id": m["run_id"], "host": m["host"], "label": m["label"], "recipe": self.recipe.name,
            "test": mode.test, "rep": rep, "direction": "randrw", "bs": block, "iodepth": 1, "numjobs": clients,
            "bw_mbps": math.nan, "iops": math.nan,
            "lat_mean_us": latency.get("mean_us"), "lat_p50_us": latency.get("p50_us"),
            "lat_p99_us": latency.get("p99_us"), "lat_p999_us": latency.get("p999_us"),
            "lat_max_us": latency.get("max_us"), "cpu_usr_pct": math.nan, "cpu_sys_pct": math.nan,
            "io_bytes": math.nan, "runtime_s": summary.get("duration_s", mode.runtime), "isolation": sandbox.mode,
            "error": "; ".join(errors) or None,
            "target": self.targets[0].name, "tool": "pgbench", "job": stem, "flags": ";".join(flags) or None,
            "tps": summary.get("tps"), "clients": clients, "threads": threads, "scale": options.scale,
            "protocol": options.protocol, "sync_commit": mode.synchronous_commit, "fsync": mode.fsync,
            "transactions": summary.get("transactions"),
            "failed_transactions": summary.get("failed_transactions", latency.get("not_completed")),
            "lat_avg_ms": summary.get("lat_avg_ms"), "lat_stddev_ms": summary.get("lat_stddev_ms"),
            "conn_time_ms": summary.get("conn_time_ms"),
            "dev_read_bytes": device.get("read_bytes"), "dev_write_bytes": device.get("write_bytes"),
            "dev_read_ios": device.get("read_ios"), "dev_write_ios": device.get("write_ios"),
            "wal_bytes": delta.get("wal_bytes"), "wal_writes": delta.get("wal_write"),
            "wal_syncs": delta.get("wal_sync"), "data_read_bytes": data_read,
            "data_write_bytes": delta["buffers_written"] * block if "buffers_written" in delta else None,
            "shared_buffers_bytes": options.shared_buffers_bytes,
            "cg_peak_bytes": evidence.get("cg_peak_bytes"), "cg_cache_bytes": evidence.get("cg_cache_bytes"),
            "wall_s": round(elapsed, 3),
        }
        row["valid"] = row["error"] is None
        frame = pd.DataFrame([row])
        self.run.add_results(frame)
        if server_error:
            cluster.check_running()  # raises with the server's last words
        return {**row, "raw": f"raw/{stem}.txt"}

    def _server_stats(self, cluster: Cluster, *, wait_idle: bool = False) -> dict:
        """PostgreSQL's cumulative I/O counters: WAL bytes/writes/syncs, blocks read, buffers written."""
        if wait_idle:  # backends publish their counters when they exit: wait for pgbench's to go
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and cluster.sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid()") != "0":
                time.sleep(0.05)
        columns = ["blks_read", "buffers_written"]
        query = ("SELECT (SELECT sum(blks_read) FROM pg_stat_database), "
                 "(SELECT buffers_checkpoint + buffers_clean + buffers_backend FROM pg_stat_bgwriter)")
        if (cluster.binaries.major or 0) >= 14:
            columns += ["wal_bytes", "wal_write", "wal_sync"]
            query += ", w.wal_bytes, w.wal_write, w.wal_sync FROM pg_stat_wal w"
        values = cluster.sql(query).split("|")
        return {k: int(float(v)) for k, v in zip(columns, values) if v != ""}

    def _wait(self, proc, label: str, expected: float | None, *, timeout: float | None, cluster: Cluster) -> bool:
        """Wait for ``proc`` with a progress bar; kill it after ``timeout``. True when it was killed.

        Ctrl-C: pgbench (in our process group) gets the SIGINT too; it is stopped if it lingers.
        """
        try:
            outcome = progress_.wait(proc, label, expected, progress=self.progress, limit=timeout,
                                    alive=cluster.running)
            if outcome == progress_.LIMIT:
                proc.kill()
                proc.wait()
                return True
            if outcome == progress_.GONE:
                # the server is gone: pgbench may wait for it forever
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        except KeyboardInterrupt:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            raise
        return False


def _failure(returncode: int, text: str, cluster: Cluster) -> str:
    """Why pgbench failed: its own error lines, and the server's when it logged any."""
    lines = [x.strip() for x in text.splitlines() if re.search(r"(error|ERROR|FATAL|PANIC|aborted)", x)]
    message = f"exited with {returncode}: {' | '.join(lines[-3:]) or text.strip()[-300:] or 'no output'}"
    server = cluster.server_errors()
    return f"{message}; the server logged: {server}" if server else message


def _hint(text: str, cluster: Cluster, default: str) -> str:
    if "No space left on device" in text + cluster.server_errors():
        return "the target ran out of space: use a larger target or a smaller options.scale"
    return default


@contextlib.contextmanager
def _signals(signum, handler):
    """``handler`` for ``signum`` while the block runs (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _fmt(seconds: float) -> str:
    return str(max(1, int(round(seconds))))


def _log_tmp(scratch_dir: str) -> str:
    """Where pgbench writes its per-transaction logs: RAM (/dev/shm) when there is one, so that
    logging adds no I/O to the device being measured; else the scratch directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else scratch_dir
