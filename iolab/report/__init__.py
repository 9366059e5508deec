"""From results to an article: notebook execution and export (papermill, nbconvert), sections per
recipe, tables, plots, comparison verdicts and prose in English and Japanese (the JupyterLab explorer
above it is :mod:`iolab.explorer`).

Reports read stored runs only: they never need root or fio (``READS_ONLY``).
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "devices", "engine", "classic", "fleet")
#: Its modules never import one that runs a program or needs root (fio, the runner, cgroups, device setup):
#: tests/test_layout.py finds those from what each module really runs.
READS_ONLY = True
