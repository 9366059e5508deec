"""The sqlbench engine with a real MariaDB: results, faults, clean-up, and the article's finding.

Runs use tiny scales (a few hundred statements per test). After every run no
mariadbd may be left, no server directory on the target, no iolab cgroup.
Targets live under /var/tmp in a directory others may enter, because the
server runs as an unprivileged account (``mysql``, else ``nobody``).
"""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import iolab
from iolab.classic import mariadb, sqlbench
from iolab.engine import recipes
from iolab.core.errors import IolabError

from cli_helpers import IOLAB, ROOT, assert_failed_run, database_server, iolab_cli, run_dir_of

IS_ROOT = os.geteuid() == 0
BINARIES, MISSING, needs_root, needs_mariadb = database_server(mariadb.find_binaries, account="mysql")


def _unprivileged() -> str:
    try:
        return pwd.getpwnam("mysql").pw_name
    except KeyError:
        return "nobody"


def recipe_text(*, tests=("create", "select"), scale=0.002, extra_options="", engine=None, repeat=1):
    """A small sqlbench recipe; ``engine`` None leaves the storage engine to the default (MyISAM)."""
    lines = "\n".join(f"  - {{name: {t}, rw: randrw}}" for t in tests)
    engine_line = f"  storage_engine: {engine}\n" if engine else ""
    return (f"name: sqlbench-test\nengine: sqlbench\ndescription: small sql-bench for the tests\n"
            f"isolation: cgroup\nfilesystem: ext4\ndefaults: {{size: 512M, repeat: {repeat}}}\n"
            f"options:\n  scale: {scale}\n  buffer_pool: 32M\n{engine_line}{extra_options}"
            f"tests:\n{lines}\n")


def write_recipe(directory: Path, **kwargs) -> Path:
    path = directory / "sqlbench-test.yaml"
    path.write_text(recipe_text(**kwargs))
    return path


def run_cli(recipe, target, data: Path, *extra, env=None, prefix=(), timeout=600):
    argv = [*prefix, *IOLAB, "run", str(recipe), "--target", str(target), "--data", str(data), "--no-progress",
            *extra]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def mariadbd_processes(under: Path | None = None) -> list[str]:
    """mariadbd processes (whose command line names a path under ``under``: other runs may be going on)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if comm in ("mariadbd", "mysqld") and (under is None or f"{os.path.realpath(under)}/" in cmdline):
            found.append(pid)
    return found


def run_cgroups(data: Path) -> list[str]:
    """The cgroup directories the run recorded in its manifest (other runs may make their own meanwhile)."""
    isolation = json.loads((run_dir_of(data) / "manifest.json").read_text()).get("isolation") or {}
    paths = []
    for key in ("cgroup", "io_cgroup"):
        paths += list(((isolation.get(key) or {}).get("paths") or {}).values())
    return paths


def assert_cleaned_up(target: Path, data: Path | None = None) -> None:
    assert mariadbd_processes(target) == []
    assert not (target / mariadb.SERVER_DIR).exists()
    if data is not None:
        cgroups = run_cgroups(data)
        assert cgroups and not any(os.path.exists(p) for p in cgroups), cgroups


# --------------------------------------------------------------------------- options (no server)

def load(text: str, tmp_path: Path, **kwargs):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return recipes.load(str(path), **kwargs)


@pytest.mark.parametrize("change, field, message", [
    ("  scale: 0\n", "options.scale", "above 0"),
    ("  colour: red\n", "options", "unknown field 'colour'"),
    ("  port: 80\n", "options.port", "1024-65535"),
    ("  storage_engine: Aria\n", "options.storage_engine", "InnoDB, MyISAM"),
    ("  scale: huge\n", "options.scale", "quick or published or a number"),
])
def test_options_are_checked_naming_file_and_field(tmp_path, change, field, message):
    text = recipe_text().replace("  scale: 0.002\n", "")
    text = text.replace("options:\n", "options:\n" + change)
    with pytest.raises(IolabError) as err:
        sqlbench.parse_options(load(text, tmp_path), mem_limit=512 * 1024**2)
    assert field in str(err.value) and message in str(err.value), str(err.value)


def test_unknown_test_name_is_refused(tmp_path):
    with pytest.raises(IolabError, match=r"tests\[0\] \(drop-everything\).*not a sql-bench test"):
        sqlbench.parse_options(load(recipe_text(tests=("drop-everything",)), tmp_path))


def test_builtin_recipe_runs_quick_on_myisam_unless_published_is_asked_for():
    """The defaults: scale quick (1% of the published sizes: minutes, not hours) and the article's engine;
    --preset published is sql-bench's own sizes, and its estimate is hours."""
    builtin = recipes.load("sqlbench")
    assert [t.name for t in builtin.tests] == list(sqlbench.TESTS)
    options = sqlbench.parse_options(builtin.with_overrides(), mem_limit=512 * 1024**2)
    assert (options["scale"], options["scale_name"], options["storage_engine"]) == (0.01, "quick", "MyISAM")
    assert options["settings"]["default-storage-engine"] == "MyISAM"
    assert options["buffer_pool"] <= 128 * 1024**2  # a quarter of 512M at most
    published = sqlbench.parse_options(builtin.with_overrides(preset="published"))
    assert (published["scale"], published["scale_name"]) == (1.0, "published")
    assert sqlbench.estimate_s(1.0, "MyISAM", sqlbench.TESTS) > 3600 > 10 * 60 > sqlbench.estimate_s(
        0.01, "MyISAM", sqlbench.TESTS)
    assert "not comparable with the article" in sqlbench.scale_note(0.01, "quick")
    assert "not comparable" not in sqlbench.scale_note(1.0, "published")


