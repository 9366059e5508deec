"""Keeping the page cache out of a measurement, and proving it: memory- and io-limited
cgroups (v1 and v2, or a systemd scope), huge-page reservations, verified cache drops and the
block-device counters that show what the device really served.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core",)
#: Its modules change the kernel's state (cgroups, huge pages, cache drops, dirty limits) and need root: a
#: READS_ONLY layer never imports them.
NEEDS_ROOT = True
