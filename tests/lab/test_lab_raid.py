"""RAID0 striping gain for real (the lab VM): four throttled members, one md array, a `quick` run.

The seed article put four Intel X25-V in RAID0. Here four loop devices, each
held to the same ceiling by io.max (10 MB/s: low enough for TCG's CPU), are
striped by a plan (iolab.devices.plan), and a fifth, alone, stands for one
SSD. One `iolab run` of quick's SEQ1M-Q8T1 row, its read half only (what is
asserted: each fio process costs 10-20 s under TCG, so the unasserted write
half is not run) measures both in one run, started from a cgroup that
carries the devices' limits (with --isolation direct on block devices iolab
makes no cgroup of its own, so fio runs under them); the CLI's main runs in
this process, moved into that cgroup for the run (a new iolab process costs
~20 s of imports under TCG).
Sequential 1 MiB reads at QD8 through the array reach about four times one
device: md RAID0 splits each request into 64 KiB chunks on different members,
each throttled on its own.
"""
import contextlib
import csv
import os
from pathlib import Path

import pytest

from iolab import cli
from iolab.devices import blockdev
from iolab.devices import plan as setup_plan

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

MEMBER_BPS = 10_000_000   # each device's read and write ceiling
CGROUP = Path("/sys/fs/cgroup/labraid-members")
PLAN = """name: raid0-four
loop_devices:
{loops}
raid:
  - name: iolab-r0x4
    level: 0
    chunk: 64K
    members: [s1, s2, s3, s4]
"""
# quick's SEQ1M-Q8T1 (recipes/quick.yaml), reads only
RECIPE = """name: quick-seq-read
description: quick's SEQ1M-Q8T1 row, read only
statistic: best
isolation: direct
defaults: {size: 64M, runtime: 4, repeat: 1}
fio: {ioengine: libaio, direct: 1, norandommap: 1, randrepeat: 0}
tests:
  - {name: SEQ1M-Q8T1, description: "sequential 1 MiB, queue depth 8, 1 thread", rw: [read], bs: 1M, iodepth: 8}
"""


def devnum(device: str) -> str:
    devno = blockdev.resolve(device)[2]
    return f"{os.major(devno)}:{os.minor(devno)}"


def throttled_group(devices: list[str]) -> Path:
    Path("/sys/fs/cgroup/cgroup.subtree_control").write_text("+io")
    CGROUP.mkdir()
    for device in devices:
        (CGROUP / "io.max").write_text(f"{devnum(device)} rbps={MEMBER_BPS} wbps={MEMBER_BPS}")
    return CGROUP


@contextlib.contextmanager
def inside(group: Path):
    """This process (and so what it starts) in ``group``, then back where it was."""
    home = Path("/sys/fs/cgroup") / Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1].lstrip("/")
    (group / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (home / "cgroup.procs").write_text(str(os.getpid()))


def quick_in_group(group: Path, targets: list[str], data: Path, capsys) -> tuple[int, str, str]:
    recipe = data.parent / "quick-seq-read.yaml"
    recipe.write_text(RECIPE)
    argv = ["run", str(recipe), "--isolation", "direct",
            "--data", str(data), "--no-progress", "--label", "raid0-lab"]
    for target in targets:
        argv += ["--target", target, "--confirm", target]
    capsys.readouterr()
    with inside(group):
        rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_raid0_of_four_throttled_members_stripes_in_a_quick_run(tmp_path, capsys):
    loops = "\n".join(f"  - {{name: s{i}, file: {tmp_path}/s{i}.img, size: 128M}}" for i in range(1, 6))
    plan_path = tmp_path / "raid0-four.yaml"
    plan_path.write_text(PLAN.format(loops=loops))  # s5: not in the array, one device alone
    result = setup_plan.setup(plan_path)
    try:
        array, single = result["devices"]["iolab-r0x4"], result["devices"]["s5"]
        group = throttled_group([result["devices"][f"s{i}"] for i in range(1, 6)])
        rc, out, err = quick_in_group(group, [array, single], tmp_path / "data", capsys)
    finally:
        if CGROUP.exists():
            CGROUP.rmdir()
        setup_plan.teardown(plan_path)
    assert rc == 0, err[-2000:]
    with open(Path(out.strip().splitlines()[-1]) / "results.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["test"] == "SEQ1M-Q8T1" and r["direction"] == "read"]
    bw = {r["target"]: float(r["bw_mbps"]) * 1e6 for r in rows}
    four, one = bw[Path(array).name], bw[Path(single).name]
    print(f"\nquick SEQ1M-Q8T1 read, io.max {MEMBER_BPS / 1e6:.0f} MB/s per device: one device {one / 1e6:.1f} MB/s, "
          f"RAID0 of four {four / 1e6:.1f} MB/s ({four / one:.2f}x)")
    assert abs(one - MEMBER_BPS) <= 0.10 * MEMBER_BPS   # one device holds its ceiling
    assert four >= 3.5 * one                             # striping: nearly four devices' worth
    assert four <= 4.4 * MEMBER_BPS                      # and no more than four ceilings
