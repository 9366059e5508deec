"""The interactive explorer in JupyterLab (ipywidgets), above the report it shows: choose runs and views
(:mod:`iolab.explorer.widgets`, what each view computes: :mod:`iolab.explorer.views`), render the report, and
the run panel (:mod:`iolab.explorer.runpanel`) that starts and stops a benchmark from the notebook, which is why
it is a layer of its own: the report it stands on reads stored runs only.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "engine", "fleet", "report")
