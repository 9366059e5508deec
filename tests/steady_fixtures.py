"""Real steady-state runs shared by the recipe's tests (tests/classic) and its section's (tests/report).

Each is made once per session (tests/conftest.py's ``steady_hdd_run`` and ``unsteady_hdd_run``): the shipped
recipe with its options bounded, on emulated:hdd (a loop device throttled to 150 write IOPS, backed in RAM so
only the throttle sets the rate) at 16M with 1 s rounds, labelled ``hdd``.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cli_helpers import iolab_cli


def bounded_recipe(directory: Path, **options) -> Path:
    """The shipped recipe with its options bounded for a test (as a user bounds a big device)."""
    from iolab.engine import recipes
    data = yaml.safe_load((recipes.recipes_dir() / "steady-state.yaml").read_text())
    data["options"].update(options)
    path = directory / "steady-state.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def steady_run(directory: Path, target: str = "emulated:hdd", size: str = "16M", *args: str,
               **options) -> tuple[Path, pd.DataFrame, dict]:
    """``iolab run`` of the bounded recipe, backing files in RAM: (run dir, results.csv, steadystate.json)."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm (tmpfs) for a RAM-backed scratch file")
    recipe = bounded_recipe(directory, **options)
    with tempfile.TemporaryDirectory(prefix="iolab-test-", dir="/dev/shm") as scratch:
        proc = iolab_cli("run", recipe, "--target", target, "--data", directory / "data", "--no-progress",
                         "--size", size, "--runtime", "1", "--no-ceiling-probe", *args, env={**os.environ, "TMPDIR": scratch})
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    return run_dir, pd.read_csv(run_dir / "results.csv"), json.loads((run_dir / "steadystate.json").read_text())
