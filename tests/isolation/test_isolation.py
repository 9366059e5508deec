"""iolab.isolation.sandbox on the real kernel: drop caches, memory cgroups, huge pages, fallbacks, clean-up,
and the cache-check experiment on a throttled loop device."""
from __future__ import annotations

import json
import logging
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.isolation import blockstat, cache, cgroups, hugepages, sandbox as isolation
from iolab.devices.emulated import emulated_device
from iolab.core.errors import IolabError
from iolab.isolation.sandbox import flag_cache_suspect, hugepage_plan, open_sandbox

from kernel_fixtures import (fio_json, has_v1, has_v2, layout_summary, machine_clean,  # noqa: F401
                             module_clean, needs_fio, needs_root, nr_hugepages, resident_bytes, scratch,
                             under_throttle, write_file)

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")

MiB = 1024**2
HAS_MEMCG = has_v1("memory") or has_v2("memory")
needs_memcg = pytest.mark.skipif(not HAS_MEMCG, reason=f"no memory controller ({layout_summary()})")


# --------------------------------------------------------------------------- pure logic

def test_flag_cache_suspect():
    assert flag_cache_suspect(100 * MiB, 10 * MiB)
    assert not flag_cache_suspect(100 * MiB, 95 * MiB)
    assert not flag_cache_suspect(100 * MiB, 50 * MiB)          # exactly the threshold: not below it
    assert flag_cache_suspect(100 * MiB, 80 * MiB, threshold=0.9)
    assert not flag_cache_suspect(0, 0) and not flag_cache_suspect(None, 5)


def test_hugepage_plan_leaves_the_limit_free():
    GiB = 1024**3
    info = {"MemTotal": 24 * GiB, "MemAvailable": 23 * GiB, "Hugepagesize": 2 * MiB}
    plan = hugepage_plan(512 * MiB, info=info, min_free_kbytes=67584)
    assert plan["in_use"] == 1 * GiB
    assert plan["headroom"] == 4 * 67584 * 1024                      # 264 MiB > the 128 MiB floor
    assert plan["reserve_bytes"] == (23 * GiB - 512 * MiB - plan["headroom"]) // (2 * MiB) * 2 * MiB
    # what is left for the page cache: about the limit
    left = info["MemAvailable"] - plan["reserve_bytes"] - plan["headroom"]
    assert 512 * MiB <= left < 512 * MiB + 2 * MiB
    small = hugepage_plan(512 * MiB, info={"MemTotal": GiB, "MemAvailable": 600 * MiB}, min_free_kbytes=0)
    assert small["pages"] == 0 and small["headroom"] == hugepages.HEADROOM_MIN


def test_unknown_mode_names_the_modes():
    with pytest.raises(IolabError, match="cgroup, hugepages, direct, none"):
        with open_sandbox("tmpfs"):
            pass


