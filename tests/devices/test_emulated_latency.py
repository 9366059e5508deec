"""Which emulation an emulated device runs (iolab.devices.latency), the fallback on a kernel without
dm-delay (this host: no device-mapper), and the refusal of a scratch directory without loop direct I/O.

The dm-delay side itself runs on a real kernel in tests/lab/test_lab_latency.py.
"""
from __future__ import annotations

import os

import pytest

from iolab.core.errors import IolabError
from iolab.devices import dmdelay, emulated, latency, loopdev
from iolab.devices.emulated import emulated_device, get_profile, load_profiles

from kernel_fixtures import machine_clean, module_clean, mounted, needs_root, scratch  # noqa: F401

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")


def test_the_hdd_declares_a_read_and_a_flush_delay_and_the_ssd_none():
    hdd, ssd = get_profile("hdd"), get_profile("sata-ssd")
    assert (hdd.read_delay_ms, hdd.write_delay_ms, hdd.flush_delay_ms) == (8, 0, 8)
    assert (ssd.read_delay_ms, ssd.write_delay_ms, ssd.flush_delay_ms) == (None, None, None)
    assert any("every cache flush waits at least 8 ms" in note for note in hdd.notes)


@pytest.mark.parametrize("value", [-1, 2.5, "8ms", True])
def test_a_bad_delay_names_the_field(tmp_path, value):
    bad = tmp_path / "p.yaml"
    bad.write_text(f"profiles:\n  slow:\n    read_iops: 10\n    read_delay_ms: {value!r}\n")
    with pytest.raises(IolabError, match=r"slow\.read_delay_ms: must be a whole number of milliseconds"):
        load_profiles(bad)


def test_choice_dm_delay_where_the_kernel_has_it_else_the_throttle():
    hdd, ssd = get_profile("hdd"), get_profile("sata-ssd")
    chosen = latency.choose(hdd, unavailable=lambda: None)
    assert (chosen.kind, chosen.latency_true, chosen.read_delay_ms, chosen.write_delay_ms, chosen.flush_delay_ms) == \
        ("dm-delay", True, 8, 0, 8)
    assert chosen.describe()["flush_delay_ms"] == 8
    fallback = latency.choose(hdd, unavailable=lambda: "the kernel has no dm-delay target (module dm_delay)")
    assert (fallback.kind, fallback.latency_true, fallback.read_delay_ms) == ("blk-throttle", False, None)
    assert fallback.reason == "dm-delay unavailable: the kernel has no dm-delay target (module dm_delay)"
    asked = []
    plain = latency.choose(ssd, unavailable=lambda: asked.append(1))
    assert plain.kind == "blk-throttle" and "declares no per-I/O delay" in plain.reason
    assert asked == [], "a profile without a delay never probes the kernel"


def test_dm_delay_table_and_names():
    assert dmdelay.table("/dev/loop3", 2048, read_ms=8, write_ms=0) == \
        "0 2048 delay /dev/loop3 0 8 /dev/loop3 0 0"
    assert dmdelay.table("/dev/loop3", 2048, read_ms=8, write_ms=0, flush_ms=8) == \
        "0 2048 delay /dev/loop3 0 8 /dev/loop3 0 0 /dev/loop3 0 8"
    assert dmdelay.owner_of(f"{dmdelay.PREFIX}4711-ab12cd") == 4711
    assert dmdelay.owner_of("vg0-root") is None
    assert dmdelay.new_name().startswith(f"{dmdelay.PREFIX}{os.getpid()}-")


def _host_has_dm_delay() -> bool:
    return os.geteuid() == 0 and dmdelay.unavailable() is None


@needs_root
def test_without_dm_delay_the_hdd_is_the_throttled_loop_device_as_before(scratch):
    """This host has no device-mapper: the hdd is exactly the blk-throttle profile, and says so."""
    if _host_has_dm_delay():
        pytest.skip("this kernel has dm-delay: the fallback is not what runs here (tests/lab covers dm-delay)")
    reason = dmdelay.unavailable()
    with emulated_device("hdd", size="64M", scratch_dir=scratch) as dev:
        info = dev.describe()
        assert dev.device == dev.loop_device and loopdev.is_loop(dev.device)
        assert dev.throttles[0].device == dev.devnum and dev.throttles[0].read_iops == 150
        assert dev.fio_options == {"iomem": "mmaphuge"} and info["dio"] is True
        assert info["emulation"] == {"kind": "blk-throttle", "latency_true": False,
                                     "reason": f"dm-delay unavailable: {reason}", "read_delay_ms": None,
                                     "write_delay_ms": None, "flush_delay_ms": None, "dm_device": None, "lower_device": None}
        assert info["loop_device"] == dev.device
    assert dmdelay.leftovers() == [] and emulated.leftovers(owner=os.getpid()) == []


@needs_root
def test_scratch_without_loop_direct_io_is_refused_naming_the_directory(tmp_path):
    with mounted(tmp_path / "ram", "ramfs", "64m") as ram:  # no O_DIRECT, like tmpfs before 6.6
        assert loopdev.filesystem_type(ram) == "ramfs"
        with pytest.raises(IolabError) as caught:
            with emulated_device("hdd", size="16M", scratch_dir=ram):
                pass
        left = list(ram.iterdir())
    message = str(caught.value)
    print(f"\n{message}")
    assert f"a loop device cannot do direct I/O on a file in {ram} (file system ramfs)" in message
    assert "choose a scratch directory on a disk-backed file system" in message
    assert "TMPDIR=/var/tmp" in message
    assert left == [], "the backing file is removed"
    assert emulated.leftovers(owner=os.getpid()) == []


def test_filesystem_type_names_the_innermost_mount(tmp_path):
    assert loopdev.filesystem_type("/proc/self") == "proc"
    assert loopdev.filesystem_type("/") != "unknown"
    assert loopdev.filesystem_type(tmp_path) == loopdev.filesystem_type(tmp_path.parent)
