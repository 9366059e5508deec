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
``dev_read_bytes``/``dev_write_bytes``, the cache flushes the disk received
in ``dev_flushes``. Extra columns: :data:`EXTRA_COLUMNS`.

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
import gzip
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from iolab.core import processes, progress as progress_
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.classic.dbengine import DatabaseEngine
from iolab.classic.pgbench_options import Mode, Options, parse_options
from iolab.classic.pgbench_output import latency_summary, log_files, parse_output
from iolab.classic.pgcluster import Cluster, find_binaries, server_account
from iolab.engine.store import utcnow

log = logging.getLogger(__name__)

__all__ = ["Engine", "EXTRA_COLUMNS", "PGBENCH_GRACE_S", "Mode", "Options", "latency_summary", "parse_options",
           "parse_output"]

#: pgbench gets this long beyond -T before it is killed (vacuum before the run, slow connections).
PGBENCH_GRACE_S = 120
#: Extra result columns of a pgbench row (after the contract columns).
EXTRA_COLUMNS = ["target", "tool", "job", "valid", "flags", "tps", "clients", "threads", "scale", "protocol",
                 "sync_commit", "fsync", "transactions", "failed_transactions", "lat_avg_ms", "lat_stddev_ms",
                 "conn_time_ms", "dev_read_bytes", "dev_write_bytes", "dev_read_ios", "dev_write_ios",
                 "dev_flushes", "wal_bytes", "wal_writes", "wal_syncs", "data_read_bytes", "data_write_bytes",
                 "shared_buffers_bytes", "cg_peak_bytes", "cg_cache_bytes", "wall_s"]



# --------------------------------------------------------------------------- the engine

