"""Numbers from numbers: statistics over repetitions (mean, CI, CoV, flags), curves
(knees, position profiles, fairness) and the figures published in the reference articles.

Pure computation over tidy DataFrames: no devices, no fio, no drawing.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core",)
#: Its modules never import one that runs a program or needs root (fio, the runner, cgroups, device setup):
#: tests/test_layout.py finds those from what each module really runs.
READS_ONLY = True
