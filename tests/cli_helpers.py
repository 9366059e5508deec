"""Shared by the tests: how to run this checkout's iolab, and markers for what the machine lacks."""
import json
import logging
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: test data shared by every test package
FIXTURES = ROOT / "tests" / "fixtures"
IOLAB = [sys.executable, "-m", "iolab"]

#: set by the lab VM's guest script (iolab/lab/guest.py): these tests run inside the lab VM
IN_LAB = os.environ.get("IOLAB_LAB") == "1"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, cgroups)")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (apt-get install fio)")


def iolab_cli(*args, env=None, timeout=600, cwd=None):
    """Run the real CLI in a subprocess; returns CompletedProcess with text output."""
    return subprocess.run(IOLAB + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd or ROOT)



def cli_main(capsys, caplog, *args) -> tuple[int, str, str]:
    """The CLI's main in-process (a new iolab process would only re-import it): exit code, stdout, stderr.
    Warnings and errors are logged to stderr in order, as a process's logging prints them."""
    from iolab import cli
    caplog.set_level(logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)  # capsys's stderr, now
    handler.setFormatter(logging.Formatter("iolab: %(levelname)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    logging.getLogger().addHandler(handler)
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own refusals exit
        code = exc.code
    finally:
        logging.getLogger().removeHandler(handler)
    out, err = capsys.readouterr()
    return code, out, err

def live_processes(marker: str) -> list[str]:
    """Live (not zombie) processes whose command line holds ``marker``: what a test left running."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode()
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(f"{entry}: {cmdline}")
    return found


def run_dir_of(data: Path) -> Path:
    """The one run directory a command wrote under the result store ``data``."""
    dirs = list(data.glob("*/*/manifest.json"))
    assert len(dirs) == 1, dirs
    return dirs[0].parent


def assert_failed_run(data: Path, *needles) -> dict:
    """The one run under ``data`` ended ``failed`` and its reason names every needle."""
    manifest = json.loads((run_dir_of(data) / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    for needle in needles:
        assert needle in manifest["reason"], manifest["reason"]
    return manifest


class DatabaseServer(typing.NamedTuple):
    """What a database recipe's tests know about the server's binaries (see :func:`database_server`)."""
    binaries: object        # what ``find`` returned, or None when the server is not installed
    missing: str            # why not (``find``'s IolabError, naming how to install it), else ""
    needs_root: object      # skip marker: not root
    needs_server: object    # skip marker: the server is not installed (the reason is ``missing``)


def database_server(find, *, account: str) -> DatabaseServer:
    """Find a database server's binaries with ``find`` (e.g. ``pgcluster.find_binaries``) or keep the reason,
    and the markers its tests skip with; ``account`` names the unprivileged user the server runs as."""
    from iolab.core.errors import IolabError
    try:
        binaries, missing = find(), ""
    except IolabError as exc:
        binaries, missing = None, str(exc)
    return DatabaseServer(
        binaries, missing,
        pytest.mark.skipif(os.geteuid() != 0, reason=f"needs root (memory cgroup, drop_caches, the {account} account)"),
        pytest.mark.skipif(binaries is None, reason=missing))


def measure_notebook_on_stored_runs(tmp_path: Path, runs) -> Path:
    """measure.ipynb with its run cell (fio) replaced by stored runs, every other cell as shipped: the notebook
    as `iolab batch` executes it, without measuring."""
    import nbformat

    nb = nbformat.read(str(ROOT / "notebooks" / "measure.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "runner.run(" in c.source)
    cell.source = ("from pathlib import Path\nfrom iolab.engine import store\nresults = [runner.RunResult(Path(p), "
                   "store.read_manifest(p), store.load(p)) for p in " + json.dumps([str(r) for r in runs]) + "]")
    path = tmp_path / "measure-stored.ipynb"
    nbformat.write(nb, str(path))
    return path
