"""Stale state is reaped: what a killed iolab leaves (loop device, backing file, mount, cgroups,
huge pages, a manifest stuck at ``running``) is undone by ``iolab cleanup`` and by the next run.

These tests kill real ``iolab run`` processes on real emulated devices. Other engineers' runs on
this machine reap too (every run starts with a reap), so between the kill and the assertions the
test holds the reapers' lock (:func:`iolab.core.ownership.locked`); a dry run does not take it. Once the
lock is let go, another reaper may undo the objects before ``iolab cleanup`` does (the same code):
what is then checked is that everything is gone.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from iolab.isolation import cgroups, hugepages
from iolab.devices import emulated
from iolab.core import ownership
from iolab.engine import reaper

from cli_helpers import IOLAB, ROOT, live_processes, needs_fio, needs_root

MiB = 1024**2

SLOW_RECIPE = """
name: slow-read
description: one long buffered read on an emulated device with a file system (reaper tests)
isolation: cgroup
filesystem: ext4
defaults:
  size: 32M
  runtime: 120
  repeat: 1
  mem_limit: 64M
fio:
  ioengine: psync
tests:
  - name: seqread
    rw: [read]
    bs: 1M
"""

SHORT_RECIPE = """
name: short-read
description: one 1-second O_DIRECT read (reaper tests)
isolation: direct
defaults:
  size: 16M
  runtime: 1
  repeat: 1
fio:
  ioengine: psync
  direct: 1
tests:
  - name: seqread
    rw: [read]
    bs: 1M
"""


def nr_hugepages() -> int:
    return int(Path("/proc/sys/vm/nr_hugepages").read_text())


def _mounts_of(pid: int) -> list[str]:
    return [m["mountpoint"] for m in emulated.mounts() if m["owner"] == pid]


def _objects_of(pid: int) -> dict:
    """Everything on the machine that names ``pid`` as its owner."""
    return {
        "loops": emulated.leftovers(owner=pid),
        "mounts": _mounts_of(pid),
        "cgroups": cgroups.leftovers(owner=pid),
        "files": [f["path"] for f in emulated.stale_backing_files() if f["owner"] == pid],
        "records": [r.describe() for r in ownership.records() if r.owner.pid == pid],
    }


def _start_run(tmp_path, recipe_text: str, target: str, *extra) -> subprocess.Popen:
    recipe = tmp_path / f"recipe-{time.monotonic_ns()}.yaml"
    recipe.write_text(recipe_text)
    return subprocess.Popen(IOLAB + ["run", str(recipe), "--target", target, "--data", str(tmp_path / "data"),
                                     "--no-progress", "--no-ceiling-probe", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "TMPDIR": "/var/tmp"})


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait_for_objects(proc: subprocess.Popen, timeout: float = 90) -> dict:
    """Poll until the run's loop device, mount, cgroups exist and the test's fio runs in them."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"iolab run ended early ({proc.returncode}): {err[-2000:]}")
        objects = _objects_of(proc.pid)
        tasks = cgroups.tasks_in(objects["cgroups"])
        measuring = [t for t in tasks if "seqread.fio" in _cmdline(t)]  # not the layout's fio
        if objects["loops"] and objects["mounts"] and objects["cgroups"] and measuring:
            return objects
        assert time.monotonic() < deadline, f"the run's objects did not all appear: {objects}"
        time.sleep(0.1)


