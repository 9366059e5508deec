"""``iolab run --hosts`` takes the run's options as the one RunOptions value the local path takes (issue 22): each
value is checked once and named when bad, the ones a fleet honours reach its recipe (``--tests`` included), the
ones it cannot are refused by their flag. Dry runs only: nothing connects, nothing is created, fio does not run."""
from __future__ import annotations

import yaml

from cli_helpers import cli_main, needs_fio

pytestmark = needs_fio  # a dry run still finds fio, as the run would

RECIPE = """
name: fleet-options
description: two tests, for the options a fleet run takes
isolation: direct
defaults: {size: 16M, runtime: 1, repeat: 1}
fio: {ioengine: libaio, direct: 1}
tests:
  - {name: SEQ1M-Q4T1, rw: read, bs: 1M, iodepth: 4}
  - {name: RND4K-Q8T1, rw: randwrite, bs: 4k, iodepth: 8}
"""


def _files(tmp_path):
    (tmp_path / "t").mkdir()
    recipe, inventory = tmp_path / "fleet-options.yaml", tmp_path / "inventory.yaml"
    recipe.write_text(RECIPE)
    inventory.write_text(yaml.safe_dump({"hosts": [{"name": "h", "address": "127.0.0.1", "port": 1,
                                                    "target": str(tmp_path / "t")}]}))
    return recipe, inventory


def test_the_options_a_fleet_honours_reach_its_job_files(tmp_path, capsys, caplog):
    recipe, inventory = _files(tmp_path)
    code, out, err = cli_main(capsys, caplog, "run", recipe, "--hosts", inventory, "--dry-run", "--tests",
                              "RND4K-Q8T1", "--size", "8M", "--runtime", "3")
    assert code == 0, err
    assert "[RND4K-Q8T1]" in out and "[SEQ1M-Q4T1]" not in out  # --tests: only the test asked for
    assert "size=8m" in out and "runtime=3s" in out
    assert not (tmp_path / "data").exists()


def test_a_bad_value_is_refused_by_its_option_before_anything(tmp_path, capsys, caplog):
    recipe, inventory = _files(tmp_path)
    code, _, err = cli_main(capsys, caplog, "run", recipe, "--hosts", inventory, "--repeat", "0")
    assert code == 2 and "run option --repeat" in err and "at least 1" in err
    code, _, err = cli_main(capsys, caplog, "run", recipe, "--hosts", inventory, "--tests", "nope", "--dry-run")
    assert code == 2 and "--tests" in err and "nope" in err


def test_options_a_fleet_cannot_honour_are_refused_by_their_flag(tmp_path, capsys, caplog):
    recipe, inventory = _files(tmp_path)
    for extra, message in ((["--pause", "0"], "--pause is not supported with --hosts yet"),
                           (["--log-interval", "500"], "--log-interval is not supported with --hosts yet"),
                           (["--allow-exec"], "--allow-exec does not go with --hosts"),
                           (["--keep-serials"], "--keep-serials does not go with --hosts"),
                           (["--max-rounds", "5"], "--max-rounds bounds a steady-state run on one host")):
        code, _, err = cli_main(capsys, caplog, "run", recipe, "--hosts", inventory, "--dry-run", *extra)
        assert code == 2 and message in err, (extra, err)
    assert not (tmp_path / "data").exists()