@pytest.mark.parametrize("preset, create, select", [
    (None, "4 tables created, counted and dropped; 100 x create+drop", "1 table of 100 rows"),
    ("published", "400 tables created, counted and dropped; 10000 x create+drop", "1 table of 10000 rows"),
])
def test_recipes_lists_sqlbench_tests_with_their_sizes_not_fio_options(preset, create, select):
    proc = iolab_cli("recipes", "sqlbench", *(["--preset", preset] if preset else []))
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())  # the listing wraps long lines
    assert "rw=" not in proc.stdout and "bs=" not in proc.stdout
    assert f"tests at scale {preset or 'quick'}" in out and "MyISAM tables" in out
    assert f"create {create}" in out and f"select {select}" in out
    assert "stresses: creating, syncing and removing table files" in out


# --------------------------------------------------------------------------- a real run

@pytest.fixture(scope="module")
def dir_run(tmp_path_factory):
    if not IS_ROOT or BINARIES is None:
        pytest.skip(MISSING or "needs root")
    tmp = tmp_path_factory.mktemp("sqlbench")
    tgt = Path(tempfile.mkdtemp(prefix="iolab-sqltest-", dir="/var/tmp"))
    tgt.chmod(0o755)
    try:
        started = time.monotonic()
        proc = run_cli(write_recipe(tmp, tests=("create", "select", "connect"), engine="InnoDB"), tgt, tmp / "data")
        yield proc, tgt, tmp / "data", time.monotonic() - started
    finally:
        shutil.rmtree(tgt, ignore_errors=True)