def _cleanup(*args) -> subprocess.CompletedProcess:
    return subprocess.run(IOLAB + ["cleanup", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture
def runs():
    """Runs started by the test; killed and reaped afterwards, also when the test fails."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    reaper.reap()
    for proc in started:
        left = {k: v for k, v in _objects_of(proc.pid).items() if v}
        assert not left, f"run {proc.pid} left {left}"


def _manifest(tmp_path) -> dict:
    return json.loads(next((tmp_path / "data").glob("*/*/manifest.json")).read_text())


@needs_root
@needs_fio
def test_cleanup_undoes_everything_a_killed_run_left(tmp_path, runs):
    hugepages_before = nr_hugepages()
    others_before = hugepages.hugepage_holders()
    proc = _start_run(tmp_path, SLOW_RECIPE, "emulated:hdd")
    runs.append(proc)
    objects = _wait_for_objects(proc)
    loop = objects["loops"][0]
    with ownership.locked():  # no other engineer's run reaps these before we have looked
        proc.kill()
        proc.communicate()
        assert not ownership.pid_alive(proc.pid)
        dry = _cleanup("--dry-run", "--data", tmp_path / "data")
        assert dry.returncode == 0, dry.stderr
        mine = [line for line in dry.stdout.splitlines() if line.startswith(f"PID {proc.pid}:")]
        text = "\n".join(mine)
        assert f"would detach loop device {loop['device']}" in text
        assert f"would unmount {objects['mounts'][0]}" in text
        assert f"would remove backing file {loop['backing_file']}" in text
        # fio dies with iolab (confined, --die-with-parent); if the kernel has not ended it yet, the
        # cgroup's line names it as a task to kill
        assert "would remove cgroup" in text
        assert f"would give back {hugepages.BUFFER_HUGEPAGES} huge pages of PID {proc.pid}" in text
        assert "would mark run" in dry.stdout and "interrupted" in dry.stdout
        # a dry run changes nothing
        assert _objects_of(proc.pid)["loops"] == objects["loops"]
        assert _manifest(tmp_path)["status"] == "running"
    done = _cleanup("--data", tmp_path / "data")  # (another engineer's run may reap the objects first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "marked run" in done.stdout  # the data directory is this test's: only this cleanup sees it
    left = {k: v for k, v in _objects_of(proc.pid).items() if v}
    assert not left, f"left after iolab cleanup: {left}"
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert loop["backing_file"] not in losetup
    findmnt = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    assert objects["mounts"][0] not in findmnt.split()
    assert not Path(loop["backing_file"]).exists()
    assert all(not Path(p).exists() for p in objects["cgroups"])
    assert live_processes(str(tmp_path)) == []  # fio ended with the cgroup
    manifest = _manifest(tmp_path)
    assert manifest["status"] == "interrupted" and str(proc.pid) in manifest["reason"]
    others_now = hugepages.hugepage_holders()
    if not others_before and not others_now:
        assert nr_hugepages() == hugepages_before
    else:
        print(f"note: other iolab runs hold huge pages ({others_before} / {others_now}); "
              f"nr_hugepages {hugepages_before} -> {nr_hugepages()}")


@needs_root
@needs_fio
def test_a_live_runs_objects_are_not_reaped(tmp_path, runs):
    proc = _start_run(tmp_path, SLOW_RECIPE, "emulated:hdd")
    runs.append(proc)
    objects = _wait_for_objects(proc)
    done = _cleanup("--data", tmp_path / "data")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"PID {proc.pid}:" not in done.stdout
    assert _objects_of(proc.pid)["loops"] == objects["loops"]
    assert _mounts_of(proc.pid) == objects["mounts"]
    assert all(Path(p).exists() for p in objects["cgroups"])
    assert _manifest(tmp_path)["status"] == "running"
    assert reaper.stale_loops().get(objects["loops"][0]["device"]) is None
    proc.send_signal(signal.SIGTERM)  # the run cleans up after itself
    proc.communicate(timeout=120)
    assert _manifest(tmp_path)["status"] == "interrupted"


@needs_root
@needs_fio
def test_a_new_run_reaps_first_and_says_so(tmp_path, runs):
    first = _start_run(tmp_path, SLOW_RECIPE, "emulated:hdd")
    runs.append(first)
    objects = _wait_for_objects(first)
    with ownership.locked():
        first.kill()
        first.communicate()
        devices = subprocess.run(IOLAB + ["devices"], capture_output=True, text=True, cwd=ROOT).stdout
        row = next(line for line in devices.splitlines() if line.startswith(objects["loops"][0]["device"] + " "))
        assert " stale " in row and f"left by iolab process {first.pid}" in row, row
    second = _start_run(tmp_path, SHORT_RECIPE, "emulated:hdd")
    runs.append(second)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-2000:]
    reaped = [line for line in err.splitlines() if "reaped" in line and "left by iolab processes" in line]
    assert len(reaped) == 1, err
    first_run = next(p for p in (tmp_path / "data").glob("*/*") if "slow-read" in p.name)
    assert f"marked run {first_run} interrupted" in reaped[0]
    assert json.loads((first_run / "manifest.json").read_text())["status"] == "interrupted"
    left = {k: v for k, v in _objects_of(first.pid).items() if v}
    assert not left, f"the second run did not reap: {left}"
    # and the second run's own manifest says how many huge pages it gave back
    second_manifest = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    buffers = second_manifest["isolation"]["buffer_hugepages"]
    assert buffers["released"] == buffers["reserved_pages"] == hugepages.BUFFER_HUGEPAGES


HOLDER = textwrap.dedent("""
    import sys, time
    from iolab.isolation.sandbox import open_sandbox
    with open_sandbox("hugepages", hugepages_bytes="64M") as box:
        print(box.hugepages["reserved_pages"], flush=True)
        time.sleep(600)
""")


@needs_root
def test_huge_pages_of_a_killed_process_are_given_back(tmp_path, runs):
    """``--isolation hugepages`` reserves all RAM but the limit (here 23 GB on a machine shared with
    other engineers), so the reservation is made with the same code at a small explicit size."""
    if not Path("/proc/sys/vm/nr_hugepages").exists():
        pytest.skip("this kernel has no huge pages")
    before = nr_hugepages()
    others_before = hugepages.hugepage_holders()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    runs.append(proc)
    reserved = int(proc.stdout.readline())
    assert reserved == 32
    with ownership.locked():
        proc.kill()
        proc.wait()
        dry = _cleanup("--dry-run")
        assert f"PID {proc.pid}: would give back 32 huge pages" in dry.stdout, dry.stdout
    done = _cleanup()
    assert done.returncode == 0, done.stdout + done.stderr
    if f"PID {proc.pid}:" not in done.stdout:  # another engineer's run reaped it first: same code
        print(f"note: the pages of PID {proc.pid} were given back by another reaper before ours ran")
    else:
        assert f"PID {proc.pid}: gave back 32 huge pages" in done.stdout, done.stdout
    assert not [r for r in ownership.records("hugepages") if r.owner.pid == proc.pid]
    if not others_before and not hugepages.hugepage_holders():
        assert nr_hugepages() == before


def test_a_reused_pid_is_not_the_owner(tmp_path, monkeypatch):
    """A record naming a live PID with another start time belongs to a process that is gone."""
    monkeypatch.setenv(ownership.ENV, str(tmp_path / "owned"))
    me = ownership.me()
    scratch = tmp_path / "iolab-scratch.img"
    scratch.write_bytes(b"x")
    ownership.record("file", str(scratch), undo="rm", by=ownership.Owner(me.pid, me.start - 1, me.boot))
    ownership.record("file", str(tmp_path / "mine.img"), undo="rm")
    stale = [s for s in reaper.find_stale() if s.record is not None]
    assert [(s.kind, s.id) for s in stale] == [("file", str(scratch))]
    assert reaper._undo(stale[0], dry_run=False) == f"removed backing file {scratch}"
    assert not scratch.exists()


CLUSTER_HOLDER = textwrap.dedent("""
    import sys, time
    from iolab.classic.pgcluster import Cluster, find_binaries
    cluster = Cluster(sys.argv[1], find_binaries(), log_dir=sys.argv[2])
    cluster.create({})
    cluster.start()
    print(cluster.proc.pid, flush=True)
    time.sleep(600)
""")


def _has_postgres() -> bool:
    from iolab.classic import pgcluster
    try:
        pgcluster.find_binaries()
        return True
    except Exception:  # noqa: BLE001 - IolabError: not installed
        return False


@needs_root
@pytest.mark.skipif(not _has_postgres(), reason="PostgreSQL is not installed (apt-get install postgresql)")
def test_the_database_cluster_of_a_killed_run_is_stopped_and_removed(tmp_path, runs):
    import shutil
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="iolab-reaper-pg-", dir="/var/tmp"))  # the server's account must reach it
    base.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER_HOLDER, str(base), str(tmp_path / "logs")],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    runs.append(proc)
    server = None
    try:
        server = int(proc.stdout.readline())
        root = base / "iolab-pgbench"
        assert ownership.find("pgcluster", str(root)).owner.pid == proc.pid
        with ownership.locked():
            proc.kill()
            proc.wait()
            assert ownership.pid_alive(server)  # postgres runs in a session of its own: it outlives iolab
            lines = [x for x in reaper.reap_unlocked() if x.startswith(f"PID {proc.pid}:")]
        assert len(lines) == 1 and f"stopped postgres (PID {server}: pg_ctl stop -m immediate" in lines[0], lines
        assert lines[0].endswith(f"removed cluster {root}")
        deadline = time.monotonic() + 10
        while ownership.pid_alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not ownership.pid_alive(server)
        assert not root.exists() and ownership.find("pgcluster", str(root)) is None
    finally:
        if server and ownership.pid_alive(server):
            os.kill(server, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def test_a_dead_runs_mariadb_directory_is_removed(tmp_path, monkeypatch):
    """sqlbench's server directory (iolab.classic.mariadb records it as kind ``mariadb``) goes with its owner."""
    monkeypatch.setenv(ownership.ENV, str(tmp_path / "owned"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    root = tmp_path / "iolab-sqlbench"
    (root / "data").mkdir(parents=True)
    ownership.record("mariadb", str(root), undo="kill mariadbd; rm -r", by=ownership.Owner.of(gone.pid),
                     undone_by="iolab.classic.mariadb",
                     data=str(root / "data"))
    stale = [s for s in reaper.find_stale() if s.record is not None]
    assert [(s.kind, s.id, s.pid) for s in stale] == [("mariadb", str(root), gone.pid)]
    assert reaper._undo(stale[0], dry_run=True) == f"would remove server directory {root}"
    assert root.exists()
    assert reaper._undo(stale[0], dry_run=False) == f"removed server directory {root}"
    assert not root.exists()
