"""The reaper acts only on what it can judge: entries of another PID namespace are left alone (with
why), entries of an earlier boot are dead, and a damaged or planted entry is reported, never acted on.

The ledger tests use a private ledger (``IOLAB_STATE_DIR``); the PID-namespace test uses the
machine's own, with a real huge-page holder, and a real ``iolab cleanup`` run by
``unshare --pid --fork --mount-proc``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from iolab.core import owner, ownership
from iolab.core.errors import IolabError
from iolab.engine import reaper
from iolab.isolation import hugepages

from cli_helpers import IOLAB, ROOT, needs_root

HAS_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages").exists()


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    path = tmp_path / "owned"
    monkeypatch.setenv(ownership.ENV, str(path))
    return path


@pytest.fixture
def dead_pid():
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def _entry(kind: str, ident: str, **fields) -> dict:
    data = {"kind": kind, "id": ident, "owner": {"pid": 1, "start": 0, "boot": owner.boot_id(),
                                                   "pidns": owner.pid_namespace()},
            "undo": "x", "details": {}, "created": "2026-11-26T00:00:00Z"}
    data.update(fields)
    return data


def _plant(ledger: Path, name: str, content) -> Path:
    ledger.mkdir(mode=0o700, exist_ok=True)
    path = ledger / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _cleanup(*args, env=None, prefix=()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *IOLAB, "cleanup", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_damaged_and_planted_entries_are_reported_and_skipped(ledger, tmp_path, dead_pid):
    precious = tmp_path / "precious.img"
    precious.write_text("keep\n")
    target = str(precious)
    name = ownership._file_name  # noqa: SLF001 - the name an entry of this kind and id must have
    dead = {"pid": dead_pid, "start": 0, "boot": owner.boot_id(), "pidns": owner.pid_namespace()}
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps(_entry("file", target, owner=dead)))
    planted = {
        "not JSON": ("file-1.json", "{not json"),
        "a JSON list, not an object": ("file-2.json", []),
        "owner.pid is '12'": (name("file", target + "3"), _entry("file", target + "3", owner={**dead, "pid": "12"})),
        "owner.pid is 1000000000000": (name("file", target + "4"),
                                       _entry("file", target + "4", owner={**dead, "pid": 10**12})),
        "renamed or planted": ("file-0123456789abcdef.json", _entry("file", target, owner=dead)),
        "not the cgroup": (name("cgroup", "iolab-1-ab"),
                           _entry("cgroup", "iolab-1-ab", owner=dead, details={"dirs": ["/sys/fs/cgroup"]})),
        "on a cgroup file system": (name("cgroup", "etc"), _entry("cgroup", "etc", owner=dead, details={"dirs": ["/etc"]})),
        "registers no undo": (name("pgcluster", target),
                              _entry("pgcluster", target, owner=dead, undone_by="iolab.cli.lab")),
        "not the name of an iolab module": (name("mariadb", target),
                                            _entry("mariadb", target, owner=dead, undone_by="shutil")),
        "not a whole number": (name("hugepages", f"pid-{dead_pid}"),
                               _entry("hugepages", f"pid-{dead_pid}", owner={**dead, "start": -1})),
    }
    paths = {why: _plant(ledger, file_name, content) for why, (file_name, content) in planted.items()}
    link = ledger / name("file", target)
    link.symlink_to(victim)  # a link in the ledger is not read through
    found = reaper.survey()
    assert found.stale == [] or all(s.record is None for s in found.stale)  # name-found objects are others'
    for why, path in paths.items():
        lines = [line for line in found.damaged if str(path) in line]
        assert len(lines) == 1 and why in lines[0], (why, found.damaged)
    assert any(str(link) in line and "symbolic links" in line for line in found.damaged), found.damaged
    dry = _cleanup("--dry-run", "--data", tmp_path / "data", env={ownership.ENV: str(ledger)})
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert sum(line.startswith("skipped damaged ledger entry") for line in dry.stdout.splitlines()) == 11
    assert "Traceback" not in dry.stderr
    assert precious.read_text() == "keep\n" and all(p.exists() for p in paths.values()) and link.is_symlink()


@needs_root
@pytest.mark.skipif(not HAS_HUGEPAGES, reason="this kernel has no huge pages")
def test_a_planted_claim_of_a_million_huge_pages_is_not_trusted(ledger, tmp_path, dead_pid):
    ownership.record("hugepages", f"pid-{dead_pid}", undo="nr_hugepages -= 1000000", pages=1_000_000,
                     by=ownership.Owner(dead_pid, 0, owner.boot_id(), owner.pid_namespace()))
    item = next(s for s in reaper.survey().stale if s.kind == "hugepages")
    before = hugepages.HugePagePool().total()
    for dry_run in (True, False):
        with pytest.raises(IolabError, match=f"claims 1000000 huge pages of PID {dead_pid}, but the pool holds "
                                             r"\d+ of which live iolab runs hold \d+: not trusted"):
            reaper._undo(item, dry_run=dry_run)  # noqa: SLF001
    dry = _cleanup("--dry-run", "--data", tmp_path / "data", env={ownership.ENV: str(ledger)})
    assert dry.returncode == 1, dry.stdout + dry.stderr
    line = next(x for x in dry.stdout.splitlines() if x.startswith(f"PID {dead_pid}:"))
    assert line.startswith(f"PID {dead_pid}: could not undo hugepages pid-{dead_pid}: ") and "not trusted" in line
    assert "would give back" not in dry.stdout.split(f"PID {dead_pid}:", 1)[1].split("\n", 1)[0]
    assert ownership.find("hugepages", f"pid-{dead_pid}") is not None  # left for a human
    after = hugepages.HugePagePool().total()
    if after != before:
        print(f"note: nr_hugepages {before} -> {after}: other iolab runs changed the pool meanwhile")
    ownership.drop(ownership.find("hugepages", f"pid-{dead_pid}"))


@needs_root
def test_an_entry_of_an_earlier_boot_is_reaped_even_where_its_pid_lives(ledger, tmp_path):
    """PID 1 of a new PID namespace and this test's own PID both run; a record of another boot is dead
    all the same, and is reaped by a cleanup in another PID namespace too (boots are machine-wide)."""
    old, mine = tmp_path / "iolab-old-boot.img", tmp_path / "iolab-this-boot.img"
    old.write_text("left by a run before the reboot\n")
    mine.write_text("this process's\n")
    me = ownership.me()
    earlier = str(uuid.uuid4())
    ownership.record("file", str(old), undo="rm", by=ownership.Owner(me.pid, me.start, earlier, me.pidns),
                     inode=old.stat().st_ino)
    ownership.record("file", str(mine), undo="rm", inode=mine.stat().st_ino)
    verdict, why = ownership.find("file", str(old)).owner.verdict()
    assert verdict == owner.GONE and why == f"it ran in an earlier boot ({earlier})"
    done = _cleanup("--data", tmp_path / "data", env={ownership.ENV: str(ledger)},
                    prefix=("unshare", "--pid", "--fork", "--mount-proc"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"PID {me.pid}: removed backing file {old}" in done.stdout
    assert f"PID {me.pid}: left alone file {mine}: its owner lives in PID namespace pid:[{me.pidns}]" in done.stdout
    assert not old.exists() and ownership.find("file", str(old)) is None
    assert mine.exists() and ownership.find("file", str(mine)) is not None
    ownership.forget("file", str(mine))


HOLDER = textwrap.dedent("""
    import time
    from iolab.isolation.sandbox import open_sandbox
    with open_sandbox("hugepages", hugepages_bytes="16M") as box:
        print(box.hugepages["reserved_pages"], flush=True)
        time.sleep(600)
