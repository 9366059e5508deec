"""TPC-B over an iSCSI mirror (the seed article), rehearsed on one machine: the lab VM.

The example plan examples/plans/iscsi-mirror.yaml (its files in the test's directory) does it
all: its ``iscsi:`` section exports one loop device by the kernel's iSCSI
target (LIO, configfs) on 127.0.0.1:3260 and logs in with open-iscsi; the SCSI
disk (/dev/sdX, TCP to that target) is mirrored with the other, local loop
device (md RAID1, ext4), and pgbench (the smallest run that commits transactions)
runs on the mirror through the CLI's main, in this process. Checked: TPS > 0,
both members in sync afterwards, the iSCSI member really took the writes;
then the plan's teardown undoes everything in reverse and the guest is left
clean (conftest's leftovers() also looks for iSCSI sessions and LIO targets).
A plan whose mkfs fails after the login rolls the export back.
A second test kills nothing but pretends the owner died (its ledger record
names a finished process) and lets the reaper undo the export; a third makes
an export fail part-way and checks that what it had made is gone.

Parts that may be missing (open-iscsi not installed by tools/install-lab-deps.sh,
a kernel without LIO, no PostgreSQL) skip the tests with the missing part named.
"""
import csv
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from iolab import cli
from iolab.classic import pgcluster
from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.devices import iscsi, iscsi_initiator, lio, loopdev
from iolab.devices import plan as setup_plan
from iolab.devices.plan import iscsi as plan_iscsi
from iolab.engine import reaper

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plans" / "iscsi-mirror.yaml"
BROKEN = """name: iscsi-broken
loop_devices:
  - {{name: s2, file: {tmp}/s2.img, size: 32M}}
iscsi:
  - {{name: remote, export: s2}}
filesystems:
  - {{device: remote, type: ext4, options: -E no_such_option}}
"""


def lab_plan(tmp_path: Path) -> Path:
    """The example plan as it is (its 128M halves: 64M leaves pgbench's 64M test too little room),
    its files in ``tmp_path``."""
    copy = tmp_path / "iscsi-mirror.yaml"
    copy.write_text(EXAMPLE.read_text().replace("/var/tmp/iolab/iscsi-mirror", str(tmp_path / "images")))
    return copy


RECIPE = """name: pgbench-iscsi
engine: pgbench
description: the smallest pgbench that commits transactions (scale 1, one client, 3 s)
isolation: cgroup
filesystem: ext4
defaults: {size: 64M, runtime: 3, repeat: 1}
options:
  scale: 1
  clients: [1]
  modes:
    tpcb-sync_on: {synchronous_commit: "on", fsync: "on"}
tests:
  - {name: tpcb-sync_on, rw: randrw, bs: 8k}
"""


@pytest.fixture
def iscsi_parts():
    """Skip, naming the part, where open-iscsi, the LIO modules or PostgreSQL are missing."""
    for program in ("iscsiadm", "iscsid"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} missing: Debian package open-iscsi not installed (tools/install-lab-deps.sh)")
    try:
        lio.ready()
    except IolabError as exc:
        pytest.skip(f"no LIO iSCSI target in this kernel: {exc}")


class Phases:
    """Seconds per phase of a test (printed: where the lab's time goes under TCG)."""

    def __init__(self):
        self.last, self.took = time.monotonic(), {}

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.took[phase], self.last = round(now - self.last, 1), now

    def __str__(self) -> str:
        return ", ".join(f"{phase} {seconds}" for phase, seconds in self.took.items())


def written_sectors(disk: str) -> int:
    return int(Path(f"/sys/block/{Path(disk).name}/stat").read_text().split()[6])


def member_states(array: str) -> dict[str, str]:
    md = Path("/sys/block") / Path(array).resolve().name / "md"
    return {p.name[4:]: (p / "state").read_text().strip() for p in md.glob("dev-*")}


def pgbench_on(target: str, data: Path, capsys) -> tuple[int, str, str]:
    recipe = data.parent / "pgbench-iscsi.yaml"
    recipe.write_text(RECIPE)
    capsys.readouterr()
    rc = cli.main(["run", str(recipe), "--target", target, "--data", str(data), "--no-progress",
                   "--label", "iscsi-mirror", "--isolation", "none"])  # the mirror works, not a cache-free figure
    out, err = capsys.readouterr()
    return rc, out, err


