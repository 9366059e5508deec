"""iolab.isolation.cgroups: detection, fake v1/v2 trees (file contents), and the real hierarchy of this machine."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.isolation import cgroups
from iolab.isolation.cgroups import Group, Throttle
from iolab.core.errors import IolabError

from kernel_fixtures import (FIO, IS_ROOT, LAYOUT, fio_json, has_v1, has_v2, layout_summary,  # noqa: F401
                             machine_clean, module_clean, needs_fio, needs_root, write_file)

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")

MiB = 1024**2


def test_detect_this_machine():
    layout = cgroups.detect()
    print(f"\nthis machine: {layout_summary()}; systemd manages cgroups: {cgroups.systemd_managed()}")
    assert layout.version in ("v1", "v2", "hybrid", "none")
    if layout.v1 and layout.v2:
        assert layout.version == "hybrid"
    for controller in ("memory", "io"):
        found = layout.locate(controller)
        print(f"  {controller}: {found}")


def test_detect_from_mountinfo(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
        "31 25 0:27 / /sys/fs/cgroup/blkio rw,relatime shared:10 - cgroup cgroup rw,blkio\n"
        "32 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw\n"
        "33 25 0:29 / /tmp rw - tmpfs tmpfs rw\n")
    layout = cgroups.detect(mountinfo)
    assert layout.version == "hybrid"
    assert layout.v1 == {"memory": "/sys/fs/cgroup/memory", "blkio": "/sys/fs/cgroup/blkio"}
    assert layout.locate("memory") == ("v1", "/sys/fs/cgroup/memory")
    assert layout.locate("blkio") == ("v1", "/sys/fs/cgroup/blkio")
    only_v2 = tmp_path / "v2"
    only_v2.write_text("32 25 0:28 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n")
    assert cgroups.detect(only_v2).version == "v2"


def test_throttle_validation():
    with pytest.raises(IolabError, match="MAJ:MIN"):
        Throttle("sda")
    with pytest.raises(IolabError, match="read_bps"):
        Throttle("8:0", read_bps=0)
    assert Throttle("8:0", read_bps=10, write_iops=5).io_max_line() == "8:0 rbps=10 wbps=max riops=max wiops=5"
    assert Throttle.coerce({"device": "7:1", "read_iops": 150}).read_iops == 150


def _fake_v2(tmp_path: Path) -> Path:
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def test_v2_fake_tree_writes_the_right_files(tmp_path):
    root = _fake_v2(tmp_path)
    group = Group.create(["memory", "io"], root=root, version="v2")
    d = root / group.name
    assert group.name.startswith(f"iolab-{os.getpid()}-")
    assert group.path("memory") == group.path("io") == d  # one directory in v2
    assert set((root / "cgroup.subtree_control").read_text().split()) >= {"memory", "io"}

    group.set_memory_limit(64 * MiB)
    assert (d / "memory.max").read_text() == str(64 * MiB)
    assert (d / "memory.swap.max").read_text() == "0"
    assert not (d / "memory.high").exists(), "memory.high throttles tasks and must never be written"

    group.throttle(Throttle("7:3", read_bps=100_000_000, write_bps=50_000_000, read_iops=150, write_iops=140))
    assert (d / "io.max").read_text() == "7:3 rbps=100000000 wbps=50000000 riops=150 wiops=140"
    group.throttle("7:3", read_bps=1_000_000)
    assert (d / "io.max").read_text() == "7:3 rbps=1000000 wbps=max riops=max wiops=max"

    group.add_pid(4242)
    assert (d / "cgroup.procs").read_text().split() == ["4242"]
    assert group.pids() == [4242]

    (d / "memory.peak").write_text("12345678\n")
    (d / "memory.stat").write_text("anon 100\nfile 5000000\nkernel 7\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert group.memory_peak() == 12345678
    assert group.page_cache() == 5000000
    assert group.oom_kills() == 1
    assert group.oom_events()["max"] == 12
    assert group.describe()["version"] == "v2"

    group.remove()
    assert not d.exists()
    group.remove()  # idempotent


def test_v1_fake_tree_writes_the_right_files(tmp_path):
    root = tmp_path / "v1"
    group = Group.create(["memory", "blkio"], root=root, version="v1")
    mem, blk = root / "memory" / group.name, root / "blkio" / group.name
    assert group.path("memory") == mem and group.path("io") == blk
    (mem / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")  # swap accounting on
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    group.set_memory_limit(64 * MiB)
    assert (mem / "memory.limit_in_bytes").read_text() == str(64 * MiB)
    assert (mem / "memory.memsw.limit_in_bytes").read_text() == str(64 * MiB)
    assert not (mem / "memory.high").exists()

    group.throttle(Throttle("7:3", read_bps=100_000_000, read_iops=150, write_iops=140))
    group.throttle(Throttle("7:4", write_bps=5))
    assert (blk / "blkio.throttle.read_bps_device").read_text() == "7:3 100000000\n"
    assert (blk / "blkio.throttle.read_iops_device").read_text() == "7:3 150\n"
    assert (blk / "blkio.throttle.write_iops_device").read_text() == "7:3 140\n"
    assert (blk / "blkio.throttle.write_bps_device").read_text() == "7:4 5\n"

    (mem / "memory.stat").write_text("cache 4096\nrss 0\ntotal_cache 8192\n")
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (mem / "memory.max_usage_in_bytes").write_text("777\n")
    assert group.page_cache() == 8192
    assert group.oom_kills() == 3
    assert group.memory_peak() == 777
    group.remove()
    assert not mem.exists() and not blk.exists()


def test_unknown_controller():
    with pytest.raises(IolabError, match="unknown controller"):
        Group.create(["cpu"], root="/nonexistent", version="v2")


# --------------------------------------------------------------------------- the real hierarchy

def _enter(group):
    files = [os.fsencode(str(p)) for p in group.procs_files()]

    def preexec():
        for f in files:
            fd = os.open(f, os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
    return preexec


def _popen_in(group):
    def popen(argv, **kwargs):
        return subprocess.Popen(argv, preexec_fn=_enter(group), **kwargs)
    return popen


def _memory_limit_holds(group, tmp_path, limit: int = 64 * MiB):
    """A buffered fio read of a file 4x the limit, inside the group, keeps its cache within the limit."""
    group.set_memory_limit(limit)
    data = tmp_path / "four-times-the-limit.dat"
    write_file(data, 4 * limit)
    # page cache is charged to whoever reads first: start from an empty cache
    Path("/proc/sys/vm/drop_caches").write_text("3")
    group.reset_peak()
    job = fio_json(["--name=read", f"--filename={data}", "--rw=read", "--bs=1M", "--direct=0",
                    "--invalidate=0", f"--size={4 * limit}"], popen=_popen_in(group))
    cache, peak = group.page_cache(), group.memory_peak()
    print(f"\nfio read {job['read']['io_bytes'] >> 20} MiB buffered in {group.name}: "
          f"cache {cache >> 20} MiB, peak {peak >> 20} MiB, limit {limit >> 20} MiB, OOM kills {group.oom_kills()}")
    assert job["read"]["io_bytes"] == 4 * limit
    assert cache is not None and 0 < cache <= limit
    assert peak is not None and 0 < peak <= limit
    assert group.oom_kills() == 0


@needs_root
@needs_fio
@pytest.mark.skipif(not has_v1("memory"), reason=f"no v1 memory controller on this machine ({layout_summary()})")
def test_v1_memory_limit_is_honoured(tmp_path):
    print(f"\nreal cgroup v1 test on: {layout_summary()}")
    group = Group.create(["memory"])
    try:
        assert group.version("memory") == "v1"
        mem = group.path("memory")
        _memory_limit_holds(group, tmp_path)
        assert int((mem / "memory.limit_in_bytes").read_text()) == 64 * MiB
        if (mem / "memory.memsw.limit_in_bytes").exists():
            assert int((mem / "memory.memsw.limit_in_bytes").read_text()) == 64 * MiB
    finally:
        group.remove()
    assert not mem.exists()


@pytest.mark.stock_kernel  # cgroup v2's memory controller: the lab VM's
@needs_root
@needs_fio
@pytest.mark.skipif(not has_v2("memory"),
                    reason=f"no v2 memory controller on this machine ({layout_summary()}); "
                           "the v2 files are checked against a fake tree instead")
def test_v2_memory_limit_is_honoured(tmp_path):
    print(f"\nreal cgroup v2 test on: {layout_summary()}")
    group = Group.create(["memory"], layout=cgroups.Layout("v2", {}, LAYOUT.v2, LAYOUT.v2_controllers))
    try:
        mem = group.path("memory")
        # 32 MiB (a 128 MiB file): under the lab's TCG the 64 MiB of the v1 test took 22 s
        _memory_limit_holds(group, tmp_path, limit=32 * MiB)
        assert int((mem / "memory.max").read_text()) == 32 * MiB
    finally:
        group.remove()


@needs_root
@pytest.mark.skipif(not (has_v1("blkio") or has_v2("io")),
                    reason=f"no block controller on this machine ({layout_summary()})")
def test_real_throttle_files_read_back(tmp_path):
    from iolab.devices import loopdev
    img = tmp_path / "small.img"
    img.write_bytes(b"\0" * MiB)
    device = loopdev.attach(img, direct_io=True)
    try:
        devnum = Path(f"/sys/block/{Path(device).name}/dev").read_text().strip()
        group = Group.create(["io"])
        try:
            group.throttle(Throttle(devnum, read_bps=100_000_000, write_iops=150))
            if group.version("io") == "v1":
                text = (group.path("io") / "blkio.throttle.read_bps_device").read_text()
                assert f"{devnum} 100000000" in text
                text = (group.path("io") / "blkio.throttle.write_iops_device").read_text()
                assert f"{devnum} 150" in text
            else:
                assert devnum in (group.path("io") / "io.max").read_text()
        finally:
            group.remove()
    finally:
        loopdev.detach(device)


@needs_root
@pytest.mark.skipif(not has_v1("memory") and not has_v2("memory"), reason=f"no memory controller ({layout_summary()})")
def test_remove_moves_remaining_tasks_out_and_is_idempotent():
    group = Group.create(["memory"])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=_enter(group))
    try:
        deadline = time.monotonic() + 5
        while sleeper.pid not in group.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert group.contains(sleeper.pid)
        assert str(group.path("memory")) in cgroups.leftovers(owner=os.getpid())
        group.remove()
        assert not group.path("memory").exists()
        assert not group.contains(sleeper.pid)
        assert sleeper.poll() is None, "removing the group must not kill its tasks"
        group.remove()  # again: nothing happens
        # a group removed behind our back is fine too
        other = Group.create(["memory"])
        other.path("memory").rmdir()
        other.remove()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert cgroups.leftovers(owner=os.getpid()) == []


def test_adopted_group_reads_back_and_is_released_not_removed(tmp_path):
    """A group made by someone else (a systemd scope): read back, and removal is left to its maker."""
    unit = f"iolab-{os.getpid()}-abcd.scope"
    mem, blk = tmp_path / "memory" / "system.slice" / unit, tmp_path / "blkio" / "system.slice" / unit
    mem.mkdir(parents=True)
    blk.mkdir(parents=True)
    (mem / "memory.limit_in_bytes").write_text(f"{64 * MiB}\n")
    (mem / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    (blk / "blkio.throttle.read_bps_device").write_text("7:3 100000000\n8:0 5\n")
    for name in ("write_bps", "read_iops", "write_iops"):
        (blk / f"blkio.throttle.{name}_device").write_text("")
    released = []

    def release(timeout):
        released.append(timeout)
        shutil.rmtree(mem)  # plain directories with files: what systemd's rmdir does to a real cgroup
        shutil.rmtree(blk)
    group = Group.adopt(unit, {"memory": ("v1", mem), "blkio": ("v1", blk)}, backend=f"systemd-run scope {unit}",
                        release=release, details={"unit": unit})
    assert group.adopted and group.path("io") == blk
    assert group.memory_limit_in_force()["limit"] == 64 * MiB
    assert group.memory_limit_in_force()["swap"] is None  # unlimited
    assert group.throttle_in_force("7:3") == {"read_bps": 100_000_000, "write_bps": None, "read_iops": None,
                                              "write_iops": None}
    info = group.describe()
    assert info["backend"] == f"systemd-run scope {unit}" and info["unit"] == unit
    group.remove(timeout=3)
    assert released == [3] and group.removed
    group.remove()
    assert released == [3]
    # a release that leaves the directory behind is an error, and the group is not marked removed
    (tmp_path / "memory" / "x" / unit).mkdir(parents=True)
    stuck = Group.adopt(unit, {"memory": ("v1", tmp_path / "memory" / "x" / unit)}, backend="test",
                        release=lambda timeout: None)
    with pytest.raises(IolabError, match="cgroup still there after test was stopped"):
        stuck.remove()
    assert not stuck.removed
    # only directories of that name can be adopted (a controller not enabled for the scope shows the parent)
    with pytest.raises(IolabError, match="not a group named"):
        Group.adopt(unit, {"memory": ("v1", tmp_path / "memory" / "x")}, backend="test", release=print)
    (tmp_path / "memory" / "x" / unit).rmdir()


def test_v2_adopted_read_back(tmp_path):
    d = tmp_path / "iolab-1-ab.scope"
    d.mkdir()
    (d / "memory.max").write_text("67108864\n")
    (d / "memory.swap.max").write_text("0\n")
    (d / "io.max").write_text("7:3 rbps=100 wbps=max riops=150 wiops=max\n")
    group = Group.adopt(d.name, {"memory": ("v2", d), "io": ("v2", d)}, backend="test", release=print)
    assert group.memory_limit_in_force() == {"limit": 64 * MiB, "swap": 0, "swap_file": True,
                                             "files": [str(d / "memory.max"), str(d / "memory.swap.max")]}
    assert group.throttle_in_force("7:3") == {"read_bps": 100, "write_bps": None, "read_iops": 150,
                                              "write_iops": None}
    assert group.throttle_in_force("8:0") == dict.fromkeys(("read_bps", "write_bps", "read_iops", "write_iops"))


# --------------------------------------------------------------------------- owners and stale groups

@pytest.mark.skipif(not (IS_ROOT and has_v1("memory") and has_v1("blkio")), reason="needs root and v1 memory+blkio")
def test_a_group_records_its_owner_until_removed(tmp_path, monkeypatch):
    from iolab.core import ownership
    monkeypatch.setenv(ownership.ENV, str(tmp_path / "owned"))
    group = Group.create(["memory", "io"])
    try:
        rec = ownership.find("cgroup", group.name)
        assert rec is not None and rec.owner == ownership.me()
        assert sorted(rec.details["dirs"]) == sorted(str(d) for _, d in group.dirs.values())
    finally:
        group.remove()
    assert ownership.find("cgroup", group.name) is None


@pytest.mark.skipif(not (IS_ROOT and has_v1("memory") and has_v1("blkio")), reason="needs root and v1 memory+blkio")
def test_undo_stale_kills_the_tasks_a_dead_owner_left_and_removes_the_group():
    from iolab.core import ownership
    gone = subprocess.Popen(["true"])
    gone.wait()
    name = f"iolab-{gone.pid}-5ca1e0"
    with ownership.locked():  # other engineers' reapers would take this dead owner's group too
        group = Group.create(["memory", "io"], name=name)
        orphan = subprocess.Popen(["sleep", "60"])  # what fio is after iolab was killed
        try:
            group.add_pid(orphan.pid)
            dirs = [str(d) for _, d in group.dirs.values()]
            assert cgroups.owner_of(name) == gone.pid
            assert cgroups.tasks_in(dirs) == [orphan.pid]
            assert cgroups.undo_stale(name, dirs, dry_run=True) == \
                f"would remove cgroup {', '.join(dirs)} (and kill tasks [{orphan.pid}])"
            assert all(Path(d).is_dir() for d in dirs)
            assert cgroups.undo_stale(name, dirs, dry_run=False) == \
                f"removed cgroup {', '.join(dirs)} (killed tasks [{orphan.pid}])"
            assert orphan.wait(5) == -9
            assert not any(Path(d).exists() for d in dirs)
        finally:
            if orphan.poll() is None:
                orphan.kill()
                orphan.wait()
            group.remove()
            ownership.forget("cgroup", name)
