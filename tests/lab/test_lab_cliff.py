"""The consumer SSD's write cliff on cgroup v2 (the lab VM): the watcher rewrites io.max, then gives it back.

The host's block cgroup is v1 (blkio.throttle.*), where the ground truth runs (tests/devices/
test_consumer_ssd.py); here the same device changes the unified hierarchy's ``io.max`` of the
sandbox's group. Rates under TCG are not asserted: only the ceilings the kernel shows.
"""
import time

import pytest

from iolab.devices.emulated import emulated_device, get_profile
from iolab.isolation.sandbox import open_sandbox
from kernel_fixtures import fio_json

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

MiB = 1024**2


def test_the_cliff_moves_io_max_and_idle_gives_the_burst_back(tmp_path):
    p = get_profile("consumer-ssd")
    with emulated_device("consumer-ssd", size=p.cliff.after_bytes + 32 * MiB, scratch_dir="/var/tmp") as dev:
        with open_sandbox("direct", buffered=False, throttles=dev.throttles) as box:
            group = box.io_group
            assert group.version("io") == "v2"
            assert group.throttle_in_force(dev.devnum)["write_bps"] == p.write_bps
            fio_json(["--name=fill", f"--filename={dev.device}", "--rw=write", "--bs=128k", "--direct=1",
                      "--ioengine=libaio", "--iodepth=4", f"--size={p.cliff.after_bytes + 16 * MiB}",
                      *[f"--{k}={v}" for k, v in dev.fio_options.items()]], popen=box.popen, timeout=300)
            after = group.throttle_in_force(dev.devnum)
            time.sleep(p.cliff.recover_idle_s + 1)
            back = group.throttle_in_force(dev.devnum)
        events = dev.cliff_watch.describe()["events"]
    print(f"\nv2 cliff: io.max write {p.write_bps} -> {after['write_bps']} -> {back['write_bps']}; events {events}")
    assert after["write_bps"] == p.cliff.write_bps and back["write_bps"] == p.write_bps
    assert [e["event"] for e in events] == ["cliff", "recovered"] and events[0]["groups"] == [str(group.path("io"))]
