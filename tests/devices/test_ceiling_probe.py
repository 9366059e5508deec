"""The probe an emulated device runs when it is made (issue 26, item 4): a declared limit far beyond what a loop
device can do is recorded with the figure this host reached and reported as a ceiling not reached on this host; a
limit well within its reach is not flagged. Device tests: a loop device each, fio for a few seconds."""
from __future__ import annotations

import pandas as pd
import pytest

from iolab.devices import ceilingprobe
from iolab.devices.emulated import Profile, emulated_device
from iolab.report import ceilings

from kernel_fixtures import machine_clean, module_clean, needs_fio, needs_root, scratch, under_throttle  # noqa: F401

pytestmark = [pytest.mark.usefixtures("module_clean", "machine_clean"), needs_root, needs_fio]

#: 50 GB/s and 5M IOPS: no loop device over a scratch file comes near
FAR = Profile(name="far", description="far beyond any loop device", read_bps=50_000_000_000,
              write_bps=50_000_000_000, read_iops=5_000_000, write_iops=5_000_000)
#: 20 MB/s and 2,000 IOPS: a loop device on a busy 2-core host does many times that (profiles/emulated.yaml); enough
#: I/Os in the probe's 1 s that blk-throttle's slices cannot put the figure near the threshold
EASY = Profile(name="easy", description="well within a loop device's reach", read_bps=20_000_000,
               write_bps=20_000_000, read_iops=2000, write_iops=2000)


def _report(info: dict, lang: str = "en") -> str:
    """The report's paragraph on a run whose target is this device, one row per probe job (its own figures)."""
    manifests = pd.DataFrame([{"run_id": "r1", "targets": [{"name": "t", "emulated": info}]}])
    rows = []
    for job in info["ceiling_probe"]["jobs"]:
        iops = job["measured"] / job["bs"] if job["limit"].endswith("_bps") else job["measured"]
        rows.append({"system": "host", "run_id": "r1", "target": "t", "test": job["limit"],
                     "direction": "read" if job["limit"].startswith("read") else "write", "bs": job["bs"],
                     "iodepth": job["iodepth"], "numjobs": 1, "iops": iops, "bw_mbps": iops * job["bs"] / 1e6,
                     "lat_mean_us": job["iodepth"] / max(iops, 1e-9) * 1e6, "flags": None, "valid": True})
    return ceilings.markdown(pd.DataFrame(rows), manifests, lang=lang)


def test_a_limit_out_of_reach_is_recorded_beside_the_declared_one_and_reported(scratch):
    with emulated_device(FAR, size="64M", scratch_dir=scratch) as dev:
        info = dev.describe()
    probe, reachable = info["ceiling_probe"], info["reachable"]
    print(f"\nreachable on this host: {reachable}; held by {probe['held_by']}; {probe['elapsed_s']} s")
    assert probe["ran"] is True and probe["elapsed_s"] < 30
    assert set(reachable) == {"read_bps", "write_bps", "read_iops", "write_iops"}
    for field, figure in reachable.items():
        assert 0 < figure < ceilingprobe.REACHED * info["declared"][field], (field, figure)
    assert set(probe["held_by"]) <= {"loop device", "cpu"} and probe["held_by"]
    text = _report(info)
    assert "host: ceiling not reached on this host (" in text and "follow" not in text
    assert "このホストでは上限に届かない（" in _report(info, "ja")


def test_a_limit_within_reach_is_not_flagged(scratch):
    with emulated_device(EASY, size="64M", scratch_dir=scratch) as dev:
        info = dev.describe()
    probe = info["ceiling_probe"]
    print(f"\nmeasured: {[(j['limit'], round(j['measured'])) for j in probe['jobs']]}")
    assert probe["ran"] is True and info["reachable"] == {} and probe["held_by"] == []
    for job in probe["jobs"]:  # at the throttle: reached, and not above it by more than its slices allow
        assert job["ratio"] >= ceilingprobe.REACHED and under_throttle(job["measured"], job["ceiling"],
                                                                         probe["seconds"]), job
    text = _report(info)
    assert "reached every declared limit on this host" in text and "not reached" not in text
