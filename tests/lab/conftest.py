"""Tests that run inside the lab VM (``make test`` boots it once: iolab/lab/tier.py).

Every test here carries the ``lab`` marker. Outside the VM ($IOLAB_LAB unset)
they are deselected, not skipped one by one (tests/conftest.py, which also
deselects the ``stock_kernel`` tests of other directories). Inside, a session fixture checks
that the guest is clean (no loop device, md array, dm device or iolab cgroup
left, no iSCSI session or LIO target) before the VM powers off.
"""
import os
import subprocess
from pathlib import Path

import pytest

from cli_helpers import IN_LAB


def leftovers() -> list[str]:
    """What a lab test may have left in the guest: loop devices, md arrays, dm devices, cgroups, mounts, iSCSI."""
    found = []
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout.strip()
    if loops:
        found.append(f"loop devices: {loops}")
    mdstat = Path("/proc/mdstat")
    if mdstat.exists():
        arrays = [line for line in mdstat.read_text().splitlines() if line.startswith("md")]
        if arrays:
            found.append(f"md arrays: {arrays}")
    dm = subprocess.run(["dmsetup", "ls"], capture_output=True, text=True)
    if dm.returncode == 0 and "No devices found" not in dm.stdout and dm.stdout.strip():
        found.append(f"dm devices: {dm.stdout.strip()}")
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").rglob("*iolab*") if p.is_dir()]
    if cgroups:
        found.append(f"cgroups: {cgroups}")
    mounts = [line for line in Path("/proc/self/mounts").read_text().splitlines() if "/mnt/iolab" in line]
    if mounts:
        found.append(f"mounts: {mounts}")
    return found + iscsi_leftovers()


def iscsi_leftovers() -> list[str]:
    """iSCSI sessions (initiator), LIO targets and backstores (configfs), iscsid processes, node records."""
    found = []
    sessions = sorted(p.name for p in Path("/sys/class/iscsi_session").glob("session*"))
    if sessions:
        found.append(f"iSCSI sessions: {sessions}")
    target = Path("/sys/kernel/config/target")
    targets = sorted(p.name for p in target.glob("iscsi/iqn.*"))
    if targets:
        found.append(f"LIO iSCSI targets: {targets}")
    stores = sorted(f"{p.parent.name}/{p.name}" for p in target.glob("core/*_*/*") if p.is_dir())
    if stores:
        found.append(f"LIO backstores: {stores}")
    daemons = [p.parent.name for p in Path("/proc").glob("[0-9]*/comm") if _read(p) == "iscsid"]
    if daemons:
        found.append(f"iscsid processes: {daemons}")
    nodes = sorted(p.name for p in Path("/etc/iscsi/nodes").glob("*"))
    if nodes:
        found.append(f"open-iscsi node records: {nodes}")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@pytest.fixture(scope="session", autouse=True)
def guest_left_clean():
    yield
    if IN_LAB:
        assert leftovers() == [], "the lab tests left these behind in the guest"


@pytest.fixture
def clean_after():
    """Per test: fail the test that leaves something behind, not the whole session."""
    yield
    assert leftovers() == []


@pytest.fixture(scope="session")
def lab_disks() -> list[str]:
    """The raw disks attached to the VM (real virtio-blk block devices), in order."""
    disks = os.environ.get("IOLAB_LAB_DISKS", "").split()
    assert disks, "the lab VM was booted without raw disks"
    return disks
