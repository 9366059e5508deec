"""Faults for real (the lab VM): a device-mapper target turns to I/O errors under a running recipe.

A loop device carries a dm device (dmsetup, linear). ``iolab run`` (the CLI's
main in this process: a new iolab process costs ~20 s of imports under TCG)
runs a recipe of two short tests on it; the moment the second test's fio
starts, the table is swapped for one whose first MiB maps the loop device and
whose rest is ``error`` (so its sequential read meets EIO 1 MiB in). The swap is hooked on
iolab.engine.fio.start, so which test meets the fault does not depend on the
guest's speed. The run must end ``failed`` with the I/O error in the failed
test's rows and in the manifest (with the MiB it read before the fault), keep
the first test's rows valid and fio's raw output of both, and hold nothing open: the dm
device is removed right after the run (``dmsetup remove`` fails on an open
device), and the conftest checks no loop, dm, cgroup or mount is left.

The second case puts ext4 on the dm device, mounts it and runs a recipe with
``--target`` the mount point; the table turns to ``error`` when fio starts
laying out the test file, so the run fails before any test, saying why.
"""
import contextlib
import csv
import json
import subprocess
import time
from pathlib import Path

import pytest

from iolab import cli
from iolab.engine import fio

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

DM_NAME = "iolab-lab-faulty"
EIO = "Input/output error"
GOOD_BYTES = 1024**2  # what DURING reads before the fault
RECIPE = """name: faults
description: two short O_DIRECT reads; the device fails under the second
isolation: direct
defaults: {size: 16M, runtime: 1, watchdog_margin: 120}  # a loaded host slows TCG: this is no hang test
fio: {ioengine: psync, direct: 1}
tests:
  - {name: BEFORE, rw: read, bs: 64k}
  - {name: DURING, rw: read, bs: 64k, runtime: 30}  # ends at the fault, 1 MiB in, whatever the speed
"""


def _sh(*argv, stdin: str | None = None) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, input=stdin)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}: {proc.stderr.strip()}"
    return proc.stdout.strip()


class Faulty:
    """A dm device over a loop device whose table can be swapped between ``linear`` and ``error``."""

    def __init__(self, lower: str):
        self.lower = lower
        self.sectors = _sh("blockdev", "--getsz", lower)
        self.path = ""

    def table(self, kind: str) -> str:
        """``linear``: the whole lower device; ``error``: every sector fails; ``error_after_1m``: the
        first MiB reads back, every sector after it fails (a sequential read meets EIO at 1 MiB)."""
        if kind == "linear":
            return f"0 {self.sectors} linear {self.lower} 0"
        if kind == "error":
            return f"0 {self.sectors} error"
        good = GOOD_BYTES // 512
        return f"0 {good} linear {self.lower} 0\n{good} {int(self.sectors) - good} error"

    def create(self) -> None:
        _sh("dmsetup", "create", "--noudevsync", DM_NAME, "--table", self.table("linear"))
        # devtmpfs makes /dev/dm-N at once; without udev a /dev/mapper node is dmsetup's own, best effort
        self.path = "/dev/dm-" + _sh("dmsetup", "info", "-c", "--noheadings", "-o", "minor", DM_NAME)

    def swap(self, kind: str) -> None:
        """Load and activate another table (in-flight I/O is let finish by the suspend)."""
        _sh("dmsetup", "load", DM_NAME, stdin=self.table(kind) + "\n")  # a table of several lines
        _sh("dmsetup", "suspend", "--noudevsync", DM_NAME)
        _sh("dmsetup", "resume", "--noudevsync", DM_NAME)

    def remove(self) -> subprocess.CompletedProcess:
        return subprocess.run(["dmsetup", "remove", "--noudevsync", DM_NAME], capture_output=True, text=True)


@pytest.fixture
def faulty(tmp_path):
    backing = tmp_path / "faulty.img"
    with open(backing, "wb") as handle:
        handle.truncate(64 * 1024**2)
    loop = _sh("losetup", "--find", "--show", "--direct-io=on", backing)
    device = Faulty(loop)
    try:
        device.create()
        yield device
    finally:
        if device.remove().returncode != 0 and Path(device.path).exists():
            subprocess.run(["dmsetup", "remove", "--force", "--noudevsync", DM_NAME], capture_output=True)
        subprocess.run(["losetup", "-d", loop])


