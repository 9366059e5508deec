"""RAID0 striping gain for real (the lab VM): four throttled members, one md array.

The seed article put four Intel X25-V in RAID0. Here four loop devices, each
held to the same read ceiling by io.max (low enough for TCG's CPU), are
striped by a plan (iolab.devices.plan) and read through the array: sequential
1 MiB reads at a queue depth that keeps every member busy reach about four
times one member's ceiling, because md RAID0 splits each request into chunks
that go to different members, each throttled on its own.
"""
import os

import pytest

from iolab.devices import inventory
from iolab.devices import plan as setup_plan
from iolab.isolation.cgroups import Throttle
from iolab.isolation.sandbox import open_sandbox
from kernel_fixtures import fio_json

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

MEMBER_BPS = 10_000_000   # each member's read ceiling (10 MB/s: far below what TCG can move)
PLAN = """name: raid0-four
loop_devices:
{loops}
raid:
  - name: iolab-r0x4
    level: 0
    chunk: 64K
    members: [s1, s2, s3, s4]
"""


def _seq_read(box, device: str) -> float:
    job = fio_json(["--name=seq", f"--filename={device}", "--rw=read", "--bs=1M", "--iodepth=16",
                    "--ioengine=libaio", "--direct=1", "--runtime=4", "--time_based", "--size=96M"],
                   popen=box.popen, timeout=120)
    return job["read"]["bw_bytes"]


def test_raid0_of_four_throttled_members_stripes(tmp_path):
    loops = "\n".join(f"  - {{name: s{i}, file: {tmp_path}/s{i}.img, size: 128M}}" for i in range(1, 5))
    plan_path = tmp_path / "raid0-four.yaml"
    plan_path.write_text(PLAN.format(loops=loops))
    result = setup_plan.setup(plan_path)
    try:
        array = result["devices"]["iolab-r0x4"]
        members = [result["devices"][f"s{i}"] for i in range(1, 5)]
        throttles = [Throttle(devnum(m), read_bps=MEMBER_BPS) for m in members]
        with open_sandbox("cgroup", mem_limit="256M", buffered=False, throttles=throttles) as box:
            one = _seq_read(box, members[0])
            four = _seq_read(box, array)
    finally:
        setup_plan.teardown(plan_path)
    print(f"\nRAID0 of 4 members at io.max rbps={MEMBER_BPS / 1e6:.0f} MB/s each: one member {one / 1e6:.1f} MB/s, "
          f"the array {four / 1e6:.1f} MB/s ({four / one:.2f}x)")
    assert abs(one - MEMBER_BPS) <= 0.10 * MEMBER_BPS   # a member alone holds its ceiling
    assert four >= 3.5 * one                             # striping: nearly four members' worth
    assert four <= 4.4 * MEMBER_BPS                      # and no more than four ceilings


def devnum(device: str) -> str:
    devno = inventory.resolve(device)[2]
    return f"{os.major(devno)}:{os.minor(devno)}"
