"""cgroup v2 for real (the lab VM): cache isolation, io.max throttles, evidence, OOM, writeback.

The host's kernel is cgroup v1 hybrid; these are the same promises on the unified
hierarchy that iolab's users have. TCG's CPU is slow, so the throttled rates are
the emulated `hdd` profile's (100 MB/s, 150 IOPS), which the guest can reach.
"""
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import IOLAB, ROOT
from iolab.isolation import cgroups
from iolab.devices import emulated
from iolab.devices.emulated import emulated_device
from iolab.isolation.sandbox import open_sandbox
from kernel_fixtures import fio_json, within

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

MiB = 1024**2


def run_cli(*args, timeout=900):
    proc = subprocess.Popen(IOLAB + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc, stdout, stderr


def test_cachecheck_warm_read_comes_from_the_device_on_v2(tmp_path, lab_disks):
    disk = lab_disks[0]
    proc, stdout, stderr = run_cli("run", "cachecheck", "--target", disk, "--confirm", disk, "--size", "256M",
                                   "--mem-limit", "64M", "--isolation", "cgroup", "--data", tmp_path / "data",
                                   "--no-progress")
    assert proc.returncode == 0, stderr
    assert cgroups.leftovers(owner=proc.pid) == []
    run_dir = Path(stdout.strip().splitlines()[-1])
    results = pd.read_csv(run_dir / "results.csv").set_index("test")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    iso = manifest["isolation"]
    assert iso["mode"] == "cgroup" and iso["cgroup"]["version"] == "v2"
    warm = results.loc["warm"]
    print(f"\nv2 cachecheck warm: {warm['bw_mbps']:.1f} MB/s, device read {warm['dev_read_bytes']:.0f} B "
          f"of {warm['io_bytes']:.0f} B, cgroup peak {warm['cg_peak_bytes']:.0f} B")
    assert warm["io_bytes"] == 256 * MiB
    assert warm["dev_read_bytes"] >= 0.95 * warm["io_bytes"]  # io.stat / diskstats: the device served it
    assert 0 < warm["cg_peak_bytes"] <= 64 * MiB              # memory.peak (or its sampled fallback)
    assert "cache_suspect" not in str(warm["flags"])


def _fio(box, dev, *args, runtime="4"):
    return fio_json(["--name=v2", f"--filename={dev.device}", "--direct=1", f"--runtime={runtime}", "--time_based",
                     "--size=1G", "--ioengine=libaio", *[f"--{k}={v}" for k, v in dev.fio_options.items()], *args],
                    popen=box.popen, timeout=120)


def test_io_max_throttles_the_hdd_profile(tmp_path):
    with emulated_device("hdd", size="1G", scratch_dir=tmp_path) as dev:
        p = dev.profile
        with open_sandbox("cgroup", mem_limit="256M", buffered=False, throttles=dev.throttles) as box:
            version, io_dir = box.group.dirs["io"]
            io_max = Path(io_dir, "io.max").read_text().strip()
            seq = _fio(box, dev, "--rw=read", "--bs=1M")
            rnd = _fio(box, dev, "--rw=randread", "--bs=4k", "--iodepth=1")
        print(f"\nv2 hdd: seq 1M {seq['read']['bw_bytes'] / 1e6:.1f} MB/s (declared {p.read_bps / 1e6:.0f}), "
              f"4K QD1 {rnd['read']['iops']:.1f} IOPS (declared {p.read_iops}); io.max seen: {io_max}")
    assert version == "v2" and f"rbps={p.read_bps}" in io_max
    assert within(seq["read"]["bw_bytes"], p.read_bps, 0.10)
    assert within(rnd["read"]["iops"], p.read_iops, 0.10)
    assert emulated.leftovers() == []


def test_buffered_writes_are_throttled_on_v2(tmp_path):
    """v2 charges writeback to the writer's cgroup: a buffered write + fsync runs at io.max.

    (On v1 the flusher threads write back outside any group: the v1_writeback caveat.)
    """
    with emulated_device("hdd", size="1G", scratch_dir=tmp_path, filesystem="ext4") as dev:
        p = dev.profile
        target = Path(dev.mountpoint) / "buffered.dat"
        with open_sandbox("cgroup", mem_limit="256M", throttles=dev.throttles) as box:
            job = fio_json(["--name=wb", f"--filename={target}", "--rw=write", "--bs=1M", "--size=300M",
                            "--direct=0", "--end_fsync=1", "--ioengine=psync"], popen=box.popen, timeout=300)
    bps = job["write"]["io_bytes"] / (job["job_runtime"] / 1000)  # bytes over ms, the final fsync included
    print(f"\nv2 buffered write + fsync: {bps / 1e6:.1f} MB/s against io.max {p.write_bps / 1e6:.0f} MB/s")
    assert bps <= 1.1 * p.write_bps  # writeback was throttled: the device's rate, not RAM's


def test_oom_under_the_limit_is_recorded():
    with open_sandbox("cgroup", mem_limit="32M") as box:
        hog = box.popen(["python3", "-c", "b = bytearray(256 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hog.wait(timeout=120)
        assert hog.returncode != 0
        assert box.group.oom_kills() >= 1
    assert cgroups.leftovers() == []
