"""The ``iscsi:`` section of a setup plan on the host: validation field by field, the dry run,
the teardown of a state whose export is gone. (The real export, login, RAID1 and teardown run in
the lab VM: tests/lab/test_lab_iscsi.py.)"""
import json
import os
from pathlib import Path

import pytest

from iolab import cli
from iolab.core.errors import IolabError
from iolab.devices import plan as setup_plan
from iolab.devices.plan import iscsi as plan_iscsi

ROOT = Path(__file__).resolve().parents[2]
PLAN = """name: mirror
loop_devices:
  - {{name: s1, file: {tmp}/s1.img, size: 64M}}
  - {{name: s2, file: {tmp}/s2.img, size: 64M}}
iscsi:
{iscsi}
raid:
  - {{name: iolab-r1t, level: 1, members: [s1, remote]}}
"""


def write(tmp_path: Path, iscsi: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(PLAN.format(tmp=tmp_path, iscsi=iscsi))
    return path


def failure(tmp_path: Path, iscsi: str) -> str:
    with pytest.raises(IolabError) as info:
        setup_plan.load_plan(write(tmp_path, iscsi))
    return str(info.value)


def test_an_iscsi_entry_is_a_plan_device_made_from_another(tmp_path):
    plan = setup_plan.load_plan(write(tmp_path, "  - {name: remote, export: s2}"))
    assert [(s.name, s.export, s.portal) for s in plan.iscsi] == [("remote", "s2", "127.0.0.1:3260")]
    assert "remote" in plan.created_names()
    iqn = plan_iscsi.iqn_for(plan, "remote")
    assert iqn.startswith("iqn.2003-01.org.iolab:plan-") and iqn.endswith("-remote")
    other = tmp_path / "other"
    other.mkdir()
    assert plan_iscsi.iqn_for(setup_plan.load_plan(write(other, "  - {name: remote, export: s2}")), "remote") != iqn


@pytest.mark.parametrize("entry, field, words", [
    ("  - {name: remote, export: s2, chap: x}", "iscsi[0]", "chap"),
    ("  - {name: remote, export: s9}", "iscsi[0].export", "unknown device name 's9'"),
    ("  - {name: remote}", "iscsi[0]", "export"),
    ("  - {name: s1, export: s2}", "iscsi[0].name", "already used"),
    ("  - {name: remote, export: s2}\n  - {name: remote, export: s1}", "iscsi[1].name", "already used"),
    ("  - {name: remote, export: s1}", "raid[0].members[0]", "already used"),
    ("  - {name: remote, export: s2, portal: '10.0.0.1:3260'}", "iscsi[0].portal", "127.0.0.1"),
    ("  - {name: remote, export: s2, portal: 'localhost'}", "iscsi[0].portal", "IPv4:PORT"),
    ("  - {name: remote, export: remote}", "iscsi[0].export", "already used"),
])
def test_a_bad_entry_names_the_plan_file_and_the_field(tmp_path, entry, field, words):
    message = failure(tmp_path, entry)
    assert "mirror.yaml" in message and field in message and words in message, message


def test_the_dry_run_lists_the_export_and_the_login_before_the_array(tmp_path, capsys):
    path = write(tmp_path, "  - {name: remote, export: s2}")
    capsys.readouterr()
    cli.main(["setup", str(path), "--dry-run"])
    out = capsys.readouterr().out
    iqn = plan_iscsi.iqn_for(setup_plan.load_plan(path), "remote")
    lines = out.splitlines()
    login = next(i for i, line in enumerate(lines) if "--login" in line)
    mdadm = next(i for i, line in enumerate(lines) if line.startswith("mdadm --create"))
    s2 = next(i for i, line in enumerate(lines) if line.startswith("losetup") and "s2.img" in line)
    assert s2 < login < mdadm, out
    assert f"-T {iqn} -p 127.0.0.1:3260 --login" in lines[login]
    assert any("udev_path=<s2>" in line for line in lines), out
    assert "'<s1>' '<remote>'" in lines[mdadm]
    assert not (tmp_path / "s1.img").exists() and not setup_plan.load_plan(path).state_path.exists()


def test_the_example_plan_mirrors_a_loop_device_with_an_iscsi_disk():
    plan = setup_plan.load_plan(ROOT / "examples" / "plans" / "iscsi-mirror.yaml")
    (export,) = plan.iscsi
    assert export.export in {l.name for l in plan.loops}
    (raid,) = plan.raids
    assert raid.level == 1 and export.name in raid.members and len(raid.members) == 2
    assert plan.filesystems[0].device == raid.name and plan.filesystems[0].mount


def test_teardown_of_an_export_that_is_gone_only_forgets_it(tmp_path):
    """A state whose iSCSI record names a target that no longer exists: nothing to undo, no error,
    nothing removed that the record does not name (this host has no LIO target loaded)."""
    path = write(tmp_path, "  - {name: remote, export: s2}")
    plan = setup_plan.load_plan(path)
    iqn = plan_iscsi.iqn_for(plan, "remote")
    record = {"kind": "iscsi", "name": "remote", "status": "pending", "commands": [], "iqn": iqn,
              "export": {"name": "plan-x-remote", "device": "/dev/loop99", "portal": "127.0.0.1:3260",
                         "hba": "iblock_99"}}
    plan.state_path.write_text(json.dumps({"version": 1, "plan": str(path), "status": "setting up",
                                           "pid": None, "devices": {}, "steps": [record]}))
    assert setup_plan.teardown_commands(plan) == []
    setup_plan.teardown(plan)
    assert not plan.state_path.exists()


def test_the_iscsid_log_lives_in_the_root_only_state_directory():
    import stat

    from iolab.core import statedir
    log = plan_iscsi.daemon_log()
    assert log.parent == statedir.base() / "logs"
    st = os.lstat(log.parent)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
