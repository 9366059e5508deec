"""A whole run is confined (issue 27, item 1): where the gate is wrong, the kernel turns the write
into a failed test with fio's own error, and the manifest says what was reachable.

The gate is made to say "nothing to see" here (the one stand-in in these tests: a gate that misreads
a job, as each of issue 27's reproducers once made it do); fio, bubblewrap, the loop devices and the
run are real.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli_helpers import cli_main, needs_fio, needs_root
from device_fixtures import make_loop, requires, scratch, sh  # noqa: F401  (fixtures)
from iolab.engine import runner
from iolab.engine.jobfile import gate as jobgate
from iolab.isolation import confine

pytestmark = [needs_fio, needs_root, requires("bwrap", "mkfs.ext4")]

UP = "../" * 12


def digest(path, size=8 << 20) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


@pytest.fixture
def victim(make_loop):
    device = make_loop("32M", name="victim")
    sh("mkfs.ext4", "-q", "-F", device)
    return device


def test_a_job_the_gate_misread_fails_its_test_and_the_device_survives(tmp_path, victim, monkeypatch):
    """J1 through the real runner: fio adds the global's file to the job; the gate is made to miss it."""
    monkeypatch.setattr(jobgate, "check", lambda *a, **k: [])
    before = digest(victim)
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious.dat").write_bytes(b"p" * 4096)
    job = tmp_path / "j1.fio"
    job.write_text(f"[global]\nrw=write\nsize=1m\nfilename={UP}{victim}\n[job]\nfilename=ok1.dat\n")
    result = runner.run(str(job), [str(target)], data_dir=str(tmp_path / "data"), progress=False)
    manifest = result.manifest
    assert manifest["status"] == "failed"
    assert "Read-only file system" in manifest["reason"] or "No such file" in manifest["reason"]
    assert digest(victim) == before
    assert (target / "precious.dat").read_bytes() == b"p" * 4096
    box = manifest["confinement"]
    assert box["confined"] is True and box["devices"] == []
    assert str(result.path / "raw") in box["writable"]
    assert not any(w == str(target) for w in box["writable"]), "the whole target directory was writable"


def test_a_block_target_is_the_only_device_inside(tmp_path, make_loop, victim):
    """A confined run on a named raw device writes it; the manifest lists it as the one device bound."""
    named = make_loop("32M", name="named")
    before, victim_before = digest(named, 1 << 20), digest(victim)
    recipe = tmp_path / "w.yaml"
    recipe.write_text("name: w\ndescription: one write\nisolation: direct\n"
                      "defaults: {size: 4M, runtime: 1, repeat: 1}\n"
                      "fio: {ioengine: psync}\n"
                      "tests: [{name: w, description: w, rw: [write], bs: 64k}]\n")
    result = runner.run(str(recipe), [named], data_dir=str(tmp_path / "data"), progress=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    assert result.manifest["confinement"]["devices"] == [named]
    assert digest(named, 1 << 20) != before
    assert digest(victim) == victim_before
    assert result.results["io_bytes"].sum() > 0


def test_without_bubblewrap_a_writing_run_is_refused_unless_unconfined(tmp_path, monkeypatch, capsys, caplog):
    """A machine without bwrap (stood in for by its absence from the lookup): a run that writes is
    refused with the reason and the way out; --unconfined runs it and the manifest says so."""
    monkeypatch.setattr(confine, "bwrap_binary", lambda: None)
    confine.unavailable.cache_clear()
    try:
        target = tmp_path / "target"
        target.mkdir()
        args = ["run", "quick", "--target", str(target), "--size", "4M", "--runtime", "1",
                "--tests", "SEQ1M-Q1T1", "--isolation", "direct", "--data", str(tmp_path / "data"),
                "--no-progress"]
        code, out, err = cli_main(capsys, caplog, *args)
        assert code == 2
        assert "bubblewrap (bwrap) is not installed" in err and "--unconfined" in err
        assert "Traceback" not in err
        assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("manifest.json"))
        code, out, err = cli_main(capsys, caplog, *args, "--unconfined")
        assert code == 0, err
        manifest = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
        assert manifest["confinement"]["confined"] is False
        assert "not installed" in manifest["confinement"]["reason"]
    finally:
        confine.unavailable.cache_clear()