@needs_root
@needs_mariadb
def test_dir_run_has_one_row_per_test_with_storage_evidence(dir_run):
    proc, tgt, data, _ = dir_run
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert run_dir.parent.parent == data and (run_dir / "manifest.json").is_file()
    frame = iolab.load(data)
    assert list(frame.test) == ["create", "select", "connect"]
    assert (frame.runtime_s > 0).all() and frame.valid.all()
    assert frame.bw_mbps.isna().all() and (frame.tool == "sql-bench").all()
    assert (frame.storage_engine == "InnoDB").all() and (frame.scale == 0.002).all()
    create = frame[frame.test == "create"].iloc[0]
    # 1 table created+dropped 3 times (scale 0.002 of 400 and 10000): InnoDB fsyncs files for each
    assert create.fsyncs > 0 and create.server_write_bytes > 0
    # why select is not flat on InnoDB: its load phase (20 autocommitted INSERTs at scale 0.002) flushes
    # the log at every commit (MyISAM, the default, flushes nothing: test_create_tells_hdd_from_ssd...)
    assert frame[frame.test == "select"].iloc[0].fsyncs >= round(10000 * 0.002)
    parts = json.loads((run_dir / "raw" / "create.json").read_text())["parts_s"]
    assert set(parts) == {"create_MANY_tables", "select_group_when_MANY_tables", "drop_table_when_MANY_tables",
                          "create+drop", "create_key+drop"}
    assert abs(sum(parts.values()) - create.runtime_s) < 0.5  # the test's time is its parts' time
    manifest = json.loads((run_dir / "manifest.json").read_text())
    server = manifest["sqlbench"]["server"]
    # the account rule as root: mysql where it exists, else nobody (Debian's mariadb-server-core, which the tests
    # install, makes no mysql account; the service package mariadb-server would)
    assert server["user"] == _unprivileged() and server["host"] == "127.0.0.1" and server["port"]
    assert manifest["sqlbench"]["cleanup"]["server_removed"]
    assert (run_dir / "raw" / "mariadb.log").stat().st_size > 0  # the server's log is kept
    # what the report prints beside the table: scaled figures are not the article's; the engine and why
    recorded = manifest["sqlbench"]
    assert (recorded["scale"], recorded["scale_name"], recorded["storage_engine"]) == (0.002, "custom", "InnoDB")
    assert "not comparable with the article" in recorded["scale_note"]
    assert "not the article's engine" in recorded["storage_engine_note"]
    assert "--default-storage-engine=InnoDB" in server["argv"]


@needs_root
@needs_mariadb
def test_dir_run_leaves_nothing_behind(dir_run):
    proc, tgt, _, _ = dir_run
    assert proc.returncode == 0, proc.stderr
    assert list(tgt.iterdir()) == []
    assert_cleaned_up(tgt, dir_run[2])


# --------------------------------------------------------------------------- faults

