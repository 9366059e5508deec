"""The systemd cgroup backend (iolab.isolation.systemd_scope): systemd-run --scope, adopted as an iolab group.

This machine has no systemd as PID 1, so the real ``systemd-run`` cannot work
here. The tests put a STAND-IN ``systemd-run`` (and ``systemctl``) first on
PATH: a small script that does what systemd in legacy/hybrid (cgroup v1) mode
does for ``systemd-run --scope --unit=U --collect -p KEY=VALUE ... -- CMD``:
it makes the unit's cgroup in the real v1 memory and blkio hierarchies,
applies the properties the way systemd 252 does on v1 (MemoryLimit= and
MemoryMax= -> memory.limit_in_bytes; BlockIO*Bandwidth= and IO*BandwidthMax=
-> blkio.throttle.*_bps_device; no v1 IOPS or swap property), moves itself in
and execs CMD; a watcher removes the cgroup once it is empty (--collect).
What is checked is iolab's side: the argv it builds, the adoption, the
read-backs, the evidence and the clean-up.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from iolab.isolation import blockstat, cgroups, systemd_scope
from iolab.devices import loopdev
from iolab.isolation.cgroups import Throttle
from iolab.core.errors import IolabError
from iolab.isolation.sandbox import open_sandbox

from cli_helpers import live_processes
from kernel_fixtures import (LAYOUT, StandInNotice, fio_json, has_v1, layout_summary, machine_clean,  # noqa: F401
                             module_clean, needs_fio, needs_root, write_file)

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")

MiB = 1024**2
PID1 = Path("/proc/1/comm").read_text().strip() if Path("/proc/1/comm").exists() else "?"
STAND_IN = (f"STAND-IN systemd-run/systemctl (a test script): this machine has no systemd as PID 1 "
            f"(PID 1 is {PID1!r}; {layout_summary()})")
needs_v1 = pytest.mark.skipif(not (has_v1("memory") and has_v1("blkio")),
                              reason="the stand-in systemd-run emulates cgroup-v1 systemd: needs v1 memory and "
                                     f"blkio ({layout_summary()})")

FAKE_SYSTEMD_RUN = r'''
"""Stand-in for `systemd-run --scope` (and `systemctl stop`) as systemd does it on cgroup v1. Test only."""
import json, os, signal, stat, sys, time

MEM, BLK = os.environ["FAKE_SYSTEMD_MEMORY"], os.environ["FAKE_SYSTEMD_BLKIO"]
LOG = os.environ.get("FAKE_SYSTEMD_LOG")
IGNORE = set(filter(None, os.environ.get("FAKE_SYSTEMD_IGNORE", "").split(",")))


def log(**record):
    if LOG:
        with open(LOG, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def fail(message, code=1):
    print(message, file=sys.stderr)
    sys.exit(code)


def write(path, value):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def devnum(path):
    st = os.stat(path)
    if not stat.S_ISBLK(st.st_mode):
        fail(f"Failed to parse device path: {path} is not a block device")
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def procs(dirs):
    out = []
    for d in dirs:
        try:
            out += open(os.path.join(d, "cgroup.procs")).read().split()
        except FileNotFoundError:
            pass
    return out


def watch(dirs):
    """--collect: remove the unit's cgroup once it is empty (as PID 1 would); started once it is populated."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(os.path.isdir(d) for d in dirs):
        if not procs(dirs):
            for d in dirs:
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        time.sleep(0.02)


def own_cgroup(mount):
    """Our cgroup directory in the v1 hierarchy mounted at ``mount``."""
    controller = os.path.basename(mount)
    for line in open("/proc/self/cgroup"):
        _, names, path = line.rstrip("\n").split(":", 2)
        if controller in names.split(","):
            return os.path.join(mount, path.lstrip("/"))
    return mount


