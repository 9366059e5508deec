"""A run whose stderr is a log (CI): one line per finished test; the pause between tests is an option."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from cli_helpers import iolab_cli, needs_fio

pytestmark = needs_fio

RECIPE = """
name: paused
description: two short reads with a long pause between them unless --pause says otherwise
defaults: {size: 4M, runtime: 1, repeat: 1, pause: 60}
fio: {ioengine: psync}
tests:
  - {name: SEQ, rw: read, bs: 1M}
  - {name: RND, rw: randread, bs: 4k}
"""

DURATION = r"\d+ s|\d+ min \d\d s|\d+ h \d\d min"  # whatever the machine's speed
LINE = re.compile(rf"^iolab: test (\d)/2 (\w+) done in (?:{DURATION}); elapsed (?:{DURATION}), ETA (?:{DURATION})$")


def _run(tmp_path: Path, *extra) -> tuple[dict, list[re.Match]]:
    recipe = tmp_path / "paused.yaml"
    recipe.write_text(RECIPE)
    (tmp_path / "dir").mkdir(exist_ok=True)
    proc = iolab_cli("run", recipe, "--target", tmp_path / "dir", "--data", tmp_path / "data", *extra)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((Path(proc.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    return manifest, [m for m in map(LINE.match, proc.stderr.splitlines()) if m]


def test_a_line_per_test_on_a_log_and_the_pause_from_the_command_line(tmp_path):
    manifest, lines = _run(tmp_path, "--pause", "3")
    assert [(m.group(1), m.group(2)) for m in lines] == [("1", "SEQ"), ("2", "RND")]
    assert manifest["options"]["pause"] == 3.0  # not the recipe's 60 s
    second = manifest["tests"][1]  # the pause comes at the start of the second test: 3 s + 1 s of fio at least
    took = dt.datetime.fromisoformat(second["ended"]) - dt.datetime.fromisoformat(second["started"])
    assert took.total_seconds() >= 3  # timestamps are whole seconds: a lower bound only, sleeps never end early


def test_no_progress_silences_the_lines_and_pause_zero_means_none(tmp_path):
    manifest, lines = _run(tmp_path, "--pause", "0", "--no-progress")
    assert lines == [] and manifest["options"]["pause"] == 0.0
    proc = iolab_cli("run", tmp_path / "paused.yaml", "--target", tmp_path / "dir", "--pause", "-1", "--dry-run")
    assert proc.returncode == 2 and "--pause" in proc.stderr and "-1" in proc.stderr
