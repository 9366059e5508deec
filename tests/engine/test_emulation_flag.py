"""Which latency caveat a row on an emulated device carries (devices.latency.emulation_flag).

``emulated_delay`` only where the kernel delays every direction the test measured
(dm-delay delays the lab hdd's reads by 8 ms, its writes by 0): elsewhere the
latencies are the throttle's time slices, ``emulated_latency``. The flag on a real
dm-delay run is checked in the lab (tests/lab/test_lab_latency.py).
"""
import types

import pytest

from iolab.devices import latency
from iolab.devices.latency import emulation_flag

DM = latency.Emulation(latency.DM_DELAY, "kernel has dm-delay", read_delay_ms=8, write_delay_ms=0)
THROTTLE = latency.Emulation(latency.THROTTLE, "dm-delay unavailable: no device-mapper")


@pytest.mark.parametrize("emulation, directions, flag", [
    (DM, ["read"], "emulated_delay"),
    (DM, ["read", None], "emulated_delay"),
    (DM, ["write"], "emulated_latency"),          # writes are not delayed: the throttle's slices
    (DM, ["read", "write"], "emulated_latency"),  # a mixed test's writes are not delayed either
    (THROTTLE, ["read"], "emulated_latency"),
    (None, ["read"], "emulated_latency"),
])
def test_the_flag_names_what_the_latencies_are(emulation, directions, flag):
    assert emulation_flag(types.SimpleNamespace(emulation=emulation), directions) == flag