def test_none_mode_does_nothing_and_says_so():
    with open_sandbox("none") as box:
        record = box.prepare_test()
        assert record["drop_caches"] is False and "deliberately" in record["note"]
        out = box.popen([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE).communicate()[0]
        assert out.strip() == b"hi"
        evidence = box.test_evidence()
        assert evidence["cg_peak_bytes"] is None and evidence["oom_killed"] is False
        info = box.describe()
        assert info["mode"] == "none" and info["requested"] == "none" and info["fallback"] is None
        assert info["drop_caches"]["dropped"] == 0


def test_popen_never_takes_a_shell():
    with open_sandbox("none") as box:
        with pytest.raises(IolabError, match="never runs a shell"):
            box.popen("echo hi")
        with pytest.raises(IolabError, match="never runs a shell"):
            box.popen(["echo", "hi"], shell=True)


# --------------------------------------------------------------------------- fallbacks

def test_not_root_refuses_buffered_and_falls_back_for_direct(monkeypatch, caplog):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for mode in ("cgroup", "hugepages"):
        with pytest.raises(IolabError, match="not root") as err:
            with open_sandbox(mode, buffered=True):
                pass
        assert "never downgrades" in str(err.value)
    with caplog.at_level(logging.WARNING, logger="iolab.isolation.sandbox"):
        with open_sandbox("cgroup", buffered=False) as box:
            assert box.mode == "direct" and box.requested == "cgroup"
            assert "not root" in box.fallback
            assert box.describe()["fallback"] == box.fallback
            record = box.prepare_test()  # direct mode as non-root: nothing to drop, recorded
            assert "drop_caches" in record
        with open_sandbox("hugepages", buffered=True, direct_ok=True) as box:
            assert box.mode == "direct" and "not root" in box.fallback
    assert "falling back to direct" in caplog.text


# --------------------------------------------------------------------------- drop caches

@needs_root
def test_drop_caches_really_drops(tmp_path):
    data = tmp_path / "cached.dat"
    write_file(data, 128 * MiB)
    for _ in range(10):  # other processes on this box drop caches too: cache the file until it stays
        data.read_bytes()
        if resident_bytes(data) >= 120 * MiB:
            break
    else:
        pytest.skip("other processes keep dropping the page cache before it can be checked")
    cached_before = cache.meminfo()["Cached"]
    with open_sandbox("direct", buffered=False) as box:
        record = box.prepare_test()
    print(f"\ndrop_caches: {record}")
    assert record["written"] and record["verified"] and record["kernel_drops"] >= 1
    assert resident_bytes(data) < 8 * MiB, "our file is still in the page cache"
    assert record["cached_after"] < cached_before


# --------------------------------------------------------------------------- cgroup mode

def _cgroup_of(pid_output: str, controller: str) -> str:
    for line in pid_output.splitlines():
        ident, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return ""


@needs_root
@needs_fio
@needs_memcg
def test_cgroup_mode_limits_the_cache_of_a_buffered_read(tmp_path):
    print(f"\ncgroup mode on: {layout_summary()}")
    data = tmp_path / "four-times.dat"
    write_file(data, 256 * MiB)
    with open_sandbox("cgroup", mem_limit="64M") as box:
        assert box.mode == "cgroup" and box.fallback is None
        name = box.group.name
        paths = box.describe()["cgroup"]["paths"]
        out = box.popen(["cat", "/proc/self/cgroup"], stdout=subprocess.PIPE, text=True).communicate()[0]
        assert _cgroup_of(out, "memory").endswith("/" + name)
        record = box.prepare_test()
        assert record["verified"] and record["peak_reset"]
        counter = blockstat.BlockCounter.for_path(data)
        before = counter.snapshot()
        job = fio_json(["--name=read", f"--filename={data}", "--rw=read", "--bs=1M", "--direct=0",
                        "--invalidate=0", "--size=256M"], popen=box.popen)
        device = counter.delta(before)
        evidence = box.test_evidence()
        print(f"evidence: {evidence}; device: {device}")
        assert evidence["cg_cache_bytes"] <= 64 * MiB and evidence["cg_peak_bytes"] <= 64 * MiB
        assert evidence["cg_peak_bytes"] > 32 * MiB  # the cache really filled the group
        assert evidence["oom_killed"] is False and evidence["drop_caches_verified"] is True
        assert device["read_bytes"] >= 0.9 * job["read"]["io_bytes"]
        info = box.describe()
        assert info["mem_limit"] == 64 * MiB and info["cgroup"]["version"] in ("v1", "v2")
        assert info["drop_caches"]["all_verified"] is True
    for path in paths.values():
        assert not Path(path).exists()


@needs_root
@needs_memcg
def test_oom_kill_is_reported():
    with open_sandbox("cgroup", mem_limit="32M") as box:
        box.prepare_test()
        hog = box.popen([sys.executable, "-c", "x = bytearray(256 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096])"],
                        stderr=subprocess.DEVNULL)
        hog.wait(60)
        evidence = box.test_evidence()
    print(f"\n{evidence}")
    assert hog.returncode == -9
    assert evidence["oom_killed"] is True and "OOM killer" in evidence["oom_reason"]


@needs_root
@needs_memcg
def test_interrupt_removes_the_cgroup_and_stops_children():
    with pytest.raises(KeyboardInterrupt):
        with open_sandbox("cgroup", mem_limit="64M") as box:
            paths = list(box.describe()["cgroup"]["paths"].values())
            sleeper = box.popen([sys.executable, "-c", "import time; time.sleep(60)"])
            raise KeyboardInterrupt
    assert sleeper.poll() is not None, "a child still running at exit must be stopped"
    assert not any(Path(p).exists() for p in paths)
    assert cgroups.leftovers(owner=os.getpid()) == []


@needs_root
def test_throttles_apply_in_every_mode(tmp_path):
    img = tmp_path / "t.img"
    with open(img, "wb") as fh:
        fh.truncate(8 * MiB)
    from iolab.devices import loopdev
    device = loopdev.attach(img)
    try:
        devnum = blockstat.device_for(device).devnum
        throttle = {"device": devnum, "read_bps": 10_000_000}
        with open_sandbox("direct", buffered=False, throttles=[throttle], buffer_hugepages=0) as box:
            out = box.popen(["cat", "/proc/self/cgroup"], stdout=subprocess.PIPE, text=True).communicate()[0]
            assert _cgroup_of(out, "blkio" if has_v1("blkio") else "").endswith("/" + box.io_group.name)
            if has_v1("memory"):
                assert not _cgroup_of(out, "memory").endswith(box.io_group.name)  # no memory limit here
            assert box.describe()["throttles"] == [{"device": devnum, "read_bps": 10_000_000, "write_bps": None,
                                                    "read_iops": None, "write_iops": None}]
    finally:
        loopdev.detach(device)


# --------------------------------------------------------------------------- huge pages

@needs_root
def test_hugepages_reserve_and_give_back():
    if not Path("/proc/sys/vm/nr_hugepages").exists():
        pytest.skip("this kernel has no huge pages")
    before = nr_hugepages()
    with open_sandbox("hugepages", hugepages_bytes="256M") as box:
        info = box.describe()["hugepages"]
        print(f"\nhugepages: asked {info['asked_pages']}, reserved {info['reserved_pages']}, "
              f"nr_hugepages {info['previous']} -> {info['nr_hugepages']}")
        assert box.mode == "hugepages" and box.fallback is None
        assert info["asked_pages"] == 128 and info["reserved_pages"] == 128
        assert cache.meminfo()["HugePages_Total"] >= 128
        assert hugepages.outstanding_hugepages() == 128
        assert box.prepare_test()["verified"]
    assert box.hugepages["released"] == 128
    assert hugepages.outstanding_hugepages() == 0
    print(f"nr_hugepages before {before}, after {nr_hugepages()}")


@needs_root
def test_manifest_taken_inside_the_sandbox_says_how_many_pages_were_released():
    """Runs record describe() while the sandbox is open and save the manifest after it closed:
    that manifest must say how many pages went back, not ``released: None``."""
    if not Path("/proc/sys/vm/nr_hugepages").exists():
        pytest.skip("this kernel has no huge pages")
    with open_sandbox("hugepages", hugepages_bytes="16M") as box:
        manifest = {"isolation": {**box.describe(), "forced_o_direct": False}}
        assert manifest["isolation"]["hugepages"]["released"] is None  # still held
    saved = json.loads(json.dumps(manifest))  # what Run.finish writes after the with-block
    assert saved["isolation"]["hugepages"]["released"] == saved["isolation"]["hugepages"]["reserved_pages"] == 8
    assert hugepages.outstanding_hugepages() == 0


class _CappedPool(isolation.HugePagePool):
    """The real pool, but the kernel 'finds' at most 8 more pages (a machine short of memory)."""

    def set_total(self, pages):
        current = self.total()
        return super().set_total(min(pages, current + 8) if pages > current else pages)


@needs_root
def test_hugepages_short_reservation_is_refused_and_given_back(monkeypatch):
    if not Path("/proc/sys/vm/nr_hugepages").exists():
        pytest.skip("this kernel has no huge pages")
    monkeypatch.setattr(isolation, "HugePagePool", _CappedPool)
    with pytest.raises(IolabError, match="reserved only 8 of 128 huge pages"):
        with open_sandbox("hugepages", hugepages_bytes="256M"):
            pass
    assert hugepages.outstanding_hugepages() == 0
    with open_sandbox("hugepages", hugepages_bytes="256M", direct_ok=True) as box:
        assert box.mode == "direct" and "reserved only 8 of 128" in box.fallback
        assert box.describe()["hugepages"]["released"] == 8
    assert hugepages.outstanding_hugepages() == 0


# --------------------------------------------------------------------------- the cache-check experiment

def _read(box, path, size, counter):
    drops = cache.vmstat("drop_pagecache")
    before = counter.snapshot()
    job = fio_json(["--name=read", f"--filename={path}", "--rw=read", "--bs=1M", "--direct=0", "--invalidate=0",
                    "--ioengine=psync", "--iomem=mmaphuge", f"--size={size}"], popen=box.popen)
    device = counter.delta(before)
    return {"mbps": job["read"]["bw_bytes"] / 1e6, "fio_bytes": job["read"]["io_bytes"],
            "device_bytes": device["read_bytes"], "foreign_drops": cache.vmstat("drop_pagecache") - drops}


@needs_root
@needs_fio
@needs_memcg
def test_cache_check_experiment(scratch):
    """A file 4x the memory limit on a 100 MB/s device, read twice: isolation holds, none is caught."""
    limit, size = 64 * MiB, 256 * MiB
    with emulated_device("hdd", size="768M", scratch_dir=scratch, filesystem="ext4", probe=False) as dev:
        rate = dev.profile.read_bps / 1e6
        data = Path(dev.mountpoint) / "four-times.dat"
        write_file(data, size)
        counter = blockstat.BlockCounter.for_path(data)
        assert counter.device.name == Path(dev.device).name

        with open_sandbox("cgroup", mem_limit=limit, throttles=dev.throttles) as box:
            box.prepare_test()
            cold = _read(box, data, size, counter)
            warm = _read(box, data, size, counter)   # nothing dropped in between
            evidence = box.test_evidence()
        print(f"\ncgroup ({limit >> 20} MiB): cold {cold}, warm {warm}, cache {evidence['cg_cache_bytes'] >> 20} MiB")
        # the ceiling is the throttle's (slice tolerance over a read of size/rate seconds); how close the
        # read comes from below is this machine's disk, so the device's bytes show who served it
        assert under_throttle(warm["mbps"], rate, size / 1e6 / rate), f"warm read {warm}, throttle {rate} MB/s"
        assert warm["device_bytes"] >= 0.9 * warm["fio_bytes"], f"warm read {warm}"
        assert not flag_cache_suspect(warm["fio_bytes"], warm["device_bytes"])
        assert evidence["cg_cache_bytes"] <= limit

        # none: the same pair of reads, deliberately cached. Other developers' runs on this machine
        # drop the page cache machine-wide at any moment; drop_caches never evicts pages that are
        # mapped, so the test maps the file while it runs (and touches it between the two reads) to
        # measure what a machine without them would show.
        with open(data, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as pin:
            with open_sandbox("none", throttles=dev.throttles) as box:
                box.prepare_test()
                first = _read(box, data, size, counter)
                touched = sum(pin[i] for i in range(0, size, 4096))  # map every page of the file
                warm = _read(box, data, size, counter)
        print(f"none: first {first}, warm {warm} (pages touched: {touched > 0})")
        assert warm["mbps"] > 3 * rate, f"warm read {warm} should come from memory"
        assert flag_cache_suspect(warm["fio_bytes"], warm["device_bytes"]), f"warm read {warm}"