@needs_root
@needs_mariadb
def test_port_in_use_picks_another(target, tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        recipe = write_recipe(tmp_path, tests=("select",), extra_options=f"  port: {taken}\n")
        proc = run_cli(recipe, target, tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((run_dir_of(tmp_path / "data") / "manifest.json").read_text())
    port = manifest["sqlbench"]["server"]["port"]
    assert port and port != taken
    assert_cleaned_up(target, tmp_path / "data")


@needs_root
@needs_mariadb
def test_server_failing_to_start_quotes_its_log(target, tmp_path):
    """Also: published sizes warn with an estimate before anything starts (here it then fails in seconds)."""
    recipe = write_recipe(tmp_path, tests=("select", "create"), scale="published",
                          extra_options="  settings: {no-such-option: 1}\n")
    proc = run_cli(recipe, target, tmp_path / "data")
    assert proc.returncode == 2, proc.stderr
    assert "mariadbd exited with" in proc.stderr and "no-such-option" in proc.stderr, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "expect at least" in line)
    assert "scale published" in warning and "per target on an HDD-like device" in warning, warning
    assert_failed_run(tmp_path / "data", "no-such-option")
    assert (run_dir_of(tmp_path / "data") / "raw" / "mariadb.log").is_file()
    assert_cleaned_up(target, tmp_path / "data")


@needs_root
def test_mariadb_missing_is_one_line_saying_how_to_install(target, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed to hide the installed MariaDB")
    hide = " && ".join(f"mount --bind /dev/null {p}" for p in
                       filter(None, (shutil.which(n, path="/usr/sbin:/usr/bin") for n in
                                     (*mariadb.SERVER_NAMES, *mariadb.INSTALL_DB_NAMES))))
    prefix = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
              f'{hide + " && " if hide else ""}exec "$@"', "sh"]
    probe = subprocess.run(prefix + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private mount namespace here: {probe.stderr.strip()}")
    proc = run_cli(write_recipe(tmp_path), target, tmp_path / "data", prefix=prefix)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "MariaDB is not installed" in errors[0], proc.stderr
    assert "apt-get install mariadb-server" in proc.stderr
    assert list(target.iterdir()) == []


@needs_root
@needs_mariadb
@pytest.mark.parametrize("delay", [0, 3])
def test_sigterm_stops_and_removes_the_server(target, tmp_path, delay):
    data = tmp_path / "data"
    recipe = write_recipe(tmp_path, tests=("connect", "create"), scale=0.05)
    proc = subprocess.Popen([*IOLAB, "run", str(recipe), "--target", str(target), "--data", str(data),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not mariadbd_processes(target):
            time.sleep(0.1)
        assert mariadbd_processes(target), "the server never started"
        time.sleep(delay)  # 0: while mariadb-install-db's bootstrap server runs; 3: during the tests
        proc.terminate()
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    manifest = json.loads((run_dir_of(data) / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest.get("reason")
    assert manifest["sqlbench"]["cleanup"]["server_removed"]
    assert_cleaned_up(target, tmp_path / "data")


# --------------------------------------------------------------------------- the article's finding

#: create: 2 tables + 50 create+drop + 50 create_key+drop; select: 50 rows, each an autocommitted INSERT
FINDING_SCALE = 0.005


def _hdd_and_ssd(tmp_path) -> dict:
    """create and select, one run per emulated device, with the default engine (MyISAM)."""
    rows = {}
    for name in ("hdd", "sata-ssd"):
        data = tmp_path / name
        proc = run_cli(write_recipe(tmp_path, tests=("create", "select"), scale=FINDING_SCALE), f"emulated:{name}",
                       data, "--no-ceiling-probe")
        assert proc.returncode == 0, proc.stderr
        mountpoint = json.loads((run_dir_of(data) / "manifest.json").read_text())["targets"][0]["mountpoint"]
        assert_cleaned_up(Path(mountpoint), data)
        rows[name] = iolab.load(data).set_index("test")
    return rows


@needs_root
@needs_mariadb
def test_create_tells_hdd_from_ssd_and_select_does_not_on_myisam(tmp_path):
    """Table 10's finding, with the article's engine (MyISAM, the recipe's default): only the table
    files are synced, at CREATE TABLE. On the emulated HDD (150 write IOPS) create takes >= 1.5x as
    long as on the emulated SATA SSD; select does not wait on the device on either.

    select's own run time is the CPU's (the server answers from its caches), so on a shared machine
    it varies with the load and is not compared; what the test controls is the device: select's 50
    autocommitted INSERTs are not flushed one by one, so it writes fewer blocks than it inserts rows
    on both devices (its CREATE/DROP TABLE's handful), where InnoDB flushes at least once per row
    (test_dir_run_has_one_row_per_test_with_storage_evidence). create's 100 CREATE TABLEs each flush
    the disk's cache at least once (dev_flushes), select's flushes are a tenth of that at most."""
    pytest.importorskip("iolab.devices.emulated")
    rows = _hdd_and_ssd(tmp_path)
    assert (rows["hdd"].storage_engine == "MyISAM").all()
    create = rows["hdd"].runtime_s["create"] / rows["sata-ssd"].runtime_s["create"]
    assert create >= 1.5, {k: v.runtime_s.to_dict() for k, v in rows.items()}
    inserted = round(10000 * FINDING_SCALE)
    for device in rows.values():
        assert device.dev_write_ios["select"] < inserted and device.fsyncs["select"] < inserted, device.T
    print({k: v[["runtime_s", "dev_write_ios", "dev_flushes"]].to_dict("index") for k, v in rows.items()})
    # the device's part, counted by the kernel: each CREATE TABLE syncs its files (a cache flush or more of
    # the disk under the target, as many on both devices); select's flushes are its own table's handful
    for device in rows.values():
        flushes = device.dev_flushes
        assert flushes["create"] >= 100 and 10 * flushes["select"] <= flushes["create"], device.T


@needs_root
@needs_mariadb
def test_undo_stale_kills_a_lost_server_and_removes_its_directory(target, tmp_path):
    """What the reaper does for a killed iolab's server (once iolab.core.ownership knows the 'mariadb' kind)."""
    server = mariadb.Server(target, log_dir=tmp_path / "log", buffer_pool=16 * 1024**2)
    try:
        server.create()
        server.start()
        pid = server.proc.pid
        details = {"data": str(server.data)}
        assert f"kill mariadbd (PID {pid})" in mariadb.undo_stale(str(server.root), details, dry_run=True)
        assert server.running()  # a dry run touches nothing
        said = mariadb.undo_stale(str(server.root), details, dry_run=False)
        assert f"killed mariadbd (PID {pid})" in said
        server.proc.wait(10)
        assert not server.root.exists() and mariadbd_processes(target) == []
        assert mariadb.undo_stale(str(server.root), details, dry_run=False) is None
    finally:
        server.destroy()
