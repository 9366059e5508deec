"""The articles' cache experiment through `iolab run cachecheck`, on a throttled device.

Ground truth: an emulated `hdd` (loop device with direct I/O, throttled to
100 MB/s with the block cgroup). Under `cgroup` isolation the warm read must
run at the throttle with the device serving the bytes; under `none` it must
come from the page cache and be flagged.
"""
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import IOLAB, ROOT, needs_fio, needs_root
from iolab.isolation import cgroups
from iolab.devices import emulated

pytestmark = [needs_root, needs_fio]

THROTTLE_MBPS = 100.0  # the hdd profile's declared sequential rate


def cachecheck(tmp_path, isolation):
    proc = subprocess.Popen(IOLAB + ["run", "cachecheck", "--target", "emulated:hdd", "--mem-limit", "64M",
                                     "--isolation", isolation, "--data", str(tmp_path / "data"), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    # nothing this run made is left: no cgroup, no loop device
    assert cgroups.leftovers(owner=proc.pid) == []
    assert emulated.leftovers(owner=proc.pid) == []
    run_dir = Path(stdout.strip().splitlines()[-1])
    results = pd.read_csv(run_dir / "results.csv").set_index("test")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return results, manifest


def test_cgroup_isolation_reads_warm_at_device_speed(tmp_path):
    results, manifest = cachecheck(tmp_path, "cgroup")
    iso = manifest["isolation"]
    print(f"cgroup layout here: {iso['cgroup_layout']}, version {iso['cgroup']['version']}")
    assert iso["mode"] == "cgroup" and iso["mem_limit"] == 64 * 1024**2
    size = manifest["options"]["size"]
    assert size == 4 * 64 * 1024**2  # the file is 4x the memory limit
    warm = results.loc["warm"]
    assert warm["bw_mbps"] == pytest.approx(THROTTLE_MBPS, rel=0.15)
    assert warm["dev_read_bytes"] >= 0.9 * warm["io_bytes"]
    assert "cache_suspect" not in str(warm["flags"])
    assert warm["cg_peak_bytes"] <= 64 * 1024**2  # the page cache stayed inside the limit
    assert manifest["targets"][0]["emulated"]["declared"]["read_bps"] == THROTTLE_MBPS * 1e6


def test_no_isolation_shows_the_cache(tmp_path):
    results, manifest = cachecheck(tmp_path, "none")
    assert manifest["isolation"]["mode"] == "none"
    cold, warm = results.loc["cold"], results.loc["warm"]
    assert cold["bw_mbps"] == pytest.approx(THROTTLE_MBPS, rel=0.15)  # cold: caches were dropped
    assert warm["bw_mbps"] > 2 * THROTTLE_MBPS
    assert warm["dev_read_bytes"] < 0.5 * warm["io_bytes"]
    assert "cache_suspect" in str(warm["flags"])
