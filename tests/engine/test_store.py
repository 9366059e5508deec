"""The result store: unique run directories, atomic files, load() over many runs."""
import json
import os

import pandas as pd
import pytest

import iolab
from iolab.core.columns import RESULT_COLUMNS
from iolab.core.errors import IolabError
from iolab.engine.store import Run, atomic_write, run_dirs


def rows(run, n=2, **extra):
    return pd.DataFrame([{"run_id": run.run_id, "host": run.manifest["host"], "label": run.manifest["label"],
                          "recipe": "r", "test": f"T{i}", "rep": 1, "direction": "read",
                          "bw_mbps": 100.0 + i, "iops": 10.0, "error": None, **extra} for i in range(n)])


def test_runs_never_share_a_directory(tmp_path):
    made = {Run.create(tmp_path, recipe="quick", host="h").path for _ in range(50)}
    assert len(made) == 50
    assert all(p.parent == tmp_path / "h" for p in made)


def test_manifest_and_results_survive_a_failed_run(tmp_path):
    run = Run.create(tmp_path, recipe="quick", host="h", label="ssd")
    run.add_results(rows(run))
    run.finish("failed", "fio exited with 1")
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["reason"] == "fio exited with 1"
    assert manifest["ended"] and manifest["label"] == "ssd"
    table = iolab.load(tmp_path)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert len(table) == 2 and set(table["label"]) == {"ssd"}


def test_load_merges_hosts_and_skips_runs_without_results(tmp_path):
    for host in ("a", "b"):
        run = Run.create(tmp_path, recipe="quick", host=host)
        run.add_results(rows(run, 3))
        run.finish("completed")
    Run.create(tmp_path, recipe="quick", host="c")  # started, never measured
    table = iolab.load(tmp_path)
    assert sorted(table["host"].unique()) == ["a", "b"] and len(table) == 6
    assert len(run_dirs(tmp_path)) == 3
    assert len(iolab.manifests(tmp_path)) == 3
    one = iolab.load(run.path)
    assert len(one) == 3


def test_load_errors_name_the_path(tmp_path):
    with pytest.raises(IolabError, match="no-such"):
        iolab.load(tmp_path / "no-such")
    run = Run.create(tmp_path, recipe="quick", host="h")
    (run.path / "manifest.json").write_text("{broken")
    with pytest.raises(IolabError, match="manifest.json"):
        iolab.manifests(run.path)  # named: refused; in a data directory: skipped (test_store_damaged)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x.txt"
    atomic_write(target, "one")

    with pytest.raises(TypeError):
        atomic_write(target, 12345)  # not text or bytes: the write fails midway
    assert target.read_text() == "one"
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()  # readable like any file, not 0600
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def _run_made_by_a_dead_process(data_dir):
    """A run created by another iolab process that then died without finishing it."""
    import subprocess
    import sys
    code = ("import sys; from iolab.engine.store import Run; "
            "r = Run.create(sys.argv[1], recipe='quick', host='h', "
            "tests=[{'name': 'a', 'status': 'completed'}, {'name': 'b', 'status': 'running'}, "
            "{'name': 'c', 'status': 'pending'}]); print(r.path)")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir)], check=True, capture_output=True, text=True)
    from pathlib import Path
    return Path(out.stdout.strip())


def test_manifest_names_its_owner_process(tmp_path):
    from iolab.core.owner import start_ticks
    manifest = Run.create(tmp_path, recipe="quick", host="h").manifest
    assert manifest["pid"] == os.getpid()
    assert manifest["pid_start"] == start_ticks(os.getpid()) and manifest["boot_id"]


def test_interrupt_orphans_marks_runs_of_dead_processes(tmp_path):
    from iolab.engine.store import interrupt_orphans, read_manifest
    dead = _run_made_by_a_dead_process(tmp_path)
    live = Run.create(tmp_path, recipe="quick", host="h")  # this process: alive
    done = Run.create(tmp_path, recipe="quick", host="h")
    done.finish("completed")
    assert interrupt_orphans(tmp_path) == [dead]
    manifest = read_manifest(dead)
    assert manifest["status"] == "interrupted" and "ended without finishing" in manifest["reason"]
    assert manifest["ended"]
    assert [t["status"] for t in manifest["tests"]] == ["completed", "interrupted", "pending"]
    assert "ended without finishing" in manifest["tests"][1]["error"]
    assert read_manifest(live.path)["status"] == "running"
    assert read_manifest(done.path)["status"] == "completed"
    assert interrupt_orphans(tmp_path) == []  # once is enough
    assert interrupt_orphans(tmp_path / "missing") == []


def test_interrupt_orphans_is_not_fooled_by_a_reused_pid(tmp_path):
    from iolab.engine.store import interrupt_orphans, read_manifest
    run = Run.create(tmp_path, recipe="quick", host="h")
    # our PID, but the owner started at another time: that owner is gone, the PID reused
    run.update(pid_start=run.manifest["pid_start"] - 1)
    assert interrupt_orphans(tmp_path) == [run.path]
    legacy = Run.create(tmp_path, recipe="quick", host="h")
    for key in ("pid", "pid_start", "boot_id"):
        legacy.manifest.pop(key)
    legacy.save_manifest()
    assert interrupt_orphans(tmp_path) == []  # no owner recorded: nobody can tell
    assert read_manifest(legacy.path)["status"] == "running"


def test_a_truncated_results_file_is_refused_not_read_as_nans(tmp_path):
    run = Run.create(tmp_path, recipe="quick", host="h")
    run.add_results(rows(run, 3))
    csv = run.path / "results.csv"
    whole = csv.read_text()
    assert len(iolab.load(tmp_path)) == 3
    csv.write_text(whole[: whole.rindex(",100") + 2])  # cut inside the last row, as a full disk would
    with pytest.raises(IolabError, match="truncated results") as info:
        iolab.load(tmp_path)
    assert "results.csv" in str(info.value)
    lines = whole.splitlines(keepends=True)
    csv.write_text("".join(lines[:-1]) + ",".join(lines[-1].split(",")[:5]) + "\n")  # a short last row
    with pytest.raises(IolabError, match="line 4 has 5 of"):
        iolab.load(tmp_path)
