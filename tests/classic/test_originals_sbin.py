"""--with-original finds bonnie++ where Debian puts it (/usr/sbin) when PATH lacks it, as a normal
user's PATH does: it was reported "not installed" and, found, could not be started by name."""
import os

import pytest

from iolab.core import commands
from iolab.engine import recipes, runner

USER_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the memory cgroup of bonnie's buffered tests)")
@pytest.mark.skipif(not any(os.access(f"{d}/bonnie++", os.X_OK) for d in ("/usr/sbin", "/sbin")),
                    reason="bonnie++ is not installed in /usr/sbin (apt-get install bonnie++)")
def test_bonnie_original_runs_without_sbin_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", USER_PATH)
    assert "sbin" not in os.environ["PATH"]
    recipe = recipes.load("bonnie")
    recipe.options.update({"byte_io_size": "1M", "seeks": 600})
    recipe.defaults.update(repeat=1, max_repeat=1)  # one pass (the recipe's default is three, up to three)
    target = tmp_path / "target"
    target.mkdir()
    result = runner.run(recipe, [str(target)], size="128M", mem_limit="64M", data_dir=tmp_path / "data",
                        tests=["get_block"], with_original=True, progress=False)
    manifest = result.manifest
    assert manifest["originals"]["bonnie++"]["ran"] is True, manifest["originals"]
    assert manifest["originals"]["bonnie++"]["path"] == commands.find("bonnie++")
    assert manifest["status"] == "completed", manifest.get("reason")
    table = result.results
    own = table[table["tool"] == "bonnie++"]
    assert not own.empty and own["error"].isna().all(), own[["test", "error"]]
    assert list(target.iterdir()) == []
