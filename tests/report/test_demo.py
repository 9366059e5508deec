"""The README's first command: `make demo` (tools/demo.sh once set up) writes a comparison report."""
import os
import subprocess
from pathlib import Path

from cli_helpers import ROOT, needs_fio, needs_root

pytestmark = [needs_root, needs_fio]


def test_demo_compares_two_emulated_devices(tmp_path):
    env = {**os.environ, "IOLAB_DEMO_DATA": str(tmp_path / "data"), "IOLAB_DEMO_OUT": str(tmp_path / "report"),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "tools/demo.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    html = Path(proc.stdout.strip().splitlines()[-1])
    assert html == tmp_path / "report" / "compare.html" and html.is_file()
    text = html.read_text()
    assert "emulated hdd" in text and "emulated sata-ssd" in text
    assert "as fast as" in text  # the findings are written from the numbers, as an article would
    assert "(emulated_latency)" in text  # and say what an emulated device cannot show
    assert len(list((tmp_path / "data").glob("*/*/results.csv"))) == 2