""")


@needs_root
@pytest.mark.skipif(not HAS_HUGEPAGES, reason="this kernel has no huge pages")
def test_cleanup_in_another_pid_namespace_leaves_this_namespaces_entries_alone(tmp_path, monkeypatch):
    monkeypatch.delenv(ownership.ENV, raising=False)  # the machine's own ledger, as every run has it
    env = {k: v for k, v in os.environ.items() if k != ownership.ENV}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert int(holder.stdout.readline()) == 8
        here = owner.pid_namespace()
        unshared = ("unshare", "--pid", "--fork", "--mount-proc")
        for args in (["--dry-run"], []):  # neither judges: the real cleanup would take the pages back
            done = subprocess.run([*unshared, *IOLAB, "cleanup", *args, "--data", str(tmp_path / "data")],
                                  capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            line = next(x for x in done.stdout.splitlines() if x.startswith(f"PID {holder.pid}:"))
            assert line.startswith(f"PID {holder.pid}: left alone hugepages pid-{holder.pid}: its owner lives in "
                                   f"PID namespace pid:[{here}], this process in pid:["), line
            assert f"PID {holder.pid} here is not that process, so it is not judged" in line
            assert "objects named by their owner's PID (cgroups, loop devices" in done.stdout
            assert "would give back" not in line and "gave back" not in done.stdout
            assert hugepages.hugepage_holders().get(holder.pid) == 8
        # and from this namespace, the live holder is judged alive: nothing of it is touched
        done = _cleanup("--dry-run", "--data", tmp_path / "data", env=env)
        assert f"PID {holder.pid}:" not in done.stdout
    finally:
        holder.kill()
        holder.wait()
        lines = [x for x in reaper.reap() if x.startswith(f"PID {holder.pid}:")]
    # (another engineer's reaper may have given them back first: the same code)
    assert lines == [] or lines[0].startswith(f"PID {holder.pid}: gave back 8 huge pages of PID {holder.pid}"), lines
    assert ownership.find("hugepages", f"pid-{holder.pid}") is None


def test_an_undo_registered_under_its_name_undoes_the_record(ledger, tmp_path, dead_pid):
    """How a new kind of object registers its undo: ``ownership.register_undo(__name__, undo_stale)``
    in its module, and ``undone_by=__name__`` in its records."""
    calls = []

    def undo_stale(ident, details, *, dry_run):
        calls.append((ident, details, dry_run))
        return f"{'would undo' if dry_run else 'undid'} {ident}"

    ownership.register_undo("iolab.engine.test_only_undo", undo_stale)
    with pytest.raises(ValueError, match="its module's name"):
        ownership.register_undo("os.system", undo_stale)
    thing = str(tmp_path / "thing")
    ownership.record("file", thing, undo="undo it", undone_by="iolab.engine.test_only_undo",
                     by=ownership.Owner(dead_pid, 0, owner.boot_id(), owner.pid_namespace()), size=3)
    item = next(s for s in reaper.survey().stale if s.record is not None)
    assert reaper._undo(item, dry_run=True) == f"would undo {thing}"  # noqa: SLF001
    lines = [x for x in reaper.reap_unlocked() if x.startswith(f"PID {dead_pid}:")]
    assert lines == [f"PID {dead_pid}: undid {thing}"] and calls[-1] == (thing, {"size": 3}, False)
    assert ownership.find("file", thing) is None


def test_an_owner_of_no_recorded_namespace_is_judged_only_from_the_first_one():
    """Records written before owners carried their PID namespace ran in the machine's first one."""
    code = ("from iolab.core import owner; import os; "
            "print(owner.verdict(os.getpid(), pidns=None)[0], owner.verdict(os.getpid())[1])")
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout.split(" ", 1)
    if owner.pid_namespace() != owner.INITIAL_PID_NS:
        pytest.skip("these tests do not run in the machine's first PID namespace")
    assert here[0] == owner.ALIVE
    if os.geteuid() != 0:
        return
    there = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
                           capture_output=True, text=True, cwd=ROOT)
    verdict, why = there.stdout.split(" ", 1)
    assert verdict == owner.FOREIGN and "its owner lives in an unrecorded PID namespace" in why, there.stdout


@needs_root
def test_a_run_of_another_pid_namespace_is_not_marked_interrupted(tmp_path, dead_pid):
    """Run manifests carry their process's PID namespace too (``owner.current()``)."""
    run_dir = tmp_path / "data" / "host" / "20261126T000000Z-x-0000"
    run_dir.mkdir(parents=True)
    manifest = {"run_id": run_dir.name, "host": "host", "recipe": "x", "status": "running", **owner.current(),
                "pid": dead_pid}
    assert manifest["pid_ns"] == owner.pid_namespace()
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    env = {ownership.ENV: str(tmp_path / "owned")}
    there = _cleanup("--dry-run", "--data", tmp_path / "data", env=env,
                     prefix=("unshare", "--pid", "--fork", "--mount-proc"))
    assert there.returncode == 0 and "would mark run" not in there.stdout, there.stdout + there.stderr
    here = _cleanup("--dry-run", "--data", tmp_path / "data", env=env)
    assert f"would mark run {run_dir} interrupted (its iolab process {dead_pid} is gone)" in here.stdout, here.stdout
