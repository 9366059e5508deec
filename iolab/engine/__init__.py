"""Running fio and keeping what it said: recipes, the safety gate for every path a job opens,
targets, job rendering, the fio process (watchdog, outcome), the output parser, the run directory
(store), provenance, the direct-I/O worker and the reaper of what dead runs left.

Classic engines are found by name in iolab.engine.registry (filled by iolab.classic.registered), never
imported here.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation", "devices")
