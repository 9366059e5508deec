"""iolab.devices.plan: validation, exact dry-run commands, and real setup/teardown cycles."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from device_fixtures import (  # noqa: F401 - fixtures
    IOLAB, files_under, iolab, loops_under, make_loop, mounts_under, requires, requires_root, scratch, sh,
    write_plan)
from iolab.core import commands
from iolab.devices import blockdev, plan as setup_plan, provenance, safety
from iolab.core.errors import IolabError
from cli_helpers import ROOT

TOOLS = ("losetup", "fallocate", "sgdisk", "partx", "mkfs.ext4", "mkfs.xfs", "wipefs", "mount")


def real_devices(test):
    """Root and the tools: the tests that make real loop devices, partitions, file systems."""
    return requires_root(requires(*TOOLS)(test))


def two_loops(root: Path, *, ext4_options="-E lazy_itable_init=0,lazy_journal_init=0",
              xfs_options=None) -> dict:
    """The plan of the full cycle: disk1 (GPT, ext4 on p1), disk2 (xfs on the whole device)."""
    xfs = {"device": "disk2", "type": "xfs", "label": "iolab-xfs",
           "mount": str(root / "mnt" / "xfs"), "mount_options": ["noatime"]}
    if xfs_options is not None:
        xfs["options"] = xfs_options
    return {
        "name": "two-loops",
        "loop_devices": [
            {"name": "disk1", "file": "images/disk1.img", "size": "128M"},
            {"name": "disk2", "file": "images/disk2.img", "size": "320M"},
        ],
        "partitions": [{"device": "disk1", "parts": [
            {"name": "disk1p1", "size": "100M", "label": "bench"}, {"name": "disk1p2"}]}],
        "filesystems": [
            {"device": "disk1p1", "type": "ext4", "options": ext4_options, "label": "iolab-ext4",
             "mount": str(root / "mnt" / "ext4"), "mount_options": "noatime"},
            xfs,
        ],
    }


def nothing_left(root: Path, plan_path: Path) -> None:
    assert loops_under(root) == {}, "loop devices left attached"
    assert mounts_under(root) == [], "mounts left"
    assert not setup_plan.state_path(plan_path).exists(), "state file left"
    assert not (root / "images").exists(), "loop files or their directory left"
    assert not (root / "mnt").exists(), "mount points left"


# ------------------------------------------------------------------ validation

def error_of(tmp_path: Path, data, name="plan") -> str:
    path = tmp_path / f"{name}.yaml"
    import yaml
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(IolabError) as info:
        setup_plan.load_plan(path)
    return str(info.value)


@pytest.mark.parametrize("mutate, field, words", [
    (lambda p: p.update(extra=1), "extra", "unknown key"),
    (lambda p: p["loop_devices"][0].update(sise="1G"), "loop_devices[0].sise", "unknown key"),
    (lambda p: p["loop_devices"][0].update(size="12 parsecs"), "loop_devices[0].size", "not a size"),
    (lambda p: p["loop_devices"][0].pop("file"), "loop_devices[0].file", "missing"),
    (lambda p: p["loop_devices"][1].update(name="disk1"), "loop_devices[1].name", "already used"),
    (lambda p: p["loop_devices"][0].update(sector_size=520), "loop_devices[0].sector_size", "must be one of"),
    (lambda p: p["partitions"][0]["parts"][0].pop("size"), "partitions[0].parts[0].size", "only the last"),
    (lambda p: p["partitions"][0]["parts"][0].update(size="100.5M"), "partitions[0].parts[0].size", "1 MiB"),
    (lambda p: p["partitions"][0]["parts"][0].update(size="1G"), "partitions[0].parts", "need"),
    (lambda p: p["partitions"][0].update(device="disk9"), "partitions[0].device", "unknown device name"),
    (lambda p: p["filesystems"][0].update(type="zfs"), "filesystems[0].type", "must be one of ext4, xfs"),
    (lambda p: p["filesystems"][1].update(device="disk1"), "filesystems[1].device", "already used"),
    (lambda p: p["filesystems"][1].update(mount="relative/dir"), "filesystems[1].mount", "absolute"),
    (lambda p: p["filesystems"][1].pop("mount"), "filesystems[1].mount_options", "without a mount point"),
    (lambda p: p["filesystems"][0].update(options={"a": 1}), "filesystems[0].options", "string or a list"),
    (lambda p: p.update(raid=[{"name": "r", "level": 5, "members": ["disk1", "disk2"]}]), "raid[0].level",
     "RAID level 0 or 1 is supported, got 5"),
    (lambda p: p.update(raid=[{"name": "r", "level": 1, "chunk": "64K", "members": ["disk1", "disk2"]}]),
     "raid[0].chunk", "a RAID1 (mirror) has no chunk size"),
    (lambda p: p.update(raid=[{"name": "r", "level": "raid1", "members": ["disk1"]}]),
     "raid[0].members", "a RAID1 needs at least two members"),
    (lambda p: p.update(raid=[{"name": "r", "level": 0, "chunk": "3K", "members": ["disk1", "disk2"]}]),
     "raid[0].chunk", "power of two"),
])
def test_validation_names_file_and_field(tmp_path, mutate, field, words):
    plan = two_loops(tmp_path)
    mutate(plan)
    message = error_of(tmp_path, plan)
    assert message.startswith(f"{tmp_path / 'plan.yaml'}: {field}:"), message
    assert words in message


@pytest.mark.parametrize("mutate, field, words", [
    # mkfs.xfs: "Filesystem must be larger than 300MB"
    (lambda p: p["loop_devices"][1].update(size="256M"), "filesystems[1].device",
     "mkfs.xfs needs at least 300 MiB: make loop_devices[1].size larger"),
    (lambda p: p["filesystems"][1].update(options="-d su=64k,sw=2"), "filesystems[1].device",
     "mkfs.xfs needs at least 513 MiB"),
    (lambda p: p["loop_devices"][0].update(size="100000T"), "loop_devices[0].size", "not a plausible size"),
    (lambda p: p["partitions"][0]["parts"][0].update(size="100000T"), "partitions[0].parts[0].size",
     "not a plausible size"),
    # the example raid0-loops before its fix: 2 x 256 MiB in RAID0 under xfs ("Log size must be at least 64MB")
    (lambda p: (p["loop_devices"][1].update(size="256M"),
                p["loop_devices"].append({"name": "disk3", "file": "images/disk3.img", "size": "256M"}),
                p.update(raid=[{"name": "r0", "level": 0, "members": ["disk2", "disk3"]}]),
                p["filesystems"][1].update(device="r0")), "filesystems[1].device", "r0 is 510 MiB"),
])
def test_sizes_mkfs_rejects_or_storage_cannot_hold(tmp_path, mutate, field, words):
    plan = two_loops(tmp_path)
    mutate(plan)
    message = error_of(tmp_path, plan)
    assert message.startswith(f"{tmp_path / 'plan.yaml'}: {field}:"), message
    assert words in message, message


def test_loop_file_larger_than_its_file_system_refused_at_dry_run(tmp_path, iolab):
    plan = two_loops(tmp_path)
    free_fs = os.statvfs(tmp_path)
    plan["loop_devices"][0]["size"] = str(free_fs.f_blocks * free_fs.f_frsize + 1024**3)
    import yaml
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    result = iolab("setup", path, "--dry-run")
    assert result.returncode == 2
    assert "loop_devices[0].size" in result.stderr and "more than the file system holding" in result.stderr


def test_invalid_yaml_and_empty_plans(tmp_path):
    assert "not valid YAML at line 2, column 9" in error_of(tmp_path, "name: x\nsize: 1G: 2\n")
    assert "the plan is empty" in error_of(tmp_path, "")
    assert "the plan does nothing" in error_of(tmp_path, {"name": "x"})
    assert "must be a mapping" in error_of(tmp_path, "- a\n- b\n")
    with pytest.raises(IolabError, match="no such plan file"):
        setup_plan.load_plan(tmp_path / "missing.yaml")


def test_example_plans_are_valid():
    for path in sorted(ROOT.joinpath("examples", "plans").glob("*.yaml")):
        plan = setup_plan.load_plan(path)
        assert setup_plan.plan_commands(plan)


# ------------------------------------------------------------------ dry run

def test_plan_commands_are_exact(tmp_path):
    plan = setup_plan.load_plan(write_plan(tmp_path, two_loops(tmp_path)))
    images, mnt = tmp_path / "images", tmp_path / "mnt"
    assert setup_plan.plan_commands(plan) == [
        ["mkdir", "-p", f"{images}"],
        ["fallocate", "--length", str(128 * 1024**2), f"{images}/disk1.img"],
        ["losetup", "--find", "--show", "--partscan", "--direct-io=on", f"{images}/disk1.img"],
        ["fallocate", "--length", str(320 * 1024**2), f"{images}/disk2.img"],
        ["losetup", "--find", "--show", "--direct-io=on", f"{images}/disk2.img"],
        ["sgdisk", "--zap-all", "<disk1>"],
        ["sgdisk", "--set-alignment=2048", "--new=1:1M:+100M", "--change-name=1:bench", "--new=2:101M:0",
         "<disk1>"],
        ["partx", "--update", "<disk1>"],
        ["mkfs.ext4", "-F", "-L", "iolab-ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0", "<disk1p1>"],
        ["mkdir", "-p", f"{mnt}/ext4"],
        ["mount", "-t", "ext4", "-o", "noatime", "<disk1p1>", f"{mnt}/ext4"],
        ["mkfs.xfs", "-f", "-L", "iolab-xfs", "<disk2>"],
        ["mkdir", "-p", f"{mnt}/xfs"],
        ["mount", "-t", "xfs", "-o", "noatime", "<disk2>", f"{mnt}/xfs"],
    ]


def test_raid0_plan_commands_are_exact(tmp_path):
    data = {
        "loop_devices": [{"name": "m1", "file": "m1.img", "size": "64M", "sector_size": 4096},
                         {"name": "m2", "file": "m2.img", "size": "64M"}],
        "raid": [{"name": "iolab-r0", "level": "raid0", "chunk": "64K", "members": ["m1", "m2"]}],
        "partitions": [{"device": "iolab-r0", "parts": [{"name": "r0p1"}]}],
        "filesystems": [{"device": "r0p1", "type": "xfs", "options": ["-d", "su=64k,sw=2"]}],
    }
    plan = setup_plan.load_plan(write_plan(tmp_path, data))
    commands_ = setup_plan.plan_commands(plan)
    assert commands_[:4] == [
        ["fallocate", "--length", str(64 * 1024**2), f"{tmp_path}/m1.img"],
        ["losetup", "--find", "--show", "--sector-size", "4096", "--direct-io=on", f"{tmp_path}/m1.img"],
        ["fallocate", "--length", str(64 * 1024**2), f"{tmp_path}/m2.img"],
        ["losetup", "--find", "--show", "--direct-io=on", f"{tmp_path}/m2.img"],
    ]
    assert commands_[4:] == [
        ["mdadm", "--create", "/dev/md/iolab-r0", "--run", "--level=0", "--chunk=64K", "--metadata=1.2",
         "--raid-devices=2", "<m1>", "<m2>"],
        ["sgdisk", "--zap-all", "<iolab-r0>"],
        # the array's logical block size is its largest member's (4096): 1 MiB = 256 sectors
        ["sgdisk", "--set-alignment=256", "--new=1:1M:0", "<iolab-r0>"],
        ["partx", "--update", "<iolab-r0>"],
        ["mkfs.xfs", "-f", "-d", "su=64k,sw=2", "<r0p1>"],
    ]


def test_raid1_plan_commands_are_exact(tmp_path):
    """A mirror: no chunk, created --assume-clean (no resync under a benchmark); xfs's plain minimum."""
    data = {
        "loop_devices": [{"name": "m1", "file": "m1.img", "size": "320M"},
                         {"name": "m2", "file": "m2.img", "size": "320M"}],
        "raid": [{"name": "iolab-r1", "level": 1, "members": ["m1", "m2"]}],
        "filesystems": [{"device": "iolab-r1", "type": "xfs"}],
    }
    plan = setup_plan.load_plan(write_plan(tmp_path, data))
    assert plan.raids[0].level == 1
    assert setup_plan.plan_commands(plan)[4:] == [
        ["mdadm", "--create", "/dev/md/iolab-r1", "--run", "--level=1", "--assume-clean", "--metadata=1.2",
         "--raid-devices=2", "<m1>", "<m2>"],
        ["mkfs.xfs", "-f", "<iolab-r1>"],
    ]


