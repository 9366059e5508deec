"""The pgbench engine with real PostgreSQL: results, emulated HDD, and clean-up after every failure.

Every run uses a small scale and a few seconds per client count. Afterwards no
process may have its working directory or command line under the target (the
server's processes all run in the data directory), and no cluster directory
or socket may be left. Targets live under /var/tmp in a directory others may
enter, because the server runs as the unprivileged ``postgres`` account.
"""
import gzip
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import iolab
from iolab.classic import pgbench, pgcluster
from iolab.engine import recipes
from iolab.core.columns import RESULT_COLUMNS
from iolab.core.errors import IolabError

from cli_helpers import IOLAB, ROOT, assert_failed_run, database_server, run_dir_of

IS_ROOT = os.geteuid() == 0
BINARIES, MISSING, needs_root, needs_postgres = database_server(pgcluster.find_binaries, account="postgres")


def recipe_text(*, scale=1, clients=(1, 2), modes=("sync_on", "fsync_off"), runtime=2, extra_options=""):
    settings = {"sync_on": ("on", "on"), "sync_off": ("off", "on"), "fsync_off": ("off", "off")}
    mode_lines = "\n".join(f"    tpcb-{m}: {{synchronous_commit: \"{settings[m][0]}\", fsync: \"{settings[m][1]}\"}}"
                           for m in modes)
    test_lines = "\n".join(f"  - {{name: tpcb-{m}, rw: randrw, bs: 8k}}" for m in modes)
    return (f"name: pgbench-test\nengine: pgbench\ndescription: small pgbench for the tests\n"
            f"isolation: cgroup\nfilesystem: ext4\n"
            f"defaults: {{size: 64M, runtime: {runtime}, repeat: 1}}\n"
            f"options:\n  scale: {scale}\n  clients: {list(clients)}\n{extra_options}  modes:\n{mode_lines}\n"
            f"tests:\n{test_lines}\n")


def write_recipe(directory: Path, **kwargs) -> Path:
    path = directory / "pgbench-test.yaml"
    path.write_text(recipe_text(**kwargs))
    return path


def run_cli(recipe: Path, target, data: Path, *extra, env=None, prefix=(), timeout=300):
    argv = [*prefix, *IOLAB, "run", str(recipe), "--target", str(target), "--data", str(data), "--no-progress",
            *extra]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def processes_under(path) -> list[str]:
    """Processes whose working directory or command line is under ``path``."""
    path = os.path.realpath(path)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd == path or cwd.startswith(path + "/") or path + "/" in cmdline:
            if "pytest" not in cmdline and str(os.getpid()) != pid:
                found.append(f"{pid}: {cmdline.strip()} (cwd {cwd})")
    return found


def assert_cleaned_up(target: Path) -> None:
    assert processes_under(target) == []
    root = target / pgcluster.CLUSTER_DIR
    assert not root.exists(), list(root.rglob("*"))
    assert not pgcluster.socket_in_use(root / f".s.PGSQL.{pgcluster.PORT}")


