"""Block devices and what may be done to them: the device listing and its safety verdicts,
loop devices, emulated devices with known limits, and setup plans (partition, mkfs, RAID, mount)
with their size limits.

An emulated device is throttled by a cgroup, hence isolation below it.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation")