@pytest.mark.stock_kernel  # md: the lab VM's kernel has it
@pytest.mark.skipif(not Path("/proc/mdstat").exists(),
                    reason="no md driver in this kernel (/proc/mdstat missing, md_mod not loadable): "
                           "RAID0 is checked by its dry-run commands only")
@requires("mdadm")
@real_devices
def test_raid0_setup_and_teardown(scratch):
    # 2 x (260 - 1 MiB of md metadata): xfs on a striped array needs more than 512 MiB (plan.limits)
    data = {
        "loop_devices": [{"name": "m1", "file": "images/m1.img", "size": "260M"},
                         {"name": "m2", "file": "images/m2.img", "size": "260M"}],
        "raid": [{"name": f"iolab-t{os.getpid()}", "level": 0, "chunk": "64K", "members": ["m1", "m2"]}],
        "filesystems": [{"device": f"iolab-t{os.getpid()}", "type": "xfs",
                         "mount": str(scratch / "mnt" / "r0")}],
    }
    path = write_plan(scratch, data)
    result = setup_plan.setup(path)
    md = Path(result["devices"][f"iolab-t{os.getpid()}"]).name
    assert Path(f"/sys/block/{md}/md/level").read_text().strip() == "raid0"
    assert int(Path(f"/sys/block/{md}/md/chunk_size").read_text()) == 64 * 1024
    info = provenance.device_provenance(scratch / "mnt" / "r0")
    assert info["raid"]["level"] == "raid0" and len(info["raid"]["members"]) == 2
    # the CLI's main in this process: a new iolab process costs ~20 s of imports in the lab VM
    from iolab import cli
    assert cli.main(["teardown", str(path)]) == 0
    nothing_left(scratch, path)
    assert not Path(f"/sys/block/{md}/md").exists()


