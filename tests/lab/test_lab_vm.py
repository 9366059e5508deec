"""iolab.lab on the host: the guest prelude, and a VM that outlives its timeout or is interrupted (Ctrl-C to the
group, iolab killed) is killed, leaving nothing."""
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import live_processes
from iolab.core.errors import IolabError
from iolab.lab import guest, vm


def test_guest_script_mounts_scratch_and_rebinds_result_dirs():
    text = guest.script("echo hi", scratch=True, n_disks=2, cwd="/work/x",
                        rwdirs=[Path("/var/tmp/results"), Path("/srv/other")])
    assert 'mount "$scratch" /var/tmp' in text
    # a result directory under /var/tmp is kept visible on top of the scratch file system
    keep, rebind = text.index("mount --bind /var/tmp/results /run/iolab-keep/0"), \
        text.index("mount --bind /run/iolab-keep/0 /var/tmp/results")
    assert keep < text.index('mount "$scratch" /var/tmp') < rebind
    assert "/srv/other" not in text
    assert "disk_by_serial iolab-disk1" in text and "disk_by_serial iolab-disk2" in text
    assert text.index("cd /work/x") < text.index("( echo hi")
    assert text.rstrip().endswith("exit $rc")


def test_the_network_lets_in_only_a_forwarded_loopback_port_and_the_guest_brings_it_up():
    assert vm.network_options(None) == []
    netdev, device = vm.network_options(40001)[1], vm.network_options(40001)[3]
    # restrict=on: the guest reaches neither this machine nor beyond; only the forwarding rule lets anything in
    assert netdev == f"user,id=iolabnet,restrict=on,hostfwd=tcp:127.0.0.1:40001-{guest.NET_ADDRESS}:22"
    assert f"mac={guest.NET_MAC}" in device
    with pytest.raises(IolabError, match="between 1024 and 65535"):
        vm.network_options(22)
    text = guest.script("echo hi", scratch=False, n_disks=0, network=True)
    assert f"ip addr add {guest.NET_ADDRESS}/24" in text and text.index(guest.NET_MAC) < text.index("( echo hi")
    assert guest.NET_MAC not in guest.script("echo hi", scratch=False, n_disks=0)


def test_scratch_disks_refused_on_tmpfs():
    tmpfs = next((line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                  if line.split()[2] == "tmpfs" and os.access(line.split()[1], os.W_OK)), None)
    if tmpfs is None:
        pytest.skip("no writable tmpfs mounted here")
    with pytest.raises(IolabError, match="must be on disk, not in RAM"):
        vm.run_in_vm("true", vm.LabConfig(disk_dir=Path(tmpfs))) if vm.availability() is None \
            else vm._refuse_tmpfs(Path(tmpfs))


@pytest.mark.skipif(vm.availability() is not None, reason=f"lab VM not available: {vm.availability()}")
def test_timeout_kills_the_vm_and_removes_its_disks(tmp_path):
    before = set(Path(vm.DEFAULT_DISK_DIR).glob("iolab-lab-*"))
    running = set(live_processes("iolab-lab-"))  # another lab VM (the tier) may be running
    with pytest.raises(IolabError, match="did not finish within 3 s and was killed"):
        vm.run_in_vm("sleep 600", vm.LabConfig(timeout=3, disks=["64M"], python_images=False))
    assert set(Path(vm.DEFAULT_DISK_DIR).glob("iolab-lab-*")) == before  # disk files and control dir removed
    assert set(live_processes("iolab-lab-")) <= running  # no qemu, no virtme-run of ours left


def test_guest_mounts_python_images_last_and_overlays_cwd():
    text = guest.script("iolab recipes", scratch=True, n_disks=0, cwd="/work/x",
                        rwdirs=[Path("/work/x/data")], py_mounts=[Path("/work/x/.venv")], overlay_cwd=True)
    overlay = text.index("mount -t overlay iolab-cwd -o lowerdir=/work/x,")
    # the shared data directory is kept visible on top of the overlay, and results go there
    assert text.index("mount --bind /work/x/data /run/iolab-keep/o0") < overlay \
        < text.index("mount --bind /run/iolab-keep/o0 /work/x/data")
    # the .venv image is mounted after the overlay, which would otherwise hide it (9p again: slow)
    assert overlay < text.index('mount -t ext4 -o ro,noload "$d" /work/x/.venv') < text.index("( iolab recipes")


def test_python_images_are_cached_and_rebuilt_when_a_file_changes(tmp_path):
    from iolab.lab import pyimage
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("x = 1\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    first = pyimage._image_for(tree, cache)
    assert first.image.exists() and pyimage._image_for(tree, cache).image == first.image  # reused
    (tree / "pkg" / "mod.py").write_text("x = 22\n")
    second = pyimage._image_for(tree, cache)
    assert second.image != first.image and second.image.exists() and not first.image.exists()
    listing = subprocess.run(["debugfs", "-R", "cat /pkg/mod.py", str(second.image)], capture_output=True, text=True)
    assert listing.stdout == "x = 22\n"


def test_console_output_appends_to_a_redirected_log(tmp_path):
    """virtme-ng reopens /proc/self/fd/1 for the guest's console; on a file that truncated the log."""
    log = tmp_path / "make-test.log"
    log.write_text("host tests: 786 passed\n")
    reopen = "echo guest console > /proc/self/fd/1; echo guest stderr > /proc/self/fd/2"
    code = f"from iolab.lab import vm; raise SystemExit(vm._boot(['/bin/sh', '-c', {reopen!r}], 30))"
    with log.open("a") as out:
        rc = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=out).returncode
    assert rc == 0
    first, *rest = log.read_text().splitlines()
    assert first == "host tests: 786 passed"
    assert sorted(rest) == ["guest console", "guest stderr"]  # two pipes: their order is the threads'


