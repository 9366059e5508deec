"""The hdparm recipe end to end: alternating passes over an emulated HDD (100 MB/s) and a
directory, beside hdparm itself; O_DIRECT; what it refuses."""
from __future__ import annotations

import os
import shutil

import pytest

from iolab.devices import emulated
from iolab.engine import recipes, runner
from iolab.core.errors import IolabError

from test_bonnie import machine_clean  # noqa: F401 - fixture: nothing left behind

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, cgroups)")
needs_hdparm = pytest.mark.skipif(shutil.which("hdparm") is None,
                                  reason="hdparm is not installed (apt-get install hdparm)")
HDD = emulated.get_profile("hdd")
MiB = 2**20


def quick_hdparm(*tests: str, **options) -> recipes.Recipe:
    """The shipped recipe without hdparm's 3 s settling pause (the original still sleeps); only ``tests``
    when named (hdparm itself then times only those too)."""
    recipe = recipes.load("hdparm")
    if tests:
        recipe = recipe.with_overrides(tests=list(tests))
    recipe.options.update({"settle": 0, **options})
    return recipe


@needs_root
@needs_hdparm
def test_hdparm_alternates_targets_and_matches_hdparm(tmp_path, machine_clean):
    """Disk reads only (-t): cached reads (-T), which read the same 2 MiB of memory on any target, are proved
    by the test below, once, so this one spends its time on what the device decides."""
    directory = tmp_path / "dir"
    directory.mkdir()
    result = runner.run(quick_hdparm("disk-reads"), ["emulated:hdd", str(directory)], size="320M", mem_limit="64M",
                        repeat=2, data_dir=tmp_path / "data", scratch_dir=str(tmp_path), with_original=True,
                        progress=False, ceiling_probe=False)
    manifest = result.manifest
    assert manifest["status"] == "completed", manifest.get("reason")
    assert [(t["name"], t["reps"]) for t in manifest["tests"]] == [("disk-reads", 2), ("disk-reads (hdparm)", 2)]
    assert "dir" in manifest["originals"]["hdparm"]["skipped"]  # hdparm cannot time a regular file
    assert manifest["originals"]["hdparm"]["version"].startswith("hdparm v")

    table = result.results
    assert table["error"].isna().all(), table["error"].dropna().tolist()
    ours = table[table["tool"] != "hdparm"]
    # GigaExpress style: every pass visits every target, in turn
    assert list(zip(ours["rep"], ours["target"], ours["test"])) == [
        (1, "hdd", "disk-reads"), (1, "dir", "disk-reads"), (2, "hdd", "disk-reads"), (2, "dir", "disk-reads")]
    assert set(ours["tool"]) == {"fio"}

    hdd = table[table["target"] == "hdd"]
    disk = hdd[(hdd["test"] == "disk-reads") & (hdd["tool"] == "fio")]
    original = hdd[(hdd["test"] == "disk-reads") & (hdd["tool"] == "hdparm")]
    assert len(disk) == 2 and len(original) == 2
    # ground truth: buffered disk reads at the emulated HDD's 100 MB/s, and hdparm -t agrees within 10 %
    assert disk["bw_mbps"].mean() == pytest.approx(HDD.read_bps / 1e6, rel=0.10)
    assert disk["bw_mbps"].mean() == pytest.approx(original["bw_mbps"].mean(), rel=0.10)
    assert (disk["dev_read_bytes"] >= 0.9 * disk["io_bytes"]).all()  # the device served the reads
    # hdparm's unit: "MB/sec" is MiB/s
    for frame in (disk, original):
        assert frame["hdparm_mb_sec"].to_numpy() == pytest.approx((frame["bw_mbps"] * 1e6 / MiB).to_numpy())
    assert (original["runtime_s"] >= 3.0).all() and (disk["runtime_s"] >= 2.9).all()
    argv = manifest["commands"]["raw/hdd/disk-reads-hdparm-1.txt"]
    assert argv[:2] == ["hdparm", "-t"] and argv[-1].startswith("/dev/loop")
    assert "rw=read" in (result.path / "jobs" / "hdd" / "disk-reads.fio").read_text()