@real_devices
def test_dry_run_changes_nothing(scratch):
    path = write_plan(scratch, two_loops(scratch))
    before = (loops_under(scratch), mounts_under(scratch), files_under(scratch), sh("losetup", "-a").stdout)
    proc = iolab("setup", path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if not l.startswith("#")]
    assert lines[0] == f"mkdir -p {scratch}/images"
    assert f"mount -t xfs -o noatime '<disk2>' {scratch}/mnt/xfs" in lines
    assert "# preflight checks passed" in proc.stdout
    after = (loops_under(scratch), mounts_under(scratch), files_under(scratch), sh("losetup", "-a").stdout)
    assert after[:3] == before[:3]
    assert not setup_plan.state_path(path).exists()


# --------------------------------------------------------------- real cycles

def run_fio(directory: Path) -> dict:
    proc = sh("fio", "--name=check", f"--filename={directory}/fio.dat", "--size=16M", "--rw=randrw",
              "--bs=4k", "--direct=1", "--ioengine=psync", "--runtime=1", "--time_based",
              "--output-format=json")
    job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    assert job["error"] == 0
    return job


@requires("fio")
@real_devices
def test_full_cycle_setup_fio_teardown_from_a_new_process(scratch):
    path = write_plan(scratch, two_loops(scratch))
    seen = []
    result = setup_plan.setup(path, progress=seen.append)
    assert seen and seen[0].startswith("mkdir -p")
    disk1, disk1p1, disk2 = (result["devices"][n] for n in ("disk1", "disk1p1", "disk2"))
    ext4, xfs = scratch / "mnt" / "ext4", scratch / "mnt" / "xfs"
    assert result["mounts"] == {"disk1p1": str(ext4), "disk2": str(xfs)}
    # what was made is what the plan said
    assert set(loops_under(scratch)) == {disk1, disk2}
    assert all(provenance.device_provenance(d)["loop"]["direct_io"] for d in (disk1, disk2))
    p1 = provenance.device_provenance(ext4)
    assert p1["device"] == disk1p1 and p1["filesystem"]["fstype"] == "ext4" and p1["partition"] == 1
    assert "noatime" in p1["filesystem"]["options"]
    name = Path(disk1p1).name
    assert int(Path(f"/sys/class/block/{name}/start").read_text()) * 512 % (1024**2) == 0
    assert blockdev.size_bytes(name) == 100 * 1024**2
    assert provenance.device_provenance(xfs)["filesystem"]["fstype"] == "xfs"
    # the state file says it all, for another process
    state = json.loads(setup_plan.state_path(path).read_text())
    assert state["status"] == "ready" and all(s["status"] == "done" for s in state["steps"])
    for directory in (ext4, xfs):
        job = run_fio(directory)
        assert job["read"]["io_bytes"] > 0 and job["write"]["io_bytes"] > 0
    # every device is now refused for writing
    for device in (disk1, disk1p1, disk2):
        with pytest.raises(IolabError, match="mounted at"):
            safety.check_writable(device, confirm=device)
    proc = iolab("teardown", path)
    assert proc.returncode == 0, proc.stderr
    assert f"+ umount {xfs}" in proc.stderr and f"+ losetup --detach {disk1}" in proc.stderr
    nothing_left(scratch, path)
    # tearing down again is a no-op
    assert iolab("teardown", path).returncode == 0


