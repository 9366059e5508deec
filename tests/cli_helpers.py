"""Shared by the tests: how to run this checkout's iolab, and markers for what the machine lacks."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: test data shared by every test package
FIXTURES = ROOT / "tests" / "fixtures"
IOLAB = [sys.executable, "-m", "iolab"]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, cgroups)")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (apt-get install fio)")


def iolab_cli(*args, env=None, timeout=600, cwd=None):
    """Run the real CLI in a subprocess; returns CompletedProcess with text output."""
    return subprocess.run(IOLAB + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd or ROOT)


def live_processes(marker: str) -> list[str]:
    """Live (not zombie) processes whose command line holds ``marker``: what a test left running."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode()
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(f"{entry}: {cmdline}")
    return found


def run_dir_of(data: Path) -> Path:
    """The one run directory a command wrote under the result store ``data``."""
    dirs = list(data.glob("*/*/manifest.json"))
    assert len(dirs) == 1, dirs
    return dirs[0].parent


def assert_failed_run(data: Path, *needles) -> dict:
    """The one run under ``data`` ended ``failed`` and its reason names every needle."""
    manifest = json.loads((run_dir_of(data) / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    for needle in needles:
        assert needle in manifest["reason"], manifest["reason"]
    return manifest
