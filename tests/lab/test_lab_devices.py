"""Device set-up for real (the lab VM): md, dm, GPT and mkfs on real block devices.

Every example plan sets up and tears down (in process: the CLI's own code,
without paying its imports under TCG once per plan), and the refusal rules
hold on real holders: a member of an md array, a device under a dm-linear
target, a disk with a mounted partition (``iolab devices`` and ``iolab run``
through the CLI's main in this process too; a real ``iolab`` process runs in
the lab tier's own ``iolab recipes``, iolab/lab/tier.py).
"""
import json
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import ROOT
from iolab import cli
from iolab.core.errors import IolabError
from iolab.devices import blockdev, safety
from iolab.devices import plan as setup_plan

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

PLANS = sorted((ROOT / "examples" / "plans").glob("*.yaml"))
LAB_SSD_SIZE = "600M"  # ssd-ext4's 64G partition, cut to the lab disk (1 GiB)


def lab_copy(plan: Path, tmp_path: Path, disk: str) -> Path:
    """The plan beside its state file in a writable directory; ssd-ext4 names the lab disk."""
    text = plan.read_text()
    if "CHANGE-ME" in text:
        text = text.replace("/dev/disk/by-id/CHANGE-ME", disk).replace("size: 64G", f"size: {LAB_SSD_SIZE}")
    copy = tmp_path / plan.name
    copy.write_text(text)
    return copy


def test_every_example_plan_sets_up_and_tears_down(tmp_path, lab_disks):
    assert {p.name for p in PLANS} >= {"raid0-loops.yaml", "ssd-ext4.yaml", "two-loops.yaml", "iscsi-mirror.yaml"}
    took = {}
    for plan_path in PLANS:
        started = time.monotonic()
        copy = lab_copy(plan_path, tmp_path, lab_disks[1])
        plan = setup_plan.load_plan(copy)
        if plan.iscsi:  # tests/lab/test_lab_iscsi.py sets this very file up, runs pgbench on it, tears it down
            continue
        try:
            result = setup_plan.setup(plan)
            for name, mount in result["mounts"].items():
                assert Path(mount).is_mount(), f"{plan_path.name}: {name} not mounted at {mount}"
                probe = Path(mount) / "probe"
                probe.write_bytes(b"x" * 4096)  # the file system takes writes
                probe.unlink()
            assert result["mounts"], f"{plan_path.name} mounted nothing"
        finally:
            setup_plan.teardown(plan)
        assert setup_plan.status(plan) is None, f"{plan_path.name}: state left after teardown"
        assert not any(Path(m).is_mount() for m in result["mounts"].values())
        took[plan_path.stem] = round(time.monotonic() - started, 1)
    print(f"\nseconds per plan: {took}")
    # what ssd-ext4 did to the lab disk is undone too, not left as a partition table
    subprocess.run(["wipefs", "-a", "-q", lab_disks[1]], check=True)


def _sh(*argv):
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr.strip()}"
    return proc.stdout.strip()


@pytest.fixture
def holders(tmp_path, lab_disks):
    """An md RAID0 member, a dm-linear lower device and a disk with a mounted partition, all real."""
    made = {"loops": [], "md": None, "dm": None, "mount": None}
    try:
        for index in range(3):
            backing = tmp_path / f"h{index}.img"
            with open(backing, "wb") as handle:
                handle.truncate(64 * 1024**2)
            made["loops"].append(_sh("losetup", "--find", "--show", str(backing)))
        member, spare, lower = made["loops"]
        _sh("mdadm", "--create", "/dev/md/iolab-lab", "--run", "--level=0", "--raid-devices=2", "--chunk=64",
            "--metadata=1.2", member, spare)
        made["md"] = "/dev/md/iolab-lab"
        sectors = _sh("blockdev", "--getsz", lower)
        _sh("dmsetup", "create", "--noudevsync", "iolab-lab-linear", "--table", f"0 {sectors} linear {lower} 0")
        made["dm"] = "iolab-lab-linear"
        disk = lab_disks[1]
        _sh("sgdisk", "--zap-all", disk)
        _sh("sgdisk", "--new=1:1M:+256M", disk)
        part = _partition_of(disk)
        _sh("mkfs.ext4", "-q", "-F", part)
        mountpoint = tmp_path / "mnt"
        mountpoint.mkdir()
        _sh("mount", part, str(mountpoint))
        made["mount"] = str(mountpoint)
        yield {"md_member": member, "dm_lower": lower, "disk": disk, "partition": part}
    finally:
        if made["mount"]:
            subprocess.run(["umount", made["mount"]])
        subprocess.run(["wipefs", "-a", "-q", lab_disks[1]], capture_output=True)
        if made["dm"]:
            subprocess.run(["dmsetup", "remove", "--noudevsync", made["dm"]])
        if made["md"]:
            subprocess.run(["mdadm", "--stop", made["md"]], capture_output=True)
            subprocess.run(["mdadm", "--zero-superblock", *made["loops"][:2]], capture_output=True)
        for loop in made["loops"]:
            subprocess.run(["losetup", "-d", loop])


def _partition_of(disk: str) -> str:
    name = Path(disk).name
    subprocess.run(["partx", "--update", disk], capture_output=True)
    parts = blockdev.partitions(name)
    assert parts, f"no partition appeared on {disk}"
    path = f"/dev/{parts[0]}"
    if not Path(path).exists():  # no udev in the guest: make the node from sysfs
        major, minor = Path(f"/sys/class/block/{parts[0]}/dev").read_text().split(":")
        subprocess.run(["mknod", path, "b", major, minor.strip()], check=True)
    return path


def test_refusals_on_real_md_and_dm_holders(holders, tmp_path, capsys):
    capsys.readouterr()
    assert cli.main(["devices", "--json"]) == 0  # the CLI's main in this process: no 20 s of imports
    rows = {row["device"]: row for row in json.loads(capsys.readouterr().out)}
    member, lower, disk = rows[holders["md_member"]], rows[holders["dm_lower"]], rows[holders["disk"]]
    for row in (member, lower, disk):
        assert row["writable"] is False and row["confirmable"] is False
    assert "held by md" in member["why_not"] and any(h.startswith("md") for h in member["holders"])
    assert "held by dm-" in lower["why_not"]
    assert f"mounted at {tmp_path / 'mnt'}" in disk["why_not"]

    # `iolab run` through the same main, in this process too (a new iolab process: ~20 s of imports under TCG)
    rc = cli.main(["run", "quick", "--target", holders["md_member"], "--confirm", holders["md_member"],
                   "--data", str(tmp_path / "data"), "--no-progress"])
    stderr = capsys.readouterr().err
    print(f"\nverdicts: {holders['md_member']}: {member['why_not']}; {holders['dm_lower']}: {lower['why_not']}; "
          f"{holders['disk']}: {disk['why_not']}")
    print(f"iolab run quick --target {holders['md_member']}: exit {rc}: {stderr.strip()[-300:]}")
    assert rc != 0
    assert "refusing to write" in stderr and "held by md" in stderr
    assert "--confirm does not change that" in stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("results.csv"))
    for device in (holders["dm_lower"], holders["disk"]):  # the same check the CLI made, on the other two
        with pytest.raises(IolabError, match="refusing to write"):
            safety.check_writable(device, confirm=device)