@pytest.fixture
def pg_target():
    """A directory the postgres account can reach (pytest's tmp dirs are 0700 root-only)."""
    path = Path(tempfile.mkdtemp(prefix="iolab-pgtest-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- options (no server)

def load(text: str, tmp_path: Path):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return recipes.load(str(path))


@pytest.mark.parametrize("change, field, message", [
    (("scale: 1", "scale: 0"), "options.scale", "whole number"),
    (("clients: [1, 2]", "clients: [1, 1]"), "options.clients", "twice"),
    (("clients: [1, 2]", "clients: []"), "options.clients", "non-empty"),
    (("  scale: 1\n", "  scale: 1\n  protocol: fancy\n"), "options.protocol", "prepared"),
    (("  scale: 1\n", "  scale: 1\n  shared_buffers: 400M\n"), "options.shared_buffers", "half"),
    (("  scale: 1\n", "  scale: 1\n  settings: {fsync: off}\n"), "options.settings.fsync", "set by iolab"),
    (("  scale: 1\n", "  scale: 1\n  turbo: true\n"), "options", "unknown field 'turbo'"),
    (('fsync: "off"}', 'fsync: "maybe"}'), "options.modes.tpcb-fsync_off.fsync", "on, off"),
    (('tpcb-fsync_off: {', 'tpcb-other: {'), "options.modes.tpcb-other", "names no test"),
    (("{name: tpcb-sync_on, rw: randrw, bs: 8k}", "{name: tpcb-sync_on, rw: read, bs: 8k}"),
     "tests[0] (tpcb-sync_on).rw", "randrw"),
    (("{name: tpcb-sync_on, rw: randrw, bs: 8k}", "{name: tpcb-sync_on, rw: randrw, bs: 8k, iodepth: 4}"),
     "tests[0] (tpcb-sync_on).iodepth", "means nothing to pgbench"),
])
def test_options_are_checked_naming_file_and_field(tmp_path, change, field, message):
    text = recipe_text()
    assert change[0] in text
    recipe = load(text.replace(change[0], change[1], 1), tmp_path)
    with pytest.raises(IolabError) as err:
        pgbench.parse_options(recipe, mem_limit=512 * 1024**2)
    assert f"r.yaml: {field}:" in str(err.value) and message in str(err.value)


def test_options_defaults_and_yaml_booleans(tmp_path):
    text = recipe_text().replace('"on"', "on").replace('"off"', "off")  # YAML 1.1 reads these as booleans
    options = pgbench.parse_options(load(text, tmp_path))
    assert [(m.test, m.synchronous_commit, m.fsync) for m in options.modes] == [
        ("tpcb-sync_on", "on", "on"), ("tpcb-fsync_off", "off", "off")]
    assert options.protocol == "simple" and options.shared_buffers_bytes == 128 * 1024**2
    assert options.shared_buffers == "131072kB"  # a unit PostgreSQL reads whatever the user wrote


def test_builtin_recipe_is_valid():
    recipe = recipes.load("pgbench")
    options = pgbench.parse_options(recipe, mem_limit=recipe.defaults["mem_limit"])
    assert recipe.engine == "pgbench" and recipe.isolation == "cgroup" and recipe.filesystem == "ext4"
    assert options.clients == [1, 2, 4, 8]
    assert {m.test: (m.synchronous_commit, m.fsync) for m in options.modes} == {
        "tpcb-sync_on": ("on", "on"), "tpcb-sync_off": ("off", "on"), "tpcb-fsync_off": ("off", "off")}


def test_recipes_lists_pgbench_modes_with_their_settings_not_fio_options():
    proc = subprocess.run([*IOLAB, "recipes", "pgbench"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    listing = proc.stdout.split("\n\n")[-1]  # after the description: the tests
    assert "rw=" not in listing and "bs=" not in listing  # pgbench's tests are not fio jobs
    assert "pgbench -i -s 50" in listing and "1, 2, 4, 8 clients" in listing
    assert [line.split()[:3] for line in listing.splitlines()[1:]] == [
        ["tpcb-sync_on", "synchronous_commit=on", "fsync=on,"], ["tpcb-sync_off", "synchronous_commit=off", "fsync=on,"],
        ["tpcb-fsync_off", "synchronous_commit=off", "fsync=off,"]]
    assert all(line.endswith("60 s per client count") for line in listing.splitlines()[1:])


def test_latency_summary_of_log_lines():
    lines = [f"0 {i} {lat} 0 1795214183 {i}" for i, lat in enumerate(range(1, 1001))]
    lines += ["1 5 failed 0 1795214183 5", "garbage"]
    summary = pgbench.latency_summary(lines)
    assert summary["count"] == 1000 and summary["not_completed"] == 1
    assert summary["mean_us"] == pytest.approx(500.5) and summary["max_us"] == 1000
    assert summary["p50_us"] == pytest.approx(np.percentile(np.arange(1, 1001), 50))
    assert summary["p99_us"] == pytest.approx(990.01) and summary["p999_us"] == pytest.approx(999.001)


def test_wrong_target_kinds_and_direct_isolation_are_refused(tmp_path):
    recipe = write_recipe(tmp_path)
    a_file = tmp_path / "file.dat"
    a_file.write_bytes(b"\0" * 4096)
    # an existing file is refused first by the write safety rules; confirmed, pgbench says why it cannot use it
    proc = run_cli(recipe, a_file, tmp_path / "data")
    assert proc.returncode == 2 and "confirm with --confirm" in proc.stderr, proc.stderr
    proc = run_cli(recipe, a_file, tmp_path / "data", "--confirm", str(a_file))
    assert proc.returncode == 2 and "needs a directory on a mounted file system, not a file" in proc.stderr, proc.stderr
    proc = run_cli(recipe, tmp_path, tmp_path / "data2", "--isolation", "direct")
    assert proc.returncode == 2 and "buffered I/O" in proc.stderr


# --------------------------------------------------------------------------- real runs

@pytest.fixture(scope="module")
def dir_run():
    """One real run on a directory target: scale 1, clients 1 and 2, sync on and fsync off, 2 s each."""
    if not IS_ROOT or BINARIES is None:
        pytest.skip(MISSING or "needs root")
    base = Path(tempfile.mkdtemp(prefix="iolab-pgtest-", dir="/var/tmp"))
    base.chmod(0o755)
    target, data = base / "target", base / "data"
    target.mkdir()
    target.chmod(0o755)
    recipe = write_recipe(base)
    started = time.monotonic()
    proc = run_cli(recipe, target, data)
    elapsed = time.monotonic() - started
    try:
        assert proc.returncode == 0, proc.stderr
        yield Path(proc.stdout.strip().splitlines()[-1]), target, data, elapsed
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_root
@needs_postgres
def test_dir_run_has_a_tps_row_per_mode_and_client_count(dir_run):
    run_dir, target, data, elapsed = dir_run  # (elapsed: the machine's pace, not asserted)
    table = iolab.load(data)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert set(table.columns) - {"run_dir"} == set(RESULT_COLUMNS + pgbench.EXTRA_COLUMNS)
    assert sorted(zip(table.test, table.clients)) == [("tpcb-fsync_off", 1), ("tpcb-fsync_off", 2),
                                                      ("tpcb-sync_on", 1), ("tpcb-sync_on", 2)]
    assert (table.tps > 0).all() and table.error.isna().all() and table.valid.all()
    assert (table.failed_transactions == 0).all() and (table.transactions > 0).all()
    assert (table.numjobs == table.clients).all() and (table.threads == np.minimum(table.clients,
                                                                                   len(os.sched_getaffinity(0)))).all()
    assert (table.tool == "pgbench").all() and (table.isolation == "cgroup").all()
    assert (table.direction == "randrw").all() and (table.bs == 8192).all() and (table.scale == 1).all()
    assert table.bw_mbps.isna().all() and table.iops.isna().all()  # pgbench measures transactions, not I/O
    assert (table.runtime_s == 2).all()
    # per-transaction latencies from the -l log: ordered, and in line with pgbench's own average
    assert (table.lat_p50_us <= table.lat_p99_us).all() and (table.lat_p99_us <= table.lat_p999_us).all()
    assert (table.lat_p999_us <= table.lat_max_us).all()
    assert np.allclose(table.lat_mean_us / 1000, table.lat_avg_ms, rtol=0.05, atol=0.01)
    assert (table.lat_stddev_ms > 0).all()
    # the modes really were in force: no WAL flush at all with fsync=off, one per commit or so with sync on
    sync_on, fsync_off = table[table.test == "tpcb-sync_on"], table[table.test == "tpcb-fsync_off"]
    assert (fsync_off.wal_syncs == 0).all() and (sync_on.wal_syncs > 0.5 * sync_on.transactions).all()
    assert (sync_on.sync_commit == "on").all() and (fsync_off.fsync == "off").all()
    assert (table.wal_bytes > 0).all() and table.dev_write_bytes.notna().all()
    assert (table.cg_peak_bytes > 0).all() and (table.shared_buffers_bytes == 128 * 1024**2).all()


@needs_root
@needs_postgres
def test_dir_run_keeps_raw_output_logs_and_config(dir_run):
    run_dir, target, data, _ = dir_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    info = manifest["pgbench"]
    assert info["server"]["user"] == ("postgres" if _has_user("postgres") else "nobody")
    assert info["server"]["listen_addresses"] == "" and info["server"]["socket"].startswith(str(target))
    assert info["shared_buffers_bytes"] == 128 * 1024**2 and info["mem_limit"] == 512 * 1024**2
    assert manifest["isolation"]["mode"] == "cgroup" and manifest["isolation"]["cgroup"]["memory_limit"] == 512 * 1024**2
    assert info["cleanup"]["cluster_removed"] and info["cleanup"]["stop"] == ["pg_ctl stop -m fast"]
    assert {t["name"]: t["status"] for t in manifest["tests"]} == {"tpcb-sync_on": "completed",
                                                                  "tpcb-fsync_off": "completed"}
    conf = (run_dir / "postgresql.conf").read_text()
    assert "listen_addresses = ''" in conf and f"unix_socket_directories = '{target}/iolab-pgbench'" in conf
    assert "shared_buffers = '131072kB'" in conf
    assert "fsync = off" in (run_dir / "raw" / "tpcb-fsync_off-settings.txt").read_text()
    table = pd.read_csv(run_dir / "results.csv")
    for row in table.itertuples():
        text = (run_dir / "raw" / f"{row.test}-{row.clients}.txt").read_text()
        parsed = pgbench.parse_output(text)  # pgbench's own output, untouched
        assert parsed["tps"] == pytest.approx(row.tps) and parsed["clients"] == row.clients
        assert "TPC-B (sort of)" in text
        with gzip.open(run_dir / "raw" / f"{row.test}-{row.clients}.log.gz", "rt") as handle:
            lines = handle.read().splitlines()
        assert len(lines) == row.transactions  # every transaction of every thread
        assert pgbench.latency_summary(lines)["p99_us"] == pytest.approx(row.lat_p99_us)
    assert "database system is shut down" in (run_dir / "raw" / "postgres.log").read_text()
    initdb = (run_dir / "raw" / "initdb.txt").read_text().splitlines()  # throw-away: no fsync per file, one syncfs
    assert initdb[0].endswith(" --no-sync") and initdb[0].split()[-1] == "--no-sync"
    assert "$ sync -f " + info["server"]["data_directory"] in initdb
    threads = str(min(2, len(os.sched_getaffinity(0))))
    assert manifest["commands"]["raw/tpcb-sync_on-2.txt"][1:7] == ["-c", "2", "-j", threads, "-T", "2"]


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@needs_root
@needs_postgres
def test_dir_run_leaves_nothing_behind(dir_run):
    _, target, _, _ = dir_run
    assert list(target.iterdir()) == []
    assert_cleaned_up(target)


@needs_root
@needs_postgres
def test_emulated_hdd_gives_fewer_tps_than_the_directory_with_sync_commit(dir_run, tmp_path):
    pytest.importorskip("iolab.devices.emulated", reason="emulated devices (iolab/emulated.py) are not in this tree yet")
    recipe = write_recipe(tmp_path, clients=(1,), modes=("sync_on",), runtime=3)
    proc = run_cli(recipe, "emulated:hdd", tmp_path / "data", "--no-ceiling-probe")
    assert proc.returncode == 0, proc.stderr
    hdd = iolab.load(tmp_path / "data")
    directory = iolab.load(dir_run[2])
    hdd_tps = hdd.tps.iloc[0]
    dir_tps = directory[(directory.test == "tpcb-sync_on") & (directory.clients == 1)].tps.iloc[0]
    assert hdd_tps < dir_tps, (hdd_tps, dir_tps)
    row = hdd.iloc[0]
    assert row.target == "hdd" and row.dev_write_bytes > 0 and row.wal_syncs > 0
    # ground truth: every commit waits for a WAL flush, and the device takes at most 150 write I/Os a second
    assert row.wal_syncs / row.runtime_s <= 150 * 1.1
    manifest = json.loads((Path(proc.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["isolation"]["throttles"][0]["write_iops"] == 150
    assert manifest["pgbench"]["cleanup"]["cluster_removed"]
    mountpoint = manifest["targets"][0]["mountpoint"]
    assert not os.path.exists(mountpoint) or not os.path.ismount(mountpoint)
    assert processes_under(mountpoint) == []


# --------------------------------------------------------------------------- failures and clean-up

@needs_root
@needs_postgres
def test_socket_in_use_is_a_clear_error_and_the_other_server_is_untouched(pg_target, tmp_path):
    other = pgcluster.Cluster(pg_target, BINARIES, log_dir=tmp_path / "other")
    try:
        other.create({})
        other.start()
        proc = run_cli(write_recipe(tmp_path), pg_target, tmp_path / "data")
        assert proc.returncode == 2
        assert "the socket is in use by a running server" in proc.stderr
        assert f"server PID {other.proc.pid}" in proc.stderr
        assert_failed_run(tmp_path / "data", "in use")
        assert other.running() and other.sql("SELECT 1") == "1"  # iolab did not touch what it did not make
        assert (pg_target / "iolab-pgbench" / "data").is_dir()
    finally:
        other.destroy()
    assert_cleaned_up(pg_target)


@needs_root
@needs_postgres
def test_out_of_space_during_init_keeps_the_logs_and_cleans_up(pg_target, tmp_path):
    mnt = pg_target / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m,mode=755", "iolab-pgtest", str(mnt)], check=True)
    try:
        proc = run_cli(write_recipe(tmp_path, scale=20), mnt, tmp_path / "data", "--size", "8M")
        assert proc.returncode == 2, proc.stderr
        assert "pgbench -i -s 20" in proc.stderr and "No space left on device" in proc.stderr
        assert "ran out of space" in proc.stderr
        manifest = assert_failed_run(tmp_path / "data", "No space left on device")
        run_dir = run_dir_of(tmp_path / "data")
        for name in ("initdb.txt", "pgbench-init.txt", "postgres.log"):
            assert (run_dir / "raw" / name).stat().st_size > 0, name
        assert (run_dir / "postgresql.conf").is_file()
        assert manifest["pgbench"]["cleanup"]["cluster_removed"]
        assert not (run_dir / "results.csv").exists()  # nothing was measured, nothing is made up
        assert list(mnt.iterdir()) == []
        assert_cleaned_up(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@needs_root
def test_postgres_missing_names_the_debian_package(pg_target, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed to hide the installed PostgreSQL")
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not any(os.access(os.path.join(d, p), os.X_OK) for p in ("postgres", "initdb")))
    env = {**os.environ, "PATH": path}
    hide = "mount -t tmpfs iolab-hide /usr/lib/postgresql && " if os.path.isdir("/usr/lib/postgresql") else ""
    prefix = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", f'{hide}exec "$@"', "sh"]
    probe = subprocess.run(prefix + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private mount namespace here: {probe.stderr.strip()}")
    proc = run_cli(write_recipe(tmp_path), pg_target, tmp_path / "data", env=env, prefix=prefix)
    assert proc.returncode == 2, proc.stderr
    assert "PostgreSQL is not installed" in proc.stderr
    assert "apt-get install postgresql" in proc.stderr and "postgresql-15" in proc.stderr
    assert_failed_run(tmp_path / "data", "PostgreSQL is not installed")
    assert list(pg_target.iterdir()) == []
    assert_cleaned_up(pg_target)


@needs_root
@needs_postgres
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_stops_the_server_and_keeps_what_was_measured(pg_target, tmp_path, how):
    data = tmp_path / "data"
    # 1 client for 2 s, then 2 clients for 2 s: interrupted during the second measurement
    recipe = write_recipe(tmp_path, clients=(1, 2), modes=("sync_on",), runtime=2)
    proc = subprocess.Popen([*IOLAB, "run", str(recipe), "--target", str(pg_target), "--data", str(data),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(data.glob("*/*/raw/tpcb-sync_on-2.txt")):
            time.sleep(0.05)
        time.sleep(0.5)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: iolab and pgbench get it
        else:
            proc.terminate()  # `kill PID`, a service manager, a CI timeout: only iolab gets it
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    run_dir = run_dir_of(data)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["tests"][0]["status"] == "interrupted"
    assert manifest["pgbench"]["cleanup"]["cluster_removed"]
    table = pd.read_csv(run_dir / "results.csv")
    assert list(table.clients) == [1] and table.tps.iloc[0] > 0  # the finished measurement is kept
    assert list(pg_target.iterdir()) == []
    assert_cleaned_up(pg_target)
