"""What the lab's drive tests share (test_lab_nvme, test_lab_sata): finding the tier's emulated drive, and a short
direct write to run on it."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from iolab.engine import runner

WRITE = """
name: {name}
description: {mib} MiB region written for 2 s, direct
isolation: none
defaults: {{size: {mib}M, runtime: 2}}
fio: {{ioengine: psync, direct: 1}}
tests:
  - name: WRITE
    rw: write
    bs: 1M
"""


def wait_for_disk(module: str, pattern: str, is_it: Callable[[Path], bool], what: str) -> str:
    """The block device (``/sys/block/<pattern>``) for which ``is_it`` holds, once ``module`` has found it."""
    subprocess.run(["modprobe", module], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for block in Path("/sys/block").glob(pattern):
            if is_it(block):
                return block.name
        time.sleep(0.5)
    seen = {b.name: os.path.realpath(b) for b in Path("/sys/block").iterdir()}
    pytest.fail(f"no {what}: the lab tier attaches one (iolab/lab/tier.py); block devices: {seen}")


def sysfs(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def run_write(tmp_path: Path, device: str, name: str, mib: int):
    """A ``mib`` MiB direct write on ``device`` for 2 s, completed."""
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(WRITE.format(name=name, mib=mib))
    result = runner.run(str(recipe), [device], data_dir=tmp_path / name, progress=False, confirm=[device])
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    return result
