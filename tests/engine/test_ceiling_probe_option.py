"""``iolab run --no-ceiling-probe`` (issue 26): an emulated device made without the probe of its declared limits,
and the manifest saying it was skipped on request; without the flag the device is probed as before. The option is
a typed RunOptions field, refused by name when not True or False. The runs are device tests (root, fio, a loop
device each: one 1-second read of a 16 MiB file on emulated:hdd)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cli_main
from kernel_fixtures import machine_clean, needs_fio, needs_root  # noqa: F401  (fixture)
from iolab.cli import build_parser
from iolab.cli import run as cli_run
from iolab.core.errors import IolabError
from iolab.devices import ceilingprobe
from iolab.engine.runoptions import RunOptions

RECIPE = """
name: probe-option
description: one 1-second sequential 1 MiB read (ceiling probe option tests)
isolation: direct
defaults: {size: 16M, runtime: 1, repeat: 1, pause: 0}
fio: {ioengine: libaio, direct: 1}
tests:
  - {name: seqread, rw: [read], bs: 1M, iodepth: 1}
"""


def test_the_flag_is_a_typed_option_named_when_wrong():
    assert cli_run.run_options(build_parser().parse_args(["run", "quick", "--target", "/tmp"])).ceiling_probe is True
    flagged = build_parser().parse_args(["run", "quick", "--target", "/tmp", "--no-ceiling-probe"])
    assert cli_run.run_options(flagged).ceiling_probe is False
    with pytest.raises(IolabError, match=r"run option --ceiling-probe: must be True or False, got 'no'"):
        RunOptions(ceiling_probe="no")


def _run(tmp_path, capsys, caplog, *flags) -> dict:
    recipe = tmp_path / "probe-option.yaml"
    recipe.write_text(RECIPE)
    code, out, err = cli_main(capsys, caplog, "run", recipe, "--target", "emulated:hdd", "--data", tmp_path / "data",
                              "--no-progress", *flags)
    assert code == 0, err
    manifest = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    return manifest["targets"][0]["emulated"]


@needs_root
@needs_fio
@pytest.mark.usefixtures("machine_clean")
def test_no_ceiling_probe_makes_the_device_without_it_and_the_manifest_says_so(tmp_path, capsys, caplog):
    emulated = _run(tmp_path, capsys, caplog, "--no-ceiling-probe")
    assert emulated["ceiling_probe"] == ceilingprobe.not_probed(ceilingprobe.SKIPPED)
    assert "skipped on request" in emulated["ceiling_probe"]["reason"] and emulated["reachable"] is None


@needs_root
@needs_fio
@pytest.mark.usefixtures("machine_clean")
def test_without_the_flag_the_device_is_probed(tmp_path, capsys, caplog):
    emulated = _run(tmp_path, capsys, caplog)
    probe = emulated["ceiling_probe"]
    assert probe["ran"] is True and probe["jobs"], probe
    assert {job["limit"] for job in probe["jobs"]} == {j.limit for j in ceilingprobe.JOBS
                                                      if emulated["declared"].get(j.limit) is not None}
