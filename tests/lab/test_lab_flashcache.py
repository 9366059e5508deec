"""The flash-cache experiment for real (the lab VM): a dm-delay "HDD" with and without a dm-cache "SSD".

The seed article measured a RAID card's flash cache on and off. Here one plan
(iolab.devices.plan) builds two identical slow devices (loop devices behind
dm-delay, 2 ms per I/O: slow inside the kernel, no cgroup needed) and puts a
dm-cache (smq, writethrough, 32 KiB blocks, metadata carved from the fast
device) over one of them. The same random-read recipe (4 KiB, QD1, a 2 MiB
working set: 64 cache blocks, small enough for TCG's few hundred I/Os per
repetition to touch each block several times, repeated) runs on both through the CLI's main in this process. Asserted:
the direction only -- after the first repetitions the cached device reads
faster than the bare one, and dm-cache's own counters show promotions and read
hits -- then teardown leaves nothing (the clean_after fixture checks loop, dm,
mounts).
"""
import csv
from pathlib import Path

import pandas as pd
import pytest

from iolab import cli
from iolab.devices import dmtable
from iolab.devices import plan as setup_plan
from iolab.report.sections import flashcache

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

REPEAT = 3
PLAN = """name: flash-cache-lab
loop_devices:
  - {{name: hdd-off, file: {tmp}/hdd-off.img, size: 32M}}
  - {{name: hdd-on, file: {tmp}/hdd-on.img, size: 32M}}
  - {{name: ssd, file: {tmp}/ssd.img, size: 16M}}
delay:
  - {{name: iolab-fcl-off, device: hdd-off, read_ms: 2, write_ms: 2}}
  - {{name: iolab-fcl-hdd, device: hdd-on, read_ms: 2, write_ms: 2}}
cache:
  - {{name: iolab-fcl-on, origin: iolab-fcl-hdd, cache: ssd, block_size: 32K, mode: writethrough}}
"""
RECIPE = f"""name: fc-randread
description: random 4 KiB reads at QD1 over a small working set, repeated (the cache fills)
statistic: mean
isolation: direct
defaults: {{size: 2M, runtime: 2, repeat: {REPEAT}}}
fio: {{ioengine: libaio, direct: 1, norandommap: 1, randrepeat: 0}}
tests:
  - {{name: RND4K-Q1T1, description: "random 4 KiB reads, queue depth 1", rw: [randread], bs: 4k, iodepth: 1}}
"""


def run(recipe: Path, target: str, label: str, data: Path, capsys) -> Path:
    capsys.readouterr()
    rc = cli.main(["run", str(recipe), "--target", target, "--confirm", target, "--isolation", "direct",
                   "--pause", "0", "--data", str(data), "--no-progress", "--label", label])
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    return Path(out.strip().splitlines()[-1])


def iops_by_rep(run_dir: Path) -> list[float]:
    with open(run_dir / "results.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["direction"] == "read"]
    return [float(r["iops"]) for r in sorted(rows, key=lambda r: int(r["rep"]))]


def test_cache_on_reads_a_warm_working_set_faster_than_the_bare_hdd(tmp_path, capsys):
    plan_path = tmp_path / "flash-cache-lab.yaml"
    plan_path.write_text(PLAN.format(tmp=tmp_path))
    recipe = tmp_path / "fc-randread.yaml"
    recipe.write_text(RECIPE)
    result = setup_plan.setup(plan_path)
    try:
        off, on = result["devices"]["iolab-fcl-off"], result["devices"]["iolab-fcl-on"]
        off_dir = run(recipe, off, "lab hdd cache=off", tmp_path / "data", capsys)
        on_dir = run(recipe, on, "lab hdd cache=on", tmp_path / "data", capsys)
        counters = dmtable.cache_counters("iolab-fcl-on")
    finally:
        setup_plan.teardown(plan_path)
    assert setup_plan.status(plan_path) is None
    off_iops, on_iops = iops_by_rep(off_dir), iops_by_rep(on_dir)
    print(f"\nRND4K-Q1T1 read IOPS per repetition, 2 ms dm-delay: cache off {off_iops}, cache on {on_iops}; "
          f"dm-cache {counters}")
    assert len(off_iops) == len(on_iops) == REPEAT
    assert counters["promotions"] > 0 and counters["read_hits"] > 0   # the cache really filled and served
    assert on_iops[-1] > max(off_iops)                                # warm cache beats the bare HDD
    # not asserted: on_iops[-1] > on_iops[0]. How many blocks smq promotes by the first repetition's end
    # depends on TCG's speed (measured 289 -> 622 on one run, 133 -> 156 on a loaded host): timing, not a fact
    # the report section's figures (matplotlib under TCG) are left to tests/report/test_flashcache.py: its
    # cache on/off pairing is checked here on the real runs, numbers only
    reps = flashcache.flashcache_summary(pd.concat([pd.read_csv(d / "results.csv") for d in (off_dir, on_dir)]))
    assert list(reps["ratio_last"] > 1) == [True]   # one experiment, one test: the warm cache helped
