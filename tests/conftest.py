"""Shared test set-up: the iolab command of this checkout, and a machine-clean check."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IOLAB = [sys.executable, "-m", "iolab"]


def iolab_cli(*args, check=False, env=None, timeout=600, cwd=None):
    """Run the real CLI in a subprocess; returns CompletedProcess with text output."""
    return subprocess.run(IOLAB + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=check, cwd=cwd or ROOT)


@pytest.fixture
def iolab():
    return iolab_cli


def pytest_report_header(config):
    fio = shutil.which("fio")
    return [f"iolab tests: fio={fio}, root={os.geteuid() == 0}"]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, cgroups)")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (apt-get install fio)")