def test_pgbench_on_raid1_of_a_local_and_an_iscsi_disk(iscsi_parts, tmp_path, capsys):
    """The example plan's iscsi: section makes the iSCSI half; teardown undoes it with the rest."""
    try:
        pgcluster.find_binaries()
    except IolabError as exc:
        pytest.skip(f"PostgreSQL missing: {exc}")
    tmp_path.chmod(0o755)
    plan = setup_plan.load_plan(lab_plan(tmp_path))
    phases = Phases()
    result = setup_plan.setup(plan)
    phases.done("loops + export + login + RAID1 + ext4")
    try:
        disk, array, mount = result["devices"]["remote"], result["devices"]["iolab-r1i"], plan.filesystems[0].mount
        iqn = plan_iscsi.iqn_for(plan, "remote")
        assert iscsi_initiator.sessions() == [iqn] and lio.targets() == [iqn]
        assert ownership.records(iscsi.KIND) == []   # the plan's state file is its record, not the ledger
        before = written_sectors(disk)
        rc, out, err = pgbench_on(mount, tmp_path / "data", capsys)
        subprocess.run(["sync"], check=True)
        phases.done("pgbench run")
        over_iscsi = (written_sectors(disk) - before) * 512
        states, degraded = member_states(array), (Path("/sys/block") / Path(array).resolve().name
                                                  / "md" / "degraded").read_text().strip()
    finally:
        setup_plan.teardown(plan)
        phases.done("teardown: umount, stop, logout, unexport, detach")
    assert rc == 0, err[-3000:]
    with open(Path(out.strip().splitlines()[-1]) / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    print(f"\npgbench on RAID1 (local loop + iSCSI {disk}): tps {[r['tps'] for r in rows]}, "
          f"{over_iscsi / 1e6:.1f} MB written over iSCSI, members {states}; seconds: {phases}")
    assert [r["test"] for r in rows] == ["tpcb-sync_on"]
    assert float(rows[0]["tps"]) > 0 and int(rows[0]["transactions"]) > 0
    assert degraded == "0" and len(states) == 2
    assert all(state == "in_sync" for state in states.values()), states
    assert over_iscsi >= 1_000_000   # the mirror's second half really took the database's writes
    assert Path(disk).name not in Path("/proc/partitions").read_text().split()
    assert not Path(disk).exists() and iscsi_initiator.sessions() == [] and lio.targets() == []
    assert lio.backstores() == [] and iscsi_initiator.daemon_pids() == [] and setup_plan.status(plan) is None


def test_a_plan_setup_that_fails_after_the_login_undoes_the_export(iscsi_parts, tmp_path):
    """mkfs (a bad option) fails on the iSCSI disk after the export and the login: the rollback logs
    out, stops the iscsid setup started and removes the LIO target and backstore."""
    path = tmp_path / "iscsi-broken.yaml"
    path.write_text(BROKEN.format(tmp=tmp_path))
    plan = setup_plan.load_plan(path)
    with pytest.raises(IolabError) as info:
        setup_plan.setup(plan)
    assert "mkfs.ext4" in str(info.value) and "/dev/sd" in str(info.value)   # it got as far as the disk
    assert iscsi_initiator.sessions() == [] and lio.targets() == [] and lio.backstores() == []
    assert iscsi_initiator.daemon_pids() == [] and setup_plan.status(plan) is None


@pytest.fixture
def backing(tmp_path):
    """A 16 MiB loop device to export (detached after the test)."""
    backing_file = tmp_path / "backing.img"
    subprocess.run(["truncate", "-s", "16M", str(backing_file)], check=True)
    device = loopdev.attach(backing_file)
    try:
        yield device
    finally:
        loopdev.detach(device)


def test_reaper_undoes_an_export_whose_owner_is_gone(iscsi_parts, backing):
    att = iscsi.attach(backing)
    try:
        record = ownership.find(iscsi.KIND, att.iqn)
        assert record is not None and record.details["iscsid_pid"] == (att.daemon and att.daemon.pid)
        gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
        data = json.loads(record.path.read_text())
        data["owner"] = {"pid": int(gone), "start": None, "boot": None}   # as if this process had died
        record.path.write_text(json.dumps(data))
        lines = reaper.reap()
    except BaseException:
        iscsi.detach(att)
        raise
    iscsi_initiator.stop_daemon(att.daemon)   # reaped by the reaper already: only collects the exit status
    assert any(att.iqn in line and "logged out" in line for line in lines), lines
    assert iscsi_initiator.sessions() == [] and lio.targets() == [] and lio.backstores() == []
    assert iscsi_initiator.daemon_pids() == [] and ownership.find(iscsi.KIND, att.iqn) is None


def test_an_export_that_fails_part_way_is_undone(iscsi_parts, backing):
    """LIO opens an exported device exclusively: exporting it a second time fails at the backstore's
    enable, and what the second export had made (directories, ledger record) is gone again."""
    first = iscsi.attach(backing)
    try:
        with pytest.raises(IolabError) as info:
            iscsi.attach(backing)
        targets, stores = lio.targets(), lio.backstores()
        records = [r.id for r in ownership.records(iscsi.KIND)]
    finally:
        iscsi.detach(first)
    assert "enable" in str(info.value)                   # names the configfs file that refused
    assert targets == [first.iqn] and stores == [f"{first.export.hba}/{first.export.name}"]
    assert records == [first.iqn]
