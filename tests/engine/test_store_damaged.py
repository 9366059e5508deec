"""A damaged manifest.json (``[]``, a number, not JSON, not UTF-8) in a data directory: every reader
reports it once, naming the file, and skips that run; a command given that run directory refuses
with one line and exit 2. It once gave a traceback and broke every later ``iolab run``."""
import json
import logging
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import iolab
from iolab.core.errors import IolabError
from iolab.engine import store
from iolab.report import notebooks

from cli_helpers import IOLAB, ROOT, iolab_cli, needs_fio

DAMAGED = {
    "array": b"[]\n",
    "number": b"42\n",
    "string": b'"completed"\n',
    "truncated": b'{"run_id": "x", "status": "runn',
    "latin1": b'{"label": "caf\xe9"}\n',
    "empty": b"",
    "object-without-fields": b"{}\n",
    "mistyped": b'{"run_id": "x", "host": 5, "recipe": "quick", "status": "completed"}\n',
    "tests-not-a-list": b'{"run_id": "x", "host": "h", "recipe": "quick", "status": "running", "tests": 7}\n',
}


def good_run(data: Path) -> Path:
    """A real run directory written by the store, with one result row."""
    run = store.Run.create(data, recipe="quick", label="good", host="goodhost")
    run.add_results(pd.DataFrame([{"run_id": run.run_id, "host": "goodhost", "label": "good", "recipe": "quick",
                                   "test": "seqread", "rep": 1, "direction": "read", "bw_mbps": 100.0}]))
    run.finish("completed")
    return run.path


def damaged_run(data: Path, name: str, content: bytes) -> Path:
    run_dir = data / "badhost" / f"20260101T000000Z-quick-{name}"
    run_dir.mkdir(parents=True)
    (run_dir / store.MANIFEST).write_bytes(content)
    (run_dir / store.RESULTS).write_text("run_id,test\nx,seqread\n")
    return run_dir


@pytest.fixture
def data(tmp_path):
    data = tmp_path / "data"
    good_run(data)
    for name, content in DAMAGED.items():
        damaged_run(data, name, content)
    return data


def damaged_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "manifest" in r.getMessage()]


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_read_manifest_names_the_file(tmp_path, name):
    run_dir = damaged_run(tmp_path, name, DAMAGED[name])
    with pytest.raises(IolabError) as info:
        store.read_manifest(run_dir)
    text = str(info.value)
    assert str(run_dir / "manifest.json") in text and "manifest" in text
    assert "\n" not in text


def test_load_skips_damaged_runs_and_says_so_once(data, caplog):
    caplog.set_level(logging.WARNING)
    frame = iolab.load(data)
    assert list(frame["label"]) == ["good"]
    warnings = damaged_warnings(caplog)
    assert len(warnings) == len(DAMAGED)
    for name in DAMAGED:
        assert sum(f"-quick-{name}/manifest.json" in w for w in warnings) == 1, warnings
    caplog.clear()
    assert list(iolab.load(data)["label"]) == ["good"]  # a notebook loading again: nothing new to say
    assert damaged_warnings(caplog) == []
    assert list(store.manifests(data)["label"]) == ["good"]


def test_a_damaged_manifest_rewritten_is_reported_again(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    run_dir = damaged_run(tmp_path, "again", b"[]")
    iolab.load(tmp_path)
    (run_dir / store.MANIFEST).write_bytes(b"[1, 2, 3]\n")
    caplog.clear()
    iolab.load(tmp_path)
    assert len(damaged_warnings(caplog)) == 1


def test_orphan_scan_skips_damaged_runs(data, caplog):
    """The cleanup's scan of runs stuck at 'running' (every iolab run does it first)."""
    caplog.set_level(logging.WARNING)
    stuck = store.Run.create(data, recipe="quick", host="goodhost")
    manifest = dict(stuck.manifest, pid=2 ** 22 + 1, pid_start=1)  # a pid that no process has
    (stuck.path / store.MANIFEST).write_text(json.dumps(manifest))
    reaped = store.interrupt_orphans(data)
    assert reaped == [stuck.path]
    assert store.read_manifest(stuck.path)["status"] == "interrupted"
    for name, content in DAMAGED.items():  # left exactly as they were
        assert (data / "badhost" / f"20260101T000000Z-quick-{name}" / store.MANIFEST).read_bytes() == content


def test_non_list_tests_field_does_not_break_interrupting():
    manifest = {"status": "running", "tests": 7}
    assert store.mark_interrupted(manifest, "gone")["status"] == "interrupted"


def test_report_selection_from_a_data_directory_skips_damaged_runs(data, caplog):
    caplog.set_level(logging.WARNING)
    manifests = notebooks.select(data_dir=data).manifests
    assert list(manifests["label"]) == ["good"]
    assert len(damaged_warnings(caplog)) == len(DAMAGED)


@pytest.mark.parametrize("name", ["array", "truncated"])
def test_report_of_a_named_damaged_run_is_one_line_exit_2(data, tmp_path, name):
    run_dir = data / "badhost" / f"20260101T000000Z-quick-{name}"
    proc = iolab_cli("report", run_dir, "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("iolab: error:") and str(run_dir / "manifest.json") in lines[0]
    assert "damaged manifest" in lines[0]
    assert not (tmp_path / "out").exists()


def test_report_when_every_manifest_is_damaged_is_one_line_exit_2(tmp_path):
    data = tmp_path / "data"
    damaged_run(data, "array", b"[]")
    proc = iolab_cli("report", "--data", data, "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("iolab: error:")]
    assert len(errors) == 1 and "damaged" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_cleanup_dry_run_names_the_damaged_manifest(data):
    proc = iolab_cli("cleanup", "--dry-run", "--data", data)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for name in DAMAGED:
        assert sum(f"-quick-{name}/manifest.json" in line for line in proc.stderr.splitlines()) == 1, proc.stderr


@needs_fio
def test_a_run_after_a_damaged_manifest_completes(data, tmp_path):
    """What broke every later run: `iolab run` reaps stuck runs in its data directory first."""
    target = tmp_path / "target"
    target.mkdir()
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(target), "--size", "8M", "--runtime", "1",
                                   "--tests", "SEQ1M-Q1T1", "--repeat", "1", "--no-progress", "--data", str(data)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert any("-quick-array/manifest.json" in line for line in proc.stderr.splitlines()), proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert store.read_manifest(run_dir)["status"] == "completed"
    assert (data / "badhost" / "20260101T000000Z-quick-array" / store.MANIFEST).read_bytes() == b"[]\n"


def test_report_of_a_data_directory_skips_the_damaged_run(tmp_path):
    """The real report over a data directory holding a damaged run: written, the damage named once."""
    data = tmp_path / "data"
    shutil.copytree(ROOT / "tests" / "fixtures" / "data", data)
    bad = damaged_run(data, "array", b"[]\n")
    proc = iolab_cli("report", "--data", data, "--recipe", "quick", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    named = [line for line in proc.stderr.splitlines() if str(bad / "manifest.json") in line]
    assert len(named) == 1 and named[0].startswith("iolab: WARNING:"), proc.stderr
    html = Path(proc.stdout.strip().splitlines()[-1])
    assert html.suffix == ".html" and "damaged manifest" not in html.read_text()
