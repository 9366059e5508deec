"""iSCSI export on this host: what can be checked without the LIO target (this kernel has no modules).

The real export, login, RAID1 and pgbench run in the lab VM (tests/lab/test_lab_iscsi.py).
Here: refusals that name the field or the missing part, target names that carry the owner,
and the reaper's handling of an ``iscsi`` ledger record whose export is already gone.
"""
import os
import subprocess
from pathlib import Path

import pytest

from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.devices import iscsi, iscsi_initiator, lio
from iolab.engine import reaper

IS_ROOT = os.geteuid() == 0
NO_LIO = not Path("/sys/module/target_core_mod").exists()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ownership.ENV, str(tmp_path / "owned"))
    return tmp_path / "owned"


def test_target_names_carry_the_owner_pid():
    iqn = iscsi.new_iqn()
    assert iqn.startswith("iqn.2003-01.org.iolab:iolab-") and iscsi.owner_of(iqn) == os.getpid()
    assert iscsi.new_iqn(4711) != iscsi.new_iqn(4711) and iscsi.owner_of(iscsi.new_iqn(4711)) == 4711
    assert iscsi.owner_of("iqn.2003-01.org.linux-iscsi:iolab-12-ab") is None
    assert iscsi.owner_of("iqn.2003-01.org.iolab:something") is None


@pytest.mark.parametrize("portal, message", [("10.0.0.5:3260", "only on 127.0.0.1"),
                                             ("127.0.0.1", "IPv4:PORT"), ("127.0.0.1:99999", "IPv4:PORT")])
def test_portal_is_checked_before_anything_is_made(portal, message):
    with pytest.raises(IolabError, match=message) as info:
        lio.export("/dev/null", "iqn.2003-01.org.iolab:x", "x", portal=portal)
    assert portal in str(info.value)


def test_a_file_is_not_exported(tmp_path):
    image = tmp_path / "disk.img"
    image.write_bytes(b"\0" * 4096)
    with pytest.raises(IolabError, match="not a block device") as info:
        lio.export(str(image), "iqn.2003-01.org.iolab:x", "x")
    assert str(image) in str(info.value)


@pytest.mark.skipif(not IS_ROOT or not NO_LIO, reason="needs root on a kernel without the LIO target modules")
def test_kernel_without_lio_names_the_missing_module(state_dir):
    loop = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    with pytest.raises(IolabError, match="target_core_mod") as info:
        iscsi.attach(_any_block_device())
    assert "modprobe" in str(info.value)
    assert ownership.records() == [] and subprocess.run(["losetup", "-a"], capture_output=True,
                                                        text=True).stdout == loop


def _any_block_device() -> str:
    for name in sorted(os.listdir("/sys/block")):
        if Path(f"/dev/{name}").is_block_device():
            return f"/dev/{name}"
    pytest.skip("no block device node in /dev")


def test_reaper_drops_the_record_of_an_export_that_is_gone(state_dir):
    gone = int(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout)
    iqn = iscsi.new_iqn(gone)
    ownership.record(iscsi.KIND, iqn, undo="iscsiadm logout; rmdir", undone_by=iscsi.__name__,
                     by=ownership.Owner(gone), name="iolab-x", device="/dev/loop7", portal="127.0.0.1:3260",
                     hba="iblock_9", iscsid_pid=None)
    assert [s.kind for s in reaper.find_stale() if s.id == iqn] == ["iscsi"]
    assert reaper.reap(dry_run=True) == []      # no session, no target: nothing to undo
    reaper.reap()
    assert ownership.find(iscsi.KIND, iqn) is None


def test_logout_of_nothing_is_not_an_error():
    if iscsi_initiator.shutil.which("iscsiadm") is None:
        pytest.skip("iscsiadm missing: Debian package open-iscsi")
    iqn = iscsi.new_iqn()
    assert iscsi_initiator.session_of(iqn) is None
    assert iscsi_initiator.logout(iqn, "127.0.0.1:3260") == []