@pytest.mark.parametrize("scratch", ["4G", None])
def test_only_the_scratch_disk_ignores_the_guests_cache_flushes(tmp_path, scratch):
    """The scratch disk (the guest's /var/tmp, thrown away with the VM) drops flushes, so the emulated devices
    built on it are told apart by their profiles, not by the host's fdatasync; test disks keep every flush."""
    config = vm.LabConfig(scratch=scratch, disks=["64M", "64M"], python_images=False)
    disks = [tmp_path / f"disk{i}.img" for i in range(len(config.disks) + bool(scratch))]
    options = " ".join(vm.vng_argv(config, disks, tmp_path / "script.sh"))
    drives = [word for word in options.split() if word.startswith("if=none,id=iolab") and "iolabpy" not in word]
    assert len(drives) == len(disks)
    expected = ["cache.direct=on,cache.no-flush=on"] * bool(scratch) + ["cache=none"] * len(config.disks)
    assert [",".join(part for part in drive.split(",") if part.startswith("cache")) for drive in drives] == expected


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.skipif(vm.availability() is not None, reason=f"lab VM not available: {vm.availability()}")
def test_ctrl_c_to_the_group_removes_the_work_dir_and_leaves_no_qemu(tmp_path):
    """Ctrl-C reaches the whole foreground group: `iolab lab` and the Python that started it (the lab tier's
    subprocess.run, any wrapper), which SIGKILLs its child 0.25 s later, in the middle of iolab's cleanup.
    The VM (its own session: no terminal signal reaches it) ran on and ~10 GB of disk images stayed."""
    import re
    import signal
    lab = [str(Path(sys.executable).with_name("iolab")), "lab", "--scratch", "256M", "--disk", "64M",
           "--data", str(tmp_path / "data"), "--", "sleep", "600"]
    wrapper = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.run({lab!r})"],
                               cwd=vm.CHECKOUT, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    workdir, vng_group = None, None
    try:
        deadline = time.monotonic() + 180
        while workdir is None and time.monotonic() < deadline and wrapper.poll() is None:
            for pid in _descendants(wrapper.pid):
                cmdline = _cmdline(pid)
                if "qemu-system" in cmdline and (match := re.search(r"(/\S+/iolab-lab-[^/\s]+)/disk0\.img", cmdline)):
                    workdir, vng_group = Path(match.group(1)), os.getpgid(pid)
            time.sleep(0.2)
        assert workdir is not None and workdir.is_dir(), "the VM's qemu never started"
        os.killpg(wrapper.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
        assert wrapper.wait(timeout=60) != 0
        deadline = time.monotonic() + 30  # whoever cleans up (iolab or its guard) may finish after the wrapper
        while (workdir.exists() or live_processes(str(workdir))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not workdir.exists(), f"{workdir} left behind"
        assert not live_processes(str(workdir)), "qemu, virtme-ng or the guard still runs"
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
            wrapper.wait()
        if vng_group is not None:  # what a failed run left: the VM's group (its own session) and its files
            with contextlib.suppress(ProcessLookupError):
                os.killpg(vng_group, signal.SIGKILL)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def test_guard_cleans_up_only_when_iolab_ends_without_releasing_it(tmp_path):
    """The guard kills the watched process group and removes the dir when its pipe closes unannounced (iolab
    killed); after release() ("done": iolab cleaned up itself) it touches nothing."""
    import signal
    from iolab.lab.guard import Guard
    groups = []
    try:
        for released in (True, False):
            workdir = tmp_path / f"work-{released}"
            (workdir / "control").mkdir(parents=True)
            vm_like = subprocess.Popen(["sleep", "600"], start_new_session=True)
            groups.append(vm_like.pid)
            guard = Guard(workdir)
            guard.watch(vm_like.pid)
            if released:
                guard.release()
            else:  # what a SIGKILLed iolab leaves the guard: end of file, no "done"
                guard.process.stdin.close()
                guard.process.wait(timeout=30)
            assert guard.process.returncode == 0
            assert workdir.exists() == released
            assert (vm_like.poll() is None) == released, "the group is killed only when iolab did not clean up"
            vm_like.kill()
            vm_like.wait()
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def test_signals_held_during_cleanup_are_raised_after_it():
    import signal
    from iolab.lab.guard import held_signals
    done = []
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):
        with held_signals():
            os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C while the VM is killed and its files removed
            done.append("cleanup finished")
    assert done == ["cleanup finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