class Engine(DatabaseEngine):
    """Runs a ``engine: pgbench`` recipe; built and driven by :func:`iolab.engine.runner.run`."""

    TOOL = "pgbench"
    SERVER_WORD = "cluster"
    SETUP_HINT = "make a file system on the device and mount it (iolab setup), then give its directory"
    DIRECT_REFUSAL = ("PostgreSQL does buffered I/O; O_DIRECT isolation cannot apply to it",
                      "use cgroup (default), hugepages or none")
    ROOT_REFUSAL = (" (memory cgroup or huge pages, drop_caches)",
                    "run as root, or use --isolation none: caches are then kept and the results say so")
    REMOVED_KEY = "cluster_removed"

    def __init__(self, recipe, targets, run_, *, mem_limit, progress, scratch_dir):
        super().__init__(recipe, targets, run_, mem_limit=mem_limit, progress=progress, scratch_dir=scratch_dir)
        self.commands: dict = {}

    # ---- checks before anything is created on the target
    def _check(self):
        options = parse_options(self.recipe, mem_limit=self.mem_limit)
        target = self.check_target()
        binaries = find_binaries(options.bindir)
        account = server_account(options.user)
        return options, target, binaries, account

    def execute(self) -> None:
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
            base, sandbox = self.open_target(stack, target)
            cluster = Cluster(base, binaries, log_dir=self.run.path / "raw", account=account)
            info["server"] = cluster.describe()
            self.run.update(isolation=sandbox.describe(), pgbench=info)
            stack.callback(self.destroy, cluster, info)
            self.prepare(cluster, sandbox, options, info)
            counter = self.device_counter(base)
            for mode in options.modes:
                self._mode(cluster, sandbox, options, mode, counter, cores)
            self.run.update(isolation=sandbox.describe())

    def prepare(self, cluster: Cluster, sandbox, options: Options, info: dict) -> None:
        """Create and start the cluster in the sandbox, then initialise pgbench's tables (``pgbench -i``)."""
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

        def measure() -> list:
            errors = []
            cluster.set_mode(mode.settings)
            shown = cluster.sql("SELECT name || ' = ' || setting || coalesce(' ' || unit, '') || '  (' || source || ')'"
                                " FROM pg_settings WHERE source NOT IN ('default', 'override') ORDER BY name")
            self.run.write(f"raw/{mode.test}-settings.txt", shown + "\n")
            if self.recipe.warmup:
                self.measure_step(cluster, sandbox, options, mode, max(options.clients), 0, counter, cores)
            for rep in range(1, self.recipe.repeat + 1):
                for clients in options.clients:
                    if self.recipe.pause and (rep, clients) != (1, options.clients[0]):
                        time.sleep(self.recipe.pause)
                    row = self.measure_step(cluster, sandbox, options, mode, clients, rep, counter, cores)
                    record["runs"].append({"clients": clients, "rep": rep, "tps": row["tps"], "error": row["error"],
                                           "raw": row["raw"]})
                    if row["error"]:
                        errors.append(f"{clients} clients: {row['error']}")
                    record["reps"] = rep
                    self.run.save_manifest()
            return errors

        self.run_test(record, measure)

    def measure_step(self, cluster, sandbox, options, mode: Mode, clients: int, rep: int, counter, cores) -> dict:
        """One pgbench measurement; its row is added to the results (warm-up: not)."""
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
        measured = self._pgbench(cluster, argv, stem, label, mode.runtime)
        logdir = measured.pop("logdir")
        try:
            measured.update(device=counter.delta(dev_before) if counter else {}, evidence=sandbox.test_evidence())
            server_error = None
            if cluster.running():
                stats_after = self._server_stats(cluster, wait_idle=True)
            else:
                stats_after, server_error = {}, "postgres stopped during the run"
            measured["latency"] = self._pack_logs(logdir, stem)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        self.run.update(commands=self.commands)
        text = (self.run.path / "raw" / f"{stem}.txt").read_text(errors="replace")
        summary = parse_output(text)
        errors = _errors(measured, text, summary, server_error, cluster, mode.runtime + PGBENCH_GRACE_S)
        if rep == 0:
            cluster.check_running()
            return {"tps": summary.get("tps"), "error": "; ".join(errors) or None, "raw": f"raw/{stem}.txt"}
        delta = {k: stats_after[k] - stats_before[k] for k in stats_after if stats_before.get(k) is not None}
        row = self.annotate(options, mode, stem, rep, clients, threads, summary, measured, delta, errors, counter,
                            sandbox)
        self.store(pd.DataFrame([row]))
        if server_error:
            cluster.check_running()  # raises with the server's last words
        return {**row, "raw": f"raw/{stem}.txt"}

    def _pgbench(self, cluster, argv, stem: str, label: str, runtime: float) -> dict:
        """Run pgbench (output in raw/<stem>.txt, transaction logs in a fresh directory it returns)."""
        logdir = Path(tempfile.mkdtemp(prefix="iolab-pgbench-log-", dir=_log_tmp(self.scratch_dir)))
        started = time.monotonic()
        try:
            with open(self.run.path / "raw" / f"{stem}.txt", "wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=cluster.env, cwd=logdir,
                                        stdin=subprocess.DEVNULL)
                timed_out = self._wait(proc, label, runtime, timeout=runtime + PGBENCH_GRACE_S, cluster=cluster)
        except BaseException:
            shutil.rmtree(logdir, ignore_errors=True)
            raise
        return {"returncode": proc.returncode, "timed_out": timed_out, "elapsed": time.monotonic() - started,
                "logdir": logdir}

    def _pack_logs(self, logdir: Path, stem: str) -> dict:
        """pgbench's per-thread transaction logs into raw/<stem>.log.gz; their latency summary."""
        with gzip.open(self.run.path / "raw" / f"{stem}.log.gz", "wt") as packed:
            lines = []
            for path in log_files(logdir, "pgbench"):
                text = path.read_text(errors="replace")
                packed.write(text)
                lines += text.splitlines()
        return latency_summary(lines)

    def annotate(self, options, mode: Mode, stem, rep, clients, threads, summary, measured, delta, errors, counter,
                 sandbox) -> dict:
        """The result row of one measurement (contract columns, then :data:`EXTRA_COLUMNS`)."""
        from iolab.isolation.sandbox import flag_cache_suspect
        device, evidence, latency = measured["device"], measured["evidence"], measured["latency"]
        block = self.run.manifest["pgbench"].get("block_size") or 8192
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
            "dev_flushes": device.get("flushes"),
            "wal_bytes": delta.get("wal_bytes"), "wal_writes": delta.get("wal_write"),
            "wal_syncs": delta.get("wal_sync"), "data_read_bytes": data_read,
            "data_write_bytes": delta["buffers_written"] * block if "buffers_written" in delta else None,
            "shared_buffers_bytes": options.shared_buffers_bytes,
            "cg_peak_bytes": evidence.get("cg_peak_bytes"), "cg_cache_bytes": evidence.get("cg_cache_bytes"),
            "wall_s": round(measured["elapsed"], 3),
        }
        row["valid"] = row["error"] is None
        return row

    def _server_stats(self, cluster: Cluster, *, wait_idle: bool = False) -> dict:
        """PostgreSQL's cumulative I/O counters: WAL bytes/writes/syncs, blocks read, buffers written."""
        if wait_idle:  # backends publish their counters when they exit: wait for pgbench's to go
            wait_until(lambda: cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                                           "'client backend' AND pid <> pg_backend_pid()") == "0", 10)
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
            if outcome == progress_.GONE:  # the server is gone: pgbench may wait for it forever
                processes.end(proc, first=None, grace=10)
            elif outcome == progress_.LIMIT:
                processes.end(proc, first=[])
        except KeyboardInterrupt:
            processes.end(proc, grace=5)
            raise
        return outcome == progress_.LIMIT


def _errors(measured: dict, text: str, summary: dict, server_error, cluster: Cluster, limit: float) -> list:
    """What went wrong in one measurement (empty: nothing)."""
    errors = []
    if measured["timed_out"]:
        errors.append(f"pgbench did not finish within {limit:.0f} s and was killed")
    elif measured["returncode"] != 0:
        errors.append("pgbench " + _failure(measured["returncode"], text, cluster))
    if server_error:
        errors.append(server_error)
    if "tps" not in summary and not errors:
        errors.append("pgbench printed no tps line")
    if measured["evidence"].get("oom_killed"):
        errors.append(measured["evidence"].get("oom_reason") or "OOM kill in the memory cgroup")
    return errors


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


def _fmt(seconds: float) -> str:
    return str(max(1, int(round(seconds))))


def _log_tmp(scratch_dir: str) -> str:
    """Where pgbench writes its per-transaction logs: RAM (/dev/shm) when there is one, so that
    logging adds no I/O to the device being measured; else the scratch directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else scratch_dir