@contextlib.contextmanager
def swapped_when(monkeypatch, device: Faulty, swaps: dict):
    """Swap ``device``'s table when fio starts a job file whose name ends with a key of ``swaps``."""
    real_start, seen = fio.start, []

    def start(argv, **kwargs):
        for suffix, kind in swaps.items():
            if str(argv[-1]).endswith(suffix):
                began = time.monotonic()
                device.swap(kind)
                print(f"table {kind} loaded in {time.monotonic() - began:.1f} s")
                seen.append(suffix)
        return real_start(argv, **kwargs)

    monkeypatch.setattr(fio, "start", start)
    yield seen


def run_cli(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    started = time.monotonic()
    rc = cli.main(argv + ["--no-progress"])
    out, err = capsys.readouterr()
    print(f"\niolab run in-process: {time.monotonic() - started:.1f} s")
    return rc, out, err


def rows_of(run_dir: Path) -> dict:
    with open(run_dir / "results.csv", newline="") as handle:
        return {r["test"]: r for r in csv.DictReader(handle)}


def test_an_io_error_under_a_running_recipe_fails_that_test_and_keeps_the_rest(tmp_path, faulty, monkeypatch,
                                                                                capsys):
    recipe = tmp_path / "faults.yaml"
    recipe.write_text(RECIPE)
    argv = ["run", str(recipe), "--target", faulty.path, "--confirm", faulty.path,
            "--data", str(tmp_path / "data"), "--label", "faults-lab"]
    with swapped_when(monkeypatch, faulty, {"DURING.fio": "error_after_1m"}) as seen:
        rc, out, err = run_cli(argv, capsys)
    removed = faulty.remove()  # iolab holds nothing open: the dm device goes at once
    assert removed.returncode == 0, removed.stderr
    assert seen == ["DURING.fio"], err[-2000:]
    assert rc == 1, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("iolab: run failed: DURING: ") and EIO in err
    run_dir = Path(out.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tests = {t["name"]: t for t in manifest["tests"]}
    for t in manifest["tests"]:
        print(t["name"], t["status"], t.get("started"), t.get("ended"), t.get("error"))
    assert manifest["status"] == "failed" and EIO in manifest["reason"]
    assert tests["BEFORE"]["status"] == "completed"
    assert tests["DURING"]["status"] == "failed" and EIO in tests["DURING"]["error"]
    rows = rows_of(run_dir)
    assert rows["BEFORE"]["valid"] == "True" and float(rows["BEFORE"]["bw_mbps"]) > 0 and not rows["BEFORE"]["error"]
    assert rows["DURING"]["valid"] == "False" and EIO in rows["DURING"]["error"]
    assert int(rows["DURING"]["io_bytes"]) == GOOD_BYTES  # what it read before the fault is in its row
    for name in ("BEFORE", "DURING"):  # fio's own output, untouched, for every test
        raw = run_dir / "raw" / f"{name}-1.json"
        assert raw.stat().st_size > 0, raw
    text = (run_dir / "raw" / "DURING-1.json").read_text()  # fio's error lines come before its JSON
    during, _ = json.JSONDecoder().raw_decode(text[text.index("\n{") + 1:])
    assert [job["error"] for job in during["jobs"]] == [5]  # EIO, in fio's JSON


def test_an_io_error_while_laying_out_on_a_mounted_file_system_fails_the_run(tmp_path, faulty, monkeypatch, capsys):
    _sh("mkfs.ext4", "-q", "-F", faulty.path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    _sh("mount", faulty.path, mnt)
    try:
        recipe = tmp_path / "faults.yaml"
        recipe.write_text(RECIPE.replace("isolation: direct", "isolation: none"))
        argv = ["run", str(recipe), "--target", str(mnt), "--data", str(tmp_path / "data"), "--label", "faults-fs"]
        with swapped_when(monkeypatch, faulty, {"_layout.fio": "error"}) as seen:
            rc, out, err = run_cli(argv, capsys)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    removed = faulty.remove()
    assert removed.returncode == 0, removed.stderr
    assert seen == ["_layout.fio"], err[-2000:]
    # the run stops before any test (nothing to measure on a device that fails), as a one-line error
    # naming fio's reason and where the failed run is kept
    assert rc == 2, err[-2000:]
    message = err.strip().splitlines()[-1]
    assert message.startswith("iolab: error: ") and "could not lay out the test file" in message, err[-2000:]
    assert EIO in message and "what it measured is kept in " in message
    run_dir = Path(message.rsplit("what it measured is kept in ", 1)[1].rstrip(")"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and EIO in manifest["reason"]
    assert {t["status"] for t in manifest["tests"]} == {"pending"}  # none ran: no row pretends otherwise
    assert not (run_dir / "results.csv").exists() or not rows_of(run_dir)
    assert (run_dir / "raw" / "_layout.json").exists()