def systemctl(argv):
    log(tool="systemctl", argv=argv)
    if argv[:1] != ["stop"] or len(argv) != 2:
        fail("stand-in systemctl knows only: stop UNIT")
    unit = argv[1]
    dirs = [os.path.join(MEM, unit), os.path.join(BLK, unit)]
    if not any(os.path.isdir(d) for d in dirs):
        fail(f"Failed to stop {unit}: Unit {unit} not loaded.", 5)
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        for pid in procs(dirs):
            try:
                os.kill(int(pid), sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while procs(dirs) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not procs(dirs):
            break
    deadline = time.monotonic() + 5  # systemctl returns when the unit is stopped: its cgroup removed
    while any(os.path.isdir(d) for d in dirs) and time.monotonic() < deadline:
        time.sleep(0.02)


def main(argv):
    name = os.path.basename(sys.argv[0])
    if name == "systemctl":
        return systemctl(argv)
    if argv[:1] == ["--watch"]:
        return watch(argv[1:])
    log(tool="systemd-run", argv=[sys.argv[0]] + argv, pid=os.getpid())
    if os.environ.get("FAKE_SYSTEMD_FAIL"):
        fail("Failed to start transient scope unit: Access denied")
    scope = collect = False
    unit, props, cmd, i = None, [], None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            cmd = argv[i + 1:]
            break
        if a == "--scope":
            scope = True
        elif a == "--collect":
            collect = True
        elif a.startswith("--unit="):
            unit = a.split("=", 1)[1]
        elif a in ("-p", "--property"):
            i += 1
            props.append(argv[i])
        elif a.startswith("--property="):
            props.append(a.split("=", 1)[1])
        elif not a.startswith("-"):
            cmd = argv[i:]
            break
        else:
            fail(f"stand-in systemd-run: unrecognized option '{a}'")
        i += 1
    if not scope or not cmd or not unit:
        fail("stand-in systemd-run: needs --scope, --unit= and a command")
    unit = unit if unit.endswith(".scope") else unit + ".scope"
    mem, blk = os.path.join(MEM, unit), os.path.join(BLK, unit)
    files, realize = [], set()
    for prop in props:
        key, _, value = prop.partition("=")
        if key in IGNORE:          # a systemd that quietly does not apply a setting
            continue
        if key == "MemoryAccounting":
            realize.add(mem)
        elif key in ("MemoryLimit", "MemoryMax"):     # v1: MemoryMax= is applied as MemoryLimit=
            realize.add(mem)
            files.append((mem, "memory.limit_in_bytes", int(value)))
        elif key in ("MemorySwapMax", "MemoryHigh", "MemoryLow", "MemoryMin"):
            pass                                       # v2 only: not applied on v1
        elif key in ("BlockIOAccounting", "IOAccounting"):
            realize.add(blk)
        elif key in ("BlockIOReadBandwidth", "IOReadBandwidthMax", "BlockIOWriteBandwidth", "IOWriteBandwidthMax"):
            path, bps = value.rsplit(" ", 1)
            kind = "read" if "Read" in key else "write"
            realize.add(blk)
            files.append((blk, f"blkio.throttle.{kind}_bps_device", f"{devnum(path)} {int(bps)}"))
        elif key in ("IOReadIOPSMax", "IOWriteIOPSMax"):
            devnum(value.rsplit(" ", 1)[0])
            realize.add(blk)                           # v1: systemd has no IOPS translation
        else:
            fail(f"Unknown assignment: {prop}")
    if any(os.path.exists(d) for d in realize):
        fail(f"Failed to start transient scope unit: Unit {unit} was already loaded or has a fragment file.")
    for d in realize:
        os.mkdir(d)
    for d, fname, value in files:
        write(os.path.join(d, fname), value)
    origin = [own_cgroup(os.path.dirname(d)) for d in realize]
    for d in realize:
        write(os.path.join(d, "cgroup.procs"), os.getpid())
    if collect:
        if os.fork() == 0:                         # the watcher, detached, stands in for PID 1
            for d in origin:                       # it is no task of the scope
                write(os.path.join(d, "cgroup.procs"), os.getpid())
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.execv(sys.executable, [sys.executable, os.path.abspath(sys.argv[0]), "--watch", *realize])
            os._exit(0)
        os.wait()
    print(f"Running scope as unit: {unit}", file=sys.stderr)
    os.execvp(cmd[0], cmd)


sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def fake_systemd(tmp_path, monkeypatch):
    """The stand-in systemd-run and systemctl first on PATH; returns the log reader."""
    print(f"\n{STAND_IN}")
    warnings.warn(StandInNotice(STAND_IN))
    bindir = tmp_path / "fake-systemd-bin"
    bindir.mkdir()
    script = bindir / "systemd-run"
    script.write_text(f"#!{sys.executable}\n{FAKE_SYSTEMD_RUN}")
    script.chmod(0o755)
    (bindir / "systemctl").symlink_to(script)
    log = tmp_path / "fake-systemd.log"
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("FAKE_SYSTEMD_MEMORY", LAYOUT.v1["memory"])
    monkeypatch.setenv("FAKE_SYSTEMD_BLKIO", LAYOUT.v1["blkio"])
    monkeypatch.setenv("FAKE_SYSTEMD_LOG", str(log))
    monkeypatch.setenv(systemd_scope.ENV, "systemd")

    class Fake:
        path = str(script)
        systemctl = str(bindir / "systemctl")

        @staticmethod
        def calls(tool=None):
            if not log.exists():
                return []
            records = [json.loads(line) for line in log.read_text().splitlines()]
            return [r for r in records if tool is None or r["tool"] == tool]
    yield Fake
    # the watcher and the placeholder of every scope the test started are gone
    for record in Fake.calls("systemd-run"):
        unit = next((a.split("=", 1)[1] for a in record["argv"] if a.startswith("--unit=")), None)
        if unit:
            assert _gone(unit), f"processes of {unit} left: {live_processes(unit)}"


def _gone(unit: str, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while live_processes(unit) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not live_processes(unit)


@pytest.fixture
def loop_device(tmp_path):
    img = tmp_path / "throttled.img"
    with open(img, "wb") as fh:
        fh.truncate(8 * MiB)
    device = loopdev.attach(img)
    try:
        yield device, blockstat.device_for(device).devnum
    finally:
        loopdev.detach(device)


# --------------------------------------------------------------------------- pure logic

def test_choose_backend(monkeypatch):
    monkeypatch.setattr(cgroups, "systemd_managed", lambda: True)
    assert systemd_scope.choose_backend({}).backend == "systemd"
    assert systemd_scope.choose_backend({}).forced is False
    assert systemd_scope.choose_backend({systemd_scope.ENV: "cgroupfs"}).backend == "cgroupfs"
    monkeypatch.setattr(cgroups, "systemd_managed", lambda: False)
    assert systemd_scope.choose_backend({systemd_scope.ENV: "auto"}).backend == "cgroupfs"
    choice = systemd_scope.choose_backend({systemd_scope.ENV: "SYSTEMD"})
    assert choice.backend == "systemd" and choice.forced and "IOLAB_CGROUP_BACKEND=systemd" in choice.why
    with pytest.raises(IolabError, match="unknown cgroup backend 'cgroup'.*auto, systemd, cgroupfs"):
        systemd_scope.choose_backend({systemd_scope.ENV: "cgroup"})


def test_scope_properties_v1_and_v2():
    throttle = Throttle("7:3", read_bps=100_000_000, write_bps=50_000_000, read_iops=150, write_iops=140)
    node = {"7:3": "/dev/block/7:3"}.__getitem__
    assert systemd_scope.scope_properties("v2", "v2", memory_limit=64 * MiB, throttles=[throttle],
                                          device_path=node) == [
        "MemoryAccounting=yes", "MemoryMax=67108864", "MemorySwapMax=0",
        "IOAccounting=yes", "IOReadBandwidthMax=/dev/block/7:3 100000000",
        "IOWriteBandwidthMax=/dev/block/7:3 50000000", "IOReadIOPSMax=/dev/block/7:3 150",
        "IOWriteIOPSMax=/dev/block/7:3 140"]
    # v1: MemoryLimit=, BlockIO*Bandwidth=; swap and IOPS have no v1 property (iolab writes those files)
    assert systemd_scope.scope_properties("v1", "v1", memory_limit=64 * MiB, throttles=[throttle],
                                          device_path=node) == [
        "MemoryAccounting=yes", "MemoryLimit=67108864", "BlockIOAccounting=yes",
        "BlockIOReadBandwidth=/dev/block/7:3 100000000", "BlockIOWriteBandwidth=/dev/block/7:3 50000000"]
    assert systemd_scope.scope_properties(None, "v2", memory_limit=None, throttles=[Throttle("7:3", read_iops=9)],
                                          device_path=node) == ["IOAccounting=yes", "IOReadIOPSMax=/dev/block/7:3 9"]
    assert not any("MemoryHigh" in p for p in systemd_scope.scope_properties("v2", None, memory_limit=1))


def test_device_path_names_a_node_of_that_number():
    for entry in sorted(os.listdir("/sys/dev/block")):
        node = systemd_scope.device_path(entry)
        st = os.stat(node)
        assert f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" == entry
        break
    with pytest.raises(IolabError, match="no block device 4095:4095"):
        systemd_scope.device_path("4095:4095")


def test_leftovers_finds_scopes(tmp_path):
    root = tmp_path / "memory"
    (root / "system.slice" / f"iolab-{os.getpid()}-abcd1234.scope").mkdir(parents=True)
    (root / "system.slice" / "other.scope").mkdir()
    (root / f"iolab-{os.getpid()}-00ff").mkdir()
    layout = cgroups.Layout("v1", {"memory": str(root)}, None, frozenset())
    assert cgroups.leftovers(layout=layout, owner=os.getpid()) == sorted([
        str(root / "system.slice" / f"iolab-{os.getpid()}-abcd1234.scope"), str(root / f"iolab-{os.getpid()}-00ff")])


# --------------------------------------------------------------------------- with the stand-in systemd-run

def _unit_dirs(unit):
    return [Path(LAYOUT.v1["memory"]) / unit, Path(LAYOUT.v1["blkio"]) / unit]


@needs_root
@needs_fio
@needs_v1
def test_scope_limits_the_cache_and_goes_away(fake_systemd, loop_device, tmp_path):
    device, devnum = loop_device
    data = tmp_path / "four-times.dat"
    write_file(data, 256 * MiB)
    throttle = {"device": devnum, "read_bps": 500_000_000, "read_iops": 100_000}
    with open_sandbox("cgroup", mem_limit="64M", throttles=[throttle], buffer_hugepages=0) as box:
        group = box.group
        unit = group.name
        info = box.describe()
        placeholder = group.details["placeholder_pid"]
        # the exact command iolab built, as the stand-in received it
        assert unit.startswith(f"iolab-{os.getpid()}-") and unit.endswith(".scope")
        expected = [fake_systemd.path, "--scope", f"--unit={unit[:-len('.scope')]}", "--collect",
                    "-p", "MemoryAccounting=yes", "-p", f"MemoryLimit={64 * MiB}",
                    "-p", "BlockIOAccounting=yes", "-p", f"BlockIOReadBandwidth={device} 500000000",
                    "--", shutil.which("cat")]
        assert info["cgroup"]["systemd_run"] == expected
        assert [c["argv"] for c in fake_systemd.calls("systemd-run")] == [expected]
        print(f"systemd-run argv: {expected}")
        assert info["cgroup"]["backend"] == f"systemd-run scope {unit}"
        assert info["cgroup_backend"] == {"backend": "systemd", "why": "IOLAB_CGROUP_BACKEND=systemd",
                                          "forced": True, "fallback": None}
        assert box.io_group is group and group.adopted
        # adopted: the scope's own directories, read back
        mem, blk = group.path("memory"), group.path("io")
        assert [mem, blk] == _unit_dirs(unit)
        assert int((mem / "memory.limit_in_bytes").read_text()) == 64 * MiB
        assert group.details["read_back"]["memory"]["limit"] == 64 * MiB
        if (mem / "memory.memsw.limit_in_bytes").exists():
            assert int((mem / "memory.memsw.limit_in_bytes").read_text()) == 64 * MiB
        assert f"{devnum} 500000000" in (blk / "blkio.throttle.read_bps_device").read_text()
        assert f"{devnum} 100000" in (blk / "blkio.throttle.read_iops_device").read_text()
        assert any("IOPS limits" in n and "written by iolab" in n for n in info["cgroup"]["notes"])
        assert group.details["read_back"][devnum]["read_iops"] == 100_000
        assert group.contains(placeholder)
        assert str(mem) in cgroups.leftovers(owner=os.getpid())
        # the existing machinery, unchanged: popen into the group, drop caches, evidence
        record = box.prepare_test()
        assert record["verified"] and record["peak_reset"]
        job = fio_json(["--name=read", f"--filename={data}", "--rw=read", "--bs=1M", "--direct=0",
                        "--invalidate=0", "--size=256M"], popen=box.popen)
        evidence = box.test_evidence()
        print(f"fio read {job['read']['io_bytes'] >> 20} MiB in scope {unit}: {evidence}")
        assert job["read"]["io_bytes"] == 256 * MiB
        assert 0 < evidence["cg_cache_bytes"] <= 64 * MiB
        assert 32 * MiB < evidence["cg_peak_bytes"] <= 64 * MiB
        assert evidence["oom_killed"] is False and evidence["cg_oom_kills"] == 0
        assert evidence["drop_caches_verified"] is True and evidence["cg_limit_bytes"] == 64 * MiB
    assert group.removed and group.details["stopped_by"] == "placeholder exit"
    assert not Path(f"/proc/{placeholder}").exists()
    assert not any(d.exists() for d in _unit_dirs(unit))
    assert cgroups.leftovers(owner=os.getpid()) == []
    assert fake_systemd.calls("systemctl") == []


@needs_root
@needs_v1
def test_stray_task_and_ctrl_c_end_with_systemctl_stop(fake_systemd, monkeypatch):
    monkeypatch.setattr(systemd_scope, "STOP_GRACE", 0.5)
    marker = "29.876"  # a sleep nobody else runs
    with pytest.raises(KeyboardInterrupt):
        with open_sandbox("cgroup", mem_limit="64M") as box:
            unit, group = box.group.name, box.group
            # a grandchild that outlives its parent stays in the scope
            box.popen([sys.executable, "-c", f"import subprocess; subprocess.Popen(['sleep', '{marker}'], "
                                             "start_new_session=True)"]).wait()
            deadline = time.monotonic() + 5
            while not live_processes(f"sleep {marker}") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(group.pids()) == 2  # the placeholder and the stray sleep
            raise KeyboardInterrupt
    assert group.details["stopped_by"] == "systemctl stop"
    assert [c["argv"] for c in fake_systemd.calls("systemctl")] == [["stop", unit]]
    assert not any(d.exists() for d in _unit_dirs(unit))
    assert _gone(f"sleep {marker}")
    assert cgroups.leftovers(owner=os.getpid()) == []


@needs_root
@needs_v1
def test_failing_systemd_run_is_an_error_or_a_recorded_fallback(fake_systemd, monkeypatch, caplog):
    monkeypatch.setenv("FAKE_SYSTEMD_FAIL", "1")
    # asked for systemd by name: a clear error, never silently something else
    with pytest.raises(IolabError, match=r"systemd-run exited with 1: Failed to start transient scope unit: "
                                         r"Access denied") as err:
        with open_sandbox("cgroup", mem_limit="64M"):
            pass
    print(f"forced systemd, systemd-run fails: {err.value}")
    assert "never downgrades" in str(err.value)
    with open_sandbox("cgroup", mem_limit="64M", direct_ok=True) as box:
        assert box.mode == "direct" and "systemd-run exited with 1" in box.fallback
        assert box.describe()["fallback"] == box.fallback
    # auto on a systemd machine: falls back to cgroupfs, with a warning and the reason recorded
    monkeypatch.setenv(systemd_scope.ENV, "auto")
    monkeypatch.setattr(cgroups, "systemd_managed", lambda: True)
    with open_sandbox("cgroup", mem_limit="64M") as box:
        info = box.describe()
        assert box.mode == "cgroup" and info["cgroup"]["backend"] == "cgroupfs"
        assert info["cgroup_backend"]["backend"] == "cgroupfs" and info["cgroup_backend"]["forced"] is False
        assert "systemd-run exited with 1: Failed to start transient scope unit" in info["cgroup_backend"]["fallback"]
        assert int((box.group.path("memory") / "memory.limit_in_bytes").read_text()) == 64 * MiB
    assert "writing cgroupfs directly" in caplog.text
    assert len(fake_systemd.calls("systemd-run")) == 3
    assert cgroups.leftovers(owner=os.getpid()) == []


@needs_root
@needs_v1
def test_a_limit_systemd_did_not_apply_is_caught(fake_systemd, monkeypatch):
    monkeypatch.setenv("FAKE_SYSTEMD_IGNORE", "MemoryLimit")
    with pytest.raises(IolabError, match=r"asked for a memory limit of 67108864 but .*memory.limit_in_bytes "
                                         r"shows no limit: the limit is not in force"):
        with open_sandbox("cgroup", mem_limit="64M"):
            pass
    unit = next(a.split("=", 1)[1] for a in fake_systemd.calls("systemd-run")[0]["argv"] if a.startswith("--unit="))
    assert not any(d.exists() for d in _unit_dirs(unit + ".scope"))
    assert cgroups.leftovers(owner=os.getpid()) == []


@needs_root
@needs_v1
def test_cgroupfs_backend_by_name_does_not_call_systemd_run(fake_systemd, monkeypatch):
    monkeypatch.setenv(systemd_scope.ENV, "cgroupfs")
    monkeypatch.setattr(cgroups, "systemd_managed", lambda: True)
    with open_sandbox("cgroup", mem_limit="64M") as box:
        info = box.describe()
        assert info["cgroup"]["backend"] == "cgroupfs" and "systemd_run" not in info["cgroup"]
        assert info["cgroup_backend"]["why"] == "IOLAB_CGROUP_BACKEND=cgroupfs"
    assert fake_systemd.calls() == []


@needs_root
@needs_v1
def test_throttles_without_a_memory_limit_get_an_io_only_scope(fake_systemd, loop_device):
    device, devnum = loop_device
    with open_sandbox("direct", buffered=False, throttles=[{"device": devnum, "write_bps": 7_000_000}],
                      buffer_hugepages=0) as box:
        group = box.io_group
        assert box.group is None and group.adopted and list(group.dirs) == ["io"]
        argv = group.describe()["systemd_run"]
        assert argv[argv.index("--collect") + 1:] == ["-p", "BlockIOAccounting=yes",
                                                      "-p", f"BlockIOWriteBandwidth={device} 7000000",
                                                      "--", shutil.which("cat")]
        assert f"{devnum} 7000000" in (group.path("io") / "blkio.throttle.write_bps_device").read_text()
        out = box.popen(["cat", "/proc/self/cgroup"], stdout=subprocess.PIPE, text=True).communicate()[0]
        assert any(line.split(":")[1] == "blkio" and line.endswith("/" + group.name) for line in out.splitlines())
        unit = group.name
    assert not any(d.exists() for d in _unit_dirs(unit))


@needs_root
@needs_v1
def test_remove_stale_stops_a_scope_whose_owner_is_gone(fake_systemd, monkeypatch):
    gone = subprocess.Popen(["true"])
    gone.wait()
    unit = f"iolab-{gone.pid}-5ca1e"
    orphan = subprocess.Popen([fake_systemd.path, "--scope", f"--unit={unit}", "--collect",
                               "-p", "MemoryAccounting=yes", "--", "sleep", "60"], start_new_session=True)
    try:
        mem = Path(LAYOUT.v1["memory"]) / f"{unit}.scope"
        deadline = time.monotonic() + 5
        while not (mem.exists() and str(orphan.pid) in (mem / "cgroup.procs").read_text().split()):
            assert time.monotonic() < deadline, "the stand-in did not start the scope"
            time.sleep(0.02)
        assert str(mem) in cgroups.leftovers()
        monkeypatch.setattr(cgroups, "systemd_managed", lambda: True)
        # only this scope: other stale groups on the machine are not this test's business
        monkeypatch.setattr(cgroups, "leftovers", lambda **kw: [str(mem)])
        assert cgroups.remove_stale() == [str(mem)]
        assert [c["argv"] for c in fake_systemd.calls("systemctl")] == [["stop", f"{unit}.scope"]]
        assert orphan.wait(5) == -15  # systemctl stop ended the scope's task
        deadline = time.monotonic() + 5
        while mem.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not mem.exists()
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


SCOPE_HOLDER = """
import subprocess, sys, time
from iolab.isolation import systemd_scope
scope = systemd_scope.Scope(["memory"], memory_limit=64 * 1024 * 1024)
group = scope.start()
task = subprocess.Popen(["sleep", "120"], start_new_session=True)
group.add_pid(task.pid)
print(scope.unit, task.pid, flush=True)
time.sleep(600)
"""


@needs_root
@needs_v1
def test_reaper_stops_the_scope_of_a_killed_iolab(fake_systemd, monkeypatch):
    """iolab killed with its scope still holding a task: the ledger names the scope and its dead
    owner, and the reaper ends it with systemctl stop (the stand-in), task and cgroup gone."""
    from iolab.core import ownership
    from iolab.engine import reaper
    holder = subprocess.Popen([sys.executable, "-c", SCOPE_HOLDER], stdout=subprocess.PIPE, text=True)
    task = None
    try:
        unit, task = holder.stdout.readline().split()
        task = int(task)
        record = ownership.find("scope", unit)
        assert record is not None and record.owner.pid == holder.pid and record.details["dirs"]
        dirs = record.details["dirs"]
        assert all(Path(d).is_dir() for d in dirs)
        monkeypatch.setattr(cgroups, "systemd_managed", lambda: True)
        with ownership.locked():  # other engineers' reapers must not take it first
            holder.kill()
            holder.wait()
            lines = [x for x in reaper.reap_unlocked() if x.startswith(f"PID {holder.pid}:")]
        assert lines == [f"PID {holder.pid}: stopped scope {unit}"]
        assert [c["argv"] for c in fake_systemd.calls("systemctl")] == [["stop", unit]]
        assert not any(Path(d).exists() for d in dirs)
        assert ownership.find("scope", unit) is None
        deadline = time.monotonic() + 5
        while ownership.pid_alive(task) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not ownership.pid_alive(task)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if task and ownership.pid_alive(task):
            os.kill(task, 9)
        reaper.reap()