@needs_root
@needs_hdparm
def test_hdparm_cached_reads_time_memory_before_disk_reads_beside_hdparm(tmp_path, machine_clean):
    """-T then -t on each target, as ``hdparm -Tt``: one pass over a small emulated HDD (its 2 MiB re-read
    from the cache needs no large device), with hdparm -T itself beside ours."""
    result = runner.run(quick_hdparm(), ["emulated:hdd"], size="16M", mem_limit="64M", repeat=1,
                        data_dir=tmp_path / "data", scratch_dir=str(tmp_path), with_original=True, progress=False,
                        ceiling_probe=False)
    manifest = result.manifest
    assert manifest["status"] == "completed", manifest.get("reason")
    assert [(t["name"], t["reps"]) for t in manifest["tests"]] == [
        ("cached-reads", 1), ("disk-reads", 1), ("cached-reads (hdparm)", 1), ("disk-reads (hdparm)", 1)]
    table = result.results
    assert table["error"].isna().all(), table["error"].dropna().tolist()
    ours = table[table["tool"] != "hdparm"]
    assert list(zip(ours["rep"], ours["target"], ours["test"], ours["tool"])) == [
        (1, "hdd", "cached-reads", "python"), (1, "hdd", "disk-reads", "fio")]

    cached = table[table["test"] == "cached-reads"]
    assert sorted(cached["tool"]) == ["hdparm", "python"]  # ours and hdparm -T
    assert (cached["bw_mbps"] > 5 * HDD.read_bps / 1e6).all()  # memory, not the disk
    assert not cached["flags"].fillna("").str.contains("cache_suspect").any()  # by design
    assert (cached["runtime_s"] >= 1.9).all() and set(cached["direct"]) == {0}
    argv = manifest["commands"]["raw/cached-reads-hdparm-1.txt"]
    assert argv[:2] == ["hdparm", "-T"] and argv[-1].startswith("/dev/loop")


@needs_root
def test_hdparm_direct_reads_reach_the_emulated_limit(tmp_path, machine_clean):
    result = runner.run(quick_hdparm(direct=True), ["emulated:hdd"], size="320M", repeat=1,
                        data_dir=tmp_path / "data", scratch_dir=str(tmp_path), progress=False, ceiling_probe=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    table = result.results.set_index("test")
    assert table["direct"].eq(1).all()
    # O_DIRECT -t and even -T go to the device: both at its 100 MB/s (contiguous buffers: one I/O per
    # 1280 KiB request, so the 150 IOPS ceiling does not bind)
    seen = table[["tool", "bw_mbps", "runtime_s", "dev_read_bytes", "io_bytes"]].to_dict("index")
    assert table.loc["disk-reads", "bw_mbps"] == pytest.approx(HDD.read_bps / 1e6, rel=0.10), seen
    assert table.loc["cached-reads", "bw_mbps"] == pytest.approx(HDD.read_bps / 1e6, rel=0.10), seen
    assert "direct=1" in (result.path / "jobs" / "disk-reads.fio").read_text()


def test_hdparm_options_and_targets_are_checked(tmp_path):
    with pytest.raises(IolabError, match="options.offset: must be a whole number"):
        runner.run(quick_hdparm(offset="1G"), [str(tmp_path)], size="16M", data_dir=tmp_path / "data",
                   progress=False)
    recipe = quick_hdparm()
    recipe.tests[1].name = "t"
    with pytest.raises(IolabError, match=r"tests\[1\]: unknown test 't'"):
        runner.run(recipe, [str(tmp_path)], size="16M", data_dir=tmp_path / "data", progress=False)


@needs_root
def test_hdparm_refuses_a_target_smaller_than_its_offset(tmp_path, machine_clean):
    small = tmp_path / "small.bin"
    small.write_bytes(b"\0" * 4 * MiB)
    with pytest.raises(IolabError, match="too small for hdparm's 2 MiB reads at offset 1 GiB"):
        runner.run(quick_hdparm(offset=1), [str(small)], size="4M", data_dir=tmp_path / "data", progress=False)
    assert small.read_bytes() == b"\0" * 4 * MiB  # a file target is only read
