"""The README's first command: `make demo` (tools/demo.sh once set up) writes a comparison report."""
import json
import os
import subprocess
from pathlib import Path

import yaml

from cli_helpers import ROOT, needs_fio, needs_root

pytestmark = [needs_root, needs_fio]


def quick_at_one_second(tmp_path: Path) -> Path:
    """The demo's recipe, ``quick``, as shipped but with 1 s per test instead of 2: the same eight tests on
    the same two emulated devices and the same report, in half the measuring time (the demo's own work is
    the script and the report; the recipe's 2 s runs are checked where figures are)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "quick.yaml").read_text())
    assert recipe["name"] == "quick" and recipe["defaults"]["runtime"] == 2
    recipe["defaults"]["runtime"] = 1
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))
    return path


def test_demo_compares_two_emulated_devices(tmp_path):
    env = {**os.environ, "IOLAB_DEMO_DATA": str(tmp_path / "data"), "IOLAB_DEMO_OUT": str(tmp_path / "report"),
           "IOLAB_DEMO_RECIPE": str(quick_at_one_second(tmp_path)),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "tools/demo.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    html = Path(proc.stdout.strip().splitlines()[-1])
    assert html == tmp_path / "report" / "compare.html" and html.is_file()
    text = html.read_text()
    assert "HDD (emulated)" in text and "SATA SSD (emulated)" in text  # names a sentence can start with
    assert "as fast as" in text  # the findings are written from the numbers, as an article would
    assert "(emulated_latency)" in text  # and say what an emulated device cannot show
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "data").glob("*/*/manifest.json")]
    assert len(list((tmp_path / "data").glob("*/*/results.csv"))) == 2 and len(manifests) == 2
    for manifest in manifests:  # every test of quick ran, on each device
        assert manifest["recipe"] == "quick" and manifest["status"] == "completed"
        assert len(manifest["tests"]) == 8, manifest["tests"]
