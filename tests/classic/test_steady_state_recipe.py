"""The steady-state recipe (SNIA PTS style) on emulated devices, the ground truth: real fio, real
throttled loop devices in RAM. The declared ceilings are far below what the loop device does, so the
per-round figures are the throttle's on a busy host too."""
from __future__ import annotations

import json

import pytest

from iolab.classic.steadystate import precondition_bytes, purge_plan
from iolab.core.errors import IolabError
from iolab.devices.emulated import get_profile
from iolab.engine.targets import Target

from kernel_fixtures import machine_clean, module_clean, needs_fio, needs_root  # noqa: F401
from steady_fixtures import steady_run

MiB = 1024**2


def test_preconditioning_is_twice_the_area_or_the_declared_size():
    assert precondition_bytes("2x", 16 * MiB, "t") == 32 * MiB
    assert precondition_bytes(None, 16 * MiB, "t") == 32 * MiB
    assert precondition_bytes("200M", 16 * MiB, "t") == 200 * MiB
    assert precondition_bytes(0, 16 * MiB, "t") == 0
    with pytest.raises(IolabError, match="multiple of the test area"):
        precondition_bytes("twox", 16 * MiB, "t")


@pytest.mark.parametrize("target, why", [
    (Target(spec="emulated:hdd", kind="emulated", name="hdd"), "emulated device"),
    (Target(spec="/mnt/x", kind="dir", name="x", path="/mnt/x"), "only a whole block device"),
    (Target(spec="/dev/sdz", kind="block", name="sdz", path="/dev/sdz"), "needs --confirm"),
])
def test_only_a_confirmed_device_is_purged(target, why):
    argv, what = purge_plan(target)
    assert argv is None and what.startswith("skipped") and why in what


@needs_root
@needs_fio
def test_a_constant_throttle_is_steady_at_round_five(steady_hdd_run):
    """emulated:hdd holds writes at 150 IOPS from the start: steady at the first possible round."""
    run_dir, rows, found = steady_hdd_run
    verdict = found["targets"]["hdd"]
    assert verdict["reached"] and verdict["round"] == 5 and verdict["window"] == [1, 2, 3, 4, 5]
    assert verdict["mean"] == pytest.approx(get_profile("hdd").write_iops, rel=0.10)
    assert found["purge"][0]["purged"] is False and "emulated" in found["purge"][0]["what"]
    pre = rows[rows["test"].eq("precondition")]
    assert len(pre) == 1 and pre["io_bytes"].iloc[0] == 32 * MiB  # 2x the 16 MiB area, 128 KiB sequential
    rounds = rows[rows["test"].eq("round")]
    assert list(rounds["round"]) == [1, 2, 3, 4, 5] and rounds["steady_reached"].all()
    assert rounds["steady_window"].all() and set(rounds["steady_round"]) == {5}
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


@needs_root
@needs_fio
@pytest.mark.usefixtures("module_clean", "machine_clean")
def test_the_consumer_ssd_is_steady_only_after_its_cliff(tmp_path):
    """emulated:consumer-ssd: 50 MB/s for its first 160 MiB, then 10 MB/s. 64 MiB of preconditioning
    leaves ~2 s of burst for 4 KiB random rounds of 1 s: steady state is the rate after the cliff,
    reached only by a window of rounds that all come after it."""
    p = get_profile("consumer-ssd")
    run_dir, rows, found = steady_run(tmp_path, "emulated:consumer-ssd", "32M", max_rounds=14)
    verdict = found["targets"]["consumer-ssd"]
    figures = verdict.pop("figures")
    print(f"\nconsumer-ssd rounds (IOPS): {[round(f) for f in figures]}; {verdict}")
    assert verdict["reached"], verdict["why_not"]
    assert verdict["mean"] == pytest.approx(p.cliff.write_bps / 4096, rel=0.10)
    assert figures[0] == pytest.approx(p.write_bps / 4096, rel=0.10)  # the first round at the burst rate
    assert verdict["round"] > 5
    burst_rounds = [i + 1 for i, f in enumerate(figures) if f > 1.2 * verdict["mean"]]
    assert min(verdict["window"]) > max(burst_rounds)  # the window lies wholly after the cliff
    cliff = json.loads((run_dir / "manifest.json").read_text())["targets"][0]["emulated"]["cliff"]
    assert cliff["events"][0]["event"] == "cliff"


@needs_root
@needs_fio
def test_max_time_bounds_the_rounds_and_the_verdict_says_so(unsteady_hdd_run):
    """A time budget too short for five rounds: the rounds stop, the run completes, not steady and why."""
    run_dir, rows, found = unsteady_hdd_run
    verdict = found["targets"]["hdd"]
    assert not verdict["reached"] and verdict["round"] is None
    assert found["stopped"].startswith("max_time 4 s") and "max_time 4 s" in verdict["why_not"]
    assert found["precondition_bytes"] == 4 * MiB
    rounds = rows[rows["test"].eq("round")]
    assert len(rounds) < 5 and not rounds["steady_reached"].any()  # each round runs 1 s: 4 s hold 4 at most
    assert rounds["steady_why_not"].str.contains("the measurement window needs 5").all()
