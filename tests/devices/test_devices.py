"""iolab.devices.safety and listing: the refusal rules on real loop devices, the device listing, provenance."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from device_fixtures import (  # noqa: F401 - fixtures
    iolab, make_loop, partition, requires, requires_root, scratch, sh)
from iolab.devices import blockdev, listing, provenance, safety
from iolab.core.errors import IolabError

pytestmark = [requires_root, requires("losetup", "wipefs", "mkfs.ext4", "sgdisk", "partx", "mkswap")]


def refusal(device, confirm=None) -> str:
    with pytest.raises(IolabError) as info:
        safety.check_writable(device, confirm=confirm)
    return str(info.value)


def mkfs_ext4(device: str) -> None:
    sh("mkfs.ext4", "-q", "-F", device)


def mount(device: str, target: Path) -> None:
    target.mkdir(exist_ok=True)
    sh("mount", device, target)


# ------------------------------------------------------------------ writable

def test_blank_loop_device_is_writable(make_loop):
    dev = make_loop()
    verdict = safety.check_writable(dev)
    assert verdict.writable and verdict.reasons == []
    with safety.open_exclusive(dev) as handle:
        assert handle.fd >= 0


def test_a_loop_device_is_described_in_the_kits_recorded_words(make_loop):
    """A loop device has no model of its own: blockdev.model writes the kit's description from the one table a
    report reads it back from (iolab.core.recorded), so a Japanese page can say it in Japanese."""
    from iolab.core import recorded
    from iolab.report import i18n
    said = blockdev.model(os.path.basename(make_loop()))  # a name under /sys/block
    assert said == recorded.DEVICE_DESCRIPTIONS["loop"]
    assert recorded.read(said, recorded.DEVICE_DESCRIPTIONS) == ("loop", {})
    assert i18n.device_description(said, "ja") == "ループデバイス"


def test_not_a_block_device_or_missing(scratch):
    (scratch / "file").write_text("x")
    assert "not a block device" in refusal(scratch / "file")
    assert "no such device" in refusal(scratch / "nope")


# ------------------------------------------------------------------ refusals

def test_mounted_device_refused_even_when_confirmed(make_loop, scratch):
    dev = make_loop()
    mkfs_ext4(dev)
    mount(dev, scratch / "mnt")
    message = refusal(dev)
    assert message.startswith(f"{dev}: refusing to write")
    assert f"mounted at {scratch / 'mnt'}" in message
    message = refusal(dev, confirm=dev)
    assert "mounted at" in message and "--confirm does not change that" in message
    with pytest.raises(IolabError, match="cannot open exclusively: in use"):
        safety.open_exclusive(dev)


def test_mounted_partition_refuses_the_whole_disk(make_loop, scratch):
    dev = make_loop("64M", partscan=True)
    p1, p2 = partition(dev, [20, 20])
    mkfs_ext4(p1)
    mount(p1, scratch / "mnt")
    message = refusal(dev, confirm=dev)
    assert f"partition {Path(p1).name} mounted at {scratch / 'mnt'}" in message
    assert "mounted at" in refusal(p1)
    # the other partition is not mounted and blank: writable
    assert safety.check_writable(p2).writable


def test_mounted_through_a_symlink(make_loop, scratch):
    dev = make_loop()
    mkfs_ext4(dev)
    links = scratch / "by-id"
    links.mkdir()
    link = links / "usb-Fake_Disk_0001"
    link.symlink_to(dev)
    mount(str(link), scratch / "mnt")      # mounted by the link's name
    for name in (str(link), dev):
        message = refusal(name, confirm=name)
        assert "mounted at" in message
    assert refusal(link).startswith(f"{link} ({dev}): refusing to write")
    row = listing.table().set_index("device").loc[dev]
    assert not row["writable"] and str(scratch / "mnt") in row["mountpoints"]


def test_signature_refused_unless_that_exact_device_is_confirmed(make_loop, scratch):
    dev, other = make_loop(name="fs"), make_loop(name="other")
    mkfs_ext4(dev)
    message = refusal(dev)
    assert "file-system signature (ext4)" in message and f"--confirm {dev}" in message
    # a wrong path still refuses, and says the confirmation names another device
    message = refusal(dev, confirm=other)
    assert "does not name this device" in message
    assert "refusing" in refusal(dev, confirm=[other, "/dev/null"])
    assert "refusing" in refusal(dev, confirm=dev + "0")   # /dev/loopN0 is another device
    # the exact path, a link to it, or a list containing it: allowed
    link = scratch / "link"
    link.symlink_to(dev)
    assert safety.check_writable(dev, confirm=dev).confirmed
    assert safety.check_writable(dev, confirm=str(link)).confirmed
    assert safety.check_writable(link, confirm=[other, dev]).confirmed
    row = listing.table().set_index("device").loc[dev]
    assert not row["writable"] and row["confirmable"] and row["signatures"] == ["ext4"]


def test_partition_table_signature(make_loop):
    dev = make_loop("64M", partscan=True)
    partition(dev, [10])
    assert "partition-table signature (gpt)" in refusal(dev)
    assert safety.check_writable(dev, confirm=dev).confirmed


def test_swap_refused_even_when_confirmed(make_loop):
    dev = make_loop("32M")
    sh("mkswap", dev)
    sh("swapon", dev)
    try:
        message = refusal(dev, confirm=dev)
        assert f"in use as swap ({dev})" in message and "--confirm does not change that" in message
        assert listing.table().set_index("device").loc[dev]["swap"]
    finally:
        sh("swapoff", dev, check=False)
    # once off, only the swap signature stands in the way
    assert "a swap signature" in refusal(dev)
    assert safety.check_writable(dev, confirm=dev).confirmed


def _make_holder(make_loop):
    """Try what really creates a holder on this machine; returns (device, cleanup) or a skip reason."""
    dev = make_loop("32M")
    name = Path(dev).name
    tried = []
    if Path("/dev/mapper/control").exists() or "device-mapper" in Path("/proc/misc").read_text():
        size = int(Path(f"/sys/block/{name}/size").read_text())
        dm = f"iolab-test-{os.getpid()}"
        proc = sh("dmsetup", "create", dm, "--table", f"0 {size} linear {dev} 0", check=False)
        if proc.returncode == 0:
            return dev, lambda: sh("dmsetup", "remove", dm, check=False)
        tried.append(f"dmsetup create failed ({(proc.stderr.strip().splitlines() or ['?'])[0]})")
    else:
        tried.append("no device-mapper driver (/dev/mapper/control, /proc/misc)")
    upper = sh("losetup", "--find", "--show", dev).stdout.strip()  # a loop device over the loop device
    if list(Path(f"/sys/block/{name}/holders").iterdir()):
        return dev, lambda: sh("losetup", "--detach", upper, check=False)
    sh("losetup", "--detach", upper, check=False)
    tried.append("a loop device over the loop device creates no holder")
    if not Path("/proc/mdstat").exists():
        tried.append("no md driver (/proc/mdstat)")
    return None, "; ".join(tried)


@pytest.mark.stock_kernel  # device-mapper or md make the holder: the lab VM's kernel has both
def test_holder_refused_even_when_confirmed(make_loop):
    dev, undo = _make_holder(make_loop)
    if dev is None:
        pytest.skip(f"nothing creates a holder on this machine: {undo}")
    try:
        message = refusal(dev, confirm=dev)
        assert "held by" in message and "--confirm does not change that" in message
    finally:
        undo()


def test_holder_reason_from_sysfs(make_loop, monkeypatch):
    """The holder rule itself, with sysfs answering as it does over md/dm (see the test
    above for the real thing where the machine can make a holder)."""
    dev = make_loop()
    name = Path(dev).name
    real = blockdev.holders
    monkeypatch.setattr(safety, "holders", lambda n: ["dm-7"] if n == name else real(n))
    message = refusal(dev, confirm=dev)
    assert "held by dm-7" in message and "--confirm does not change that" in message


def test_root_chain_refused():
    chain = safety.root_chain()
    if not chain:
        pytest.skip("the root file system is not on a block device visible here")
    for name in chain:
        path = f"/dev/{name}"
        if os.path.exists(path):
            message = refusal(path, confirm=path)
            assert "backs the root file system (/)" in message
    rows = listing.table()
    assert rows[rows["root_chain"]]["writable"].eq(False).all()


def test_root_chain_follows_partitions_and_loop_backing(make_loop, scratch):
    """The walk below a device: partition -> its disk -> a loop device's backing file's
    device (so a root file system on a loop device chains to the disk under it)."""
    dev = make_loop("16M", partscan=True)
    p1, = partition(dev, [8])
    seen: set = set()
    safety._below(Path(p1).name, seen)
    root_dev = blockdev.name_of_devno(os.stat(scratch).st_dev)
    assert Path(dev).name in seen and Path(p1).name in seen and root_dev in seen


# ------------------------------------------------------------------ listing

def test_listing_and_cli(make_loop):
    dev = make_loop("48M")
    frame = listing.table()
    assert list(frame.columns) == listing.COLUMNS
    row = frame.set_index("device").loc[dev]
    assert row["writable"] and row["size_bytes"] == 48 * 1024**2 and row["type"] == "loop"
    assert row["logical_sector"] == 512 and row["why_not"] == ""
    proc = iolab("devices", "--json")
    assert proc.returncode == 0, proc.stderr
    assert any(r["device"] == dev and r["writable"] for r in json.loads(proc.stdout))
    proc = iolab("devices")
    assert proc.returncode == 0 and dev in proc.stdout and "WHY NOT" in proc.stdout


# ----------------------------------------------------------------- provenance

def test_provenance_of_a_file_on_a_loop_device(make_loop, scratch):
    dev = make_loop("64M", partscan=True)
    p1, = partition(dev, [40])
    mkfs_ext4(p1)
    (scratch / "mnt").mkdir()
    sh("mount", "-o", "noatime", p1, scratch / "mnt")
    target = scratch / "mnt" / "data"
    target.write_text("x")
    info = provenance.device_provenance(target)
    assert info["device"] == p1 and info["partition"] == 1 and info["disk"] == Path(dev).name
    assert info["filesystem"]["fstype"] == "ext4" and "noatime" in info["filesystem"]["options"]
    assert info["filesystem"]["target"] == str(scratch / "mnt")
    assert info["loop"]["direct_io"] is True
    assert info["loop"]["backing_file"].startswith(str(scratch))
    assert info["loop"]["backing"]["filesystem"] is not None
    assert info["queue"]["logical_block_size"] == 512 and info["queue"]["nr_requests"]
    assert info["scheduler"] and info["raid"] is None and info["rotational"] in (True, False)
    # the block device itself
    info = provenance.device_provenance(dev)
    assert info["device"] == dev and info["loop"]["direct_io"] is True and info["partition"] is None
    json.dumps(info)  # JSON-ready for the manifest


def test_provenance_of_a_path_without_a_block_device():
    if not os.path.ismount("/dev/shm"):
        pytest.skip("no tmpfs at /dev/shm")
    info = provenance.device_provenance("/dev/shm")
    assert info["device"] is None and info["filesystem"]["fstype"] == "tmpfs" and "note" in info
    with pytest.raises(IolabError, match="no such"):
        provenance.device_provenance("/nonexistent/path")
