"""A direct-mode run keeps fio's own files cached across its cache drops (iolab.isolation.resident):
the keeper runs while the tests do and is gone with the run."""
import logging
import os
from pathlib import Path

import pytest

from iolab.engine import runner

from cli_helpers import needs_fio

RECIPE = """name: resident-direct
description: two short direct reads, each after a cache drop
isolation: direct
defaults: {size: 4M, runtime: 1, repeat: 2}
fio: {ioengine: psync, direct: 1}
tests:
  - {name: RND4K, description: random 4 KiB reads, rw: [randread], bs: 4k, iodepth: 1}
"""


@needs_fio
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: drop_caches")
def test_direct_run_keeps_fio_resident_and_stops_the_keeper(tmp_path, caplog):
    recipe = tmp_path / "resident.yaml"
    recipe.write_text(RECIPE)
    target = tmp_path / "target"
    target.mkdir()
    with caplog.at_level(logging.DEBUG, logger="iolab.isolation.resident"):
        result = runner.run(str(recipe), [str(target)], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    kept = [r for r in caplog.records if r.name == "iolab.isolation.resident" and "resident" in r.getMessage()]
    assert len(kept) == 1, [r.getMessage() for r in caplog.records if r.name.startswith("iolab.isolation")]
    pid = kept[0].args[1]
    assert not Path(f"/proc/{pid}").exists()                      # the keeper ended with the run
    table = result.results
    assert sorted(table["rep"]) == [1, 2] and set(table["direct"]) == {1} and table["valid"].all()