@real_devices
def test_failure_halfway_tears_down(scratch):
    plan = two_loops(scratch, xfs_options="-b size=12345")   # mkfs.xfs rejects it: after ext4 is mounted
    path = write_plan(scratch, plan)
    with pytest.raises(IolabError) as info:
        setup_plan.setup(path)
    assert "mkfs.xfs" in str(info.value) and "Invalid value 12345 for -b size option" in str(info.value)
    nothing_left(scratch, path)


@real_devices
def test_ctrl_c_during_setup_tears_down(scratch, monkeypatch):
    path = write_plan(scratch, two_loops(scratch))
    real_run = commands.run

    def interrupted(argv, **kwargs):
        if argv[0] == "mkfs.xfs":   # the ext4 side is complete and mounted by now
            assert mounts_under(scratch) == [str(scratch / "mnt" / "ext4")]
            raise KeyboardInterrupt
        return real_run(argv, **kwargs)

    monkeypatch.setattr(commands, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        setup_plan.setup(path)
    nothing_left(scratch, path)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@real_devices
def test_signal_to_the_cli_tears_down(scratch, signum):
    """A real Ctrl-C (SIGINT) or SIGTERM to a real `iolab setup`, once the first loop device is attached."""
    path = write_plan(scratch, two_loops(scratch))
    state = setup_plan.state_path(path)
    proc = subprocess.Popen([*IOLAB, "setup", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            steps = json.loads(state.read_text())["steps"]
        except (OSError, ValueError, KeyError):
            steps = []
        if any(s["kind"] == "loop" and s["status"] == "done" for s in steps):
            proc.send_signal(signum)
            break
        time.sleep(0.005)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:  # finished before the signal could land: still clean up, but say so
        assert iolab("teardown", path).returncode == 0
        pytest.skip("setup finished before the signal arrived")
    assert proc.returncode == 130, err
    nothing_left(scratch, path)


@real_devices
def test_existing_device_needs_confirmation_for_its_signature(scratch, make_loop):
    dev, other = make_loop("64M", name="existing"), make_loop("64M", name="other")
    sh("mkfs.ext4", "-q", "-F", dev)
    data = {"devices": [{"name": "target", "path": dev}],
            "filesystems": [{"device": "target", "type": "ext4", "label": "reformatted"}]}
    path = write_plan(scratch, data)
    for confirm in (None, other):
        with pytest.raises(IolabError, match="file-system signature"):
            setup_plan.setup(path, confirm=confirm)
        assert not setup_plan.state_path(path).exists()
    proc = iolab("setup", path, "--dry-run")
    assert proc.returncode == 1 and "setup would refuse to start" in proc.stdout and dev in proc.stdout
    proc = iolab("setup", path, "--confirm", other)
    assert proc.returncode == 2 and "refusing to write" in proc.stderr
    proc = iolab("setup", path, "--confirm", dev)
    assert proc.returncode == 0, proc.stderr
    assert safety.signatures(dev)[0]["label"] == "reformatted"
    assert iolab("teardown", path).returncode == 0
    assert not setup_plan.state_path(path).exists()
    assert dev in loops_under(scratch)   # an existing device is left attached: it is not ours


@real_devices
def test_mounted_existing_device_refused_even_when_confirmed(scratch, make_loop):
    dev = make_loop("64M")
    sh("mkfs.ext4", "-q", "-F", dev)
    (scratch / "busy").mkdir()
    sh("mount", dev, scratch / "busy")
    path = write_plan(scratch, {"devices": [{"name": "d", "path": dev}],
                                "filesystems": [{"device": "d", "type": "xfs"}]})
    with pytest.raises(IolabError, match="mounted at"):
        setup_plan.setup(path, confirm=dev)
    assert not setup_plan.state_path(path).exists()


@real_devices
def test_existing_loop_file_is_never_reused(scratch):
    path = write_plan(scratch, two_loops(scratch))
    (scratch / "images").mkdir()
    (scratch / "images" / "disk2.img").write_text("precious")
    with pytest.raises(IolabError, match="exists; iolab only uses loop files it creates"):
        setup_plan.setup(path)
    assert (scratch / "images" / "disk2.img").read_text() == "precious"
    assert loops_under(scratch) == {} and not setup_plan.state_path(path).exists()


@real_devices
def test_second_setup_refused_and_stale_state_never_touches_others(scratch, make_loop):
    data = {"loop_devices": [{"name": "a", "file": "images/a.img", "size": "32M"}]}
    path = write_plan(scratch, data)
    result = setup_plan.setup(path)
    mine = result["devices"]["a"]
    with pytest.raises(IolabError, match="already set up"):
        setup_plan.setup(path)
    # simulate a stale state: the recorded loop device is now someone else's
    stranger = make_loop("16M", name="stranger")
    sh("losetup", "--detach", mine)
    state_file = setup_plan.state_path(path)
    state = json.loads(state_file.read_text())
    for step in state["steps"]:
        if step["kind"] == "loop":
            step["device"] = stranger
    state_file.write_text(json.dumps(state))
    assert setup_plan.teardown(path) == [["rm", "-f", str(scratch / "images" / "a.img")],
                                         ["rmdir", str(scratch / "images")]]
    assert stranger in loops_under(scratch)        # left alone
    assert not state_file.exists()


@real_devices
def test_busy_mount_keeps_state_and_a_second_teardown_finishes(scratch):
    data = {"loop_devices": [{"name": "a", "file": "images/a.img", "size": "64M"}],
            "filesystems": [{"device": "a", "type": "ext4", "mount": str(scratch / "mnt" / "a")}]}
    path = write_plan(scratch, data)
    setup_plan.setup(path)
    holder = subprocess.Popen(["sleep", "60"], cwd=scratch / "mnt" / "a")
    try:
        with pytest.raises(IolabError, match="teardown incomplete"):
            setup_plan.teardown(path)
        state = json.loads(setup_plan.state_path(path).read_text())
        assert state["status"] == "teardown failed"
        assert {s["kind"] for s in state["steps"]} >= {"mount", "loop", "file"}
        assert mounts_under(scratch) == [str(scratch / "mnt" / "a")]   # nothing pulled from under it
    finally:
        holder.kill()
        holder.wait()
    assert setup_plan.teardown(path)
    nothing_left(scratch, path)


def test_teardown_without_setup_is_a_no_op(tmp_path):
    path = write_plan(tmp_path, two_loops(tmp_path))
    assert setup_plan.teardown(path) == []
    assert setup_plan.teardown_commands(path) == []
    assert setup_plan.status(path) is None


def test_teardown_refuses_while_another_process_is_setting_up(tmp_path):
    path = write_plan(tmp_path, two_loops(tmp_path))
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = {"status": "setting up", "pid": runner.pid, "devices": {}, "steps": []}
        setup_plan.state_path(path).write_text(json.dumps(state))
        with pytest.raises(IolabError, match=f"still running \\(pid {runner.pid}\\)"):
            setup_plan.teardown(path)
        # the same pid recorded before a reboot (another boot id) is somebody else's
        setup_plan.state_path(path).write_text(json.dumps({**state, "boot_id": "an-earlier-boot"}))
        assert setup_plan.teardown(path) == []
        setup_plan.state_path(path).write_text(json.dumps(state))
    finally:
        runner.kill()
        runner.wait()
    assert setup_plan.teardown(path) == []          # the process is gone: a stale state, cleaned
    assert not setup_plan.state_path(path).exists()
