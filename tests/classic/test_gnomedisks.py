"""The gnome-disks recipe end to end: a flat curve at the throttle of an emulated SATA SSD,
access times at an emulated HDD's 150 IOPS, the non-destructive rewrite, read-only by
default on block devices, and the safety rules for the write test."""
from __future__ import annotations

import hashlib
import os

import pandas as pd
import pytest

from iolab.devices import emulated
from iolab.classic import gnomedisks
from iolab.engine import recipes, runner
from iolab.core.errors import IolabError

from test_bonnie import machine_clean  # noqa: F401 - fixture: nothing left behind

from device_fixtures import make_loop, scratch, sh  # noqa: F401 - fixtures

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, cgroups)")
MiB = 2**20


def gnome(**options) -> recipes.Recipe:
    recipe = recipes.load("gnome-disks")
    recipe.options.update(options)
    return recipe


def test_recipe_keeps_gnome_disks_defaults():
    recipe = recipes.load("gnome-disks")
    assert recipe.options == {"samples": 100, "sample_size": "10M", "access_samples": 1000, "seed": 42,
                              "write": False}
    assert recipe.isolation == "direct" and recipe.engine == "gnomedisks"
    assert all(step.direct for step in recipe.steps())


@needs_root
def test_flat_curve_and_access_time_at_the_throttle_of_an_emulated_hdd(tmp_path, machine_clean):
    """GNOME Disks' own 100 x 10 MiB samples: the curve is flat at the HDD profile's 100 MB/s."""
    hdd = emulated.get_profile("hdd")
    result = runner.run(gnome(access_samples=300), ["emulated:hdd"], size="256M", data_dir=tmp_path / "data",
                        scratch_dir=str(tmp_path), progress=False, ceiling_probe=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    assert result.manifest["isolation"]["mode"] == "direct"
    table = result.results
    rates = table[table["test"] == "read-rate"]
    assert len(rates) == 100 and list(rates["sample"]) == list(range(100))
    assert rates["position"].iloc[0] == 0 and rates["position"].is_monotonic_increasing
    assert rates["position"].max() <= 1 and set(rates["tool"]) == {"python"} and set(rates["direct"]) == {1}
    assert set(rates["bs"]) == {10 * MiB} and (rates["io_bytes"] == 10 * MiB).all()
    assert (rates["thp_bytes"] >= 2 * MiB).all()  # contiguous buffers: one I/O per 1280 KiB request

    # flat at the throttle along the device: the median sample of each of five stretches. Not sample
    # by sample: a 10 MiB sample takes 0.1 s at 100 MB/s, one blk-throttle slice (100 ms), so whether
    # a sample is let through at once or held a slice depends on where the slices fall, i.e. on
    # the timing of the samples (slower when the machine is busy), which the test does not control
    limit = hdd.read_bps / 1e6
    stretches = rates.groupby(pd.cut(rates["position"], 5), observed=True)["bw_mbps"].median()
    assert stretches.to_numpy() == pytest.approx([limit] * 5, rel=0.10)
    summary = gnomedisks.summary(table).set_index("test")
    read = summary.loc["read-rate"]
    assert read["n"] == 100 and read["overall_mbps"] == pytest.approx(limit, rel=0.10)
    assert result.manifest["gnome_disks"][0]["test"] == "read-rate"

    access = table[table["test"] == "access-time"]
    assert len(access) == 300 and access["access_ms"].gt(0).all()
    assert not access["valid"].iloc[0] and access["valid"].iloc[1:].all()  # the first sample is dropped
    assert "first_sample_dropped" in access["flags"].iloc[0]
    assert summary.loc["access-time", "n"] == 299
    # 1 / 150 IOPS = 6.7 ms on average (blk-throttle lets some through at once, holds others a slice)
    assert summary.loc["access-time", "avg_access_ms"] == pytest.approx(1000 / hdd.read_iops, rel=0.15)
    from iolab.engine.directio import access_offsets
    assert access["offset"].tolist() == access_offsets(256 * MiB, 300, seed=42)  # GNOME Disks' offsets
    assert (table["dev_write_bytes"] == 0).all()  # read-only


@needs_root
def test_rewrite_of_a_file_target_is_non_destructive(tmp_path, machine_clean):
    target = tmp_path / "disk.img"
    target.write_bytes(os.urandom(32 * MiB))
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    result = runner.run(gnome(samples=8, sample_size="1M", access_samples=20, write=True), [str(target)],
                        size="32M", data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    assert [t["name"] for t in result.manifest["tests"]] == ["read-rate", "access-time", "write-rate"]
    table = result.results
    writes = table[table["test"] == "write-rate"]
    assert len(writes) == 8 and (writes["direction"] == "write").all() and writes["bw_mbps"].gt(0).all()
    assert list(writes["offset"]) == list(table.loc[table["test"] == "read-rate", "offset"])
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before  # the bytes just read went back


@needs_root
def test_block_device_is_read_only_unless_safe_to_write(make_loop, tmp_path, machine_clean):  # noqa: F811
    device = make_loop("64M")
    sh("mkfs.ext4", "-q", "-F", device)  # a file system signature: iolab would refuse to write here
    before = hashlib.sha256(open(device, "rb").read()).hexdigest()
    result = runner.run(gnome(samples=4, sample_size="1M", access_samples=10), [device], size="16M",
                        data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    assert set(result.results["test"]) == {"read-rate", "access-time"}
    with pytest.raises(IolabError, match="refusing to write"):
        runner.run(gnome(samples=4, sample_size="1M", access_samples=10, write=True), [device], size="16M",
                   data_dir=tmp_path / "data", progress=False)
    assert hashlib.sha256(open(device, "rb").read()).hexdigest() == before


def test_options_are_checked(tmp_path):
    with pytest.raises(IolabError, match="options.sample_size: must be a multiple of 4096"):
        runner.run(gnome(sample_size=6000), [str(tmp_path)], size="16M", data_dir=tmp_path / "data",
                   progress=False)
    with pytest.raises(IolabError, match="options.write: must be true or false"):
        runner.run(gnome(write="yes"), [str(tmp_path)], size="16M", data_dir=tmp_path / "data", progress=False)
