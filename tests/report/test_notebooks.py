"""The notebooks run, as they are, from notebooks/ against the fixture data (real nbval).

``pytest --nbval-lax notebooks/`` executes every notebook; cells marked
``# NBVAL_CHECK_OUTPUT`` must reproduce their stored output. This test runs
exactly that in a subprocess, so ``pytest`` (testpaths = tests) covers the
notebooks too.

After changing the fixture data or a checked cell, refresh the stored outputs
(only checked cells keep outputs in the committed notebooks)::

    .venv/bin/python tests/test_notebooks.py --refresh
"""
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT

NOTEBOOKS = ROOT / "notebooks"
CHECK = "# NBVAL_CHECK_OUTPUT"


def checked_cells(path):
    import nbformat
    nb = nbformat.read(str(path), as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith(CHECK)]


@pytest.mark.parametrize("name", ["report.ipynb", "compare.ipynb"])
def test_notebook_has_parameters_and_checked_outputs(name):
    import nbformat
    nb = nbformat.read(str(NOTEBOOKS / name), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    assert 'data_dir = "../tests/fixtures/data"' in tagged[0].source
    assert 'lang = "en"' in tagged[0].source
    checked = checked_cells(NOTEBOOKS / name)
    assert checked and all(c.outputs for c in checked), "checked cells carry their expected output"


def test_nbval_lax_runs_every_notebook():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q", "--no-header",
         "-o", "addopts=", "notebooks/"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # every code cell of both notebooks was collected and passed
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]


def refresh() -> None:
    """Execute each notebook from notebooks/ and keep outputs of checked cells only."""
    import nbformat
    from nbclient import NotebookClient
    for path in (NOTEBOOKS / "report.ipynb", NOTEBOOKS / "compare.ipynb"):  # ours only: others own the rest
        nb = nbformat.read(str(path), as_version=4)
        NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}},
                       timeout=300).execute()
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            if not cell.source.lstrip().startswith(CHECK):
                cell.outputs = []
                cell.execution_count = None
            # checked cells keep outputs and execution count (nbval skips "unrun" cells)
        nbformat.write(nb, str(path))
        print(f"refreshed {path.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--refresh"]:
        refresh()
    else:
        print(__doc__)
