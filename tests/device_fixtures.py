"""Shared helpers for the device tests: real loop devices under a test's tmp_path,
and a cleanup that undoes anything a test left behind (mounts, swap, md arrays,
loop devices) even when the test failed.

Everything a test makes lives under its ``tmp_path`` (backing files, mount
points, symlinks), so "ours" is decided by path: other developers' and other
tests' loop devices on the same machine are never touched.

Import the fixtures into a test module with
``from device_fixtures import scratch, make_loop  # noqa: F401``.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parent.parent
# the console script of this checkout's venv (what users run); else this interpreter's module
IOLAB = [str(REPO / ".venv" / "bin" / "iolab")] if (REPO / ".venv" / "bin" / "iolab").exists() \
    else [sys.executable, "-m", "iolab"]

requires_root = pytest.mark.skipif(not ROOT, reason="needs root (loop devices, mkfs, mount)")


def requires(*programs: str):
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")


def sh(*argv, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run a command for test set-up (not the code under test)."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, stdin=subprocess.DEVNULL, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _under(path: str, root: Path) -> bool:
    path = path.removesuffix(" (deleted)")
    return path == str(root) or path.startswith(str(root) + "/")


def loops_under(root: Path) -> dict[str, str]:
    """Attached loop devices whose backing file lies under ``root``: {device: file}."""
    out = sh("losetup", "--list", "--json", "--output", "NAME,BACK-FILE", check=False).stdout
    if not out.strip():
        return {}
    found = {}
    for dev in json.loads(out).get("loopdevices", []):
        back = dev.get("back-file") or ""
        if _under(back, root):
            found[dev["name"]] = back
    return found


def mounts_under(root: Path) -> list[str]:
    """Mount targets at or below ``root`` (innermost last)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4].replace("\\040", " ")
        if _under(target, root):
            found.append(target)
    return found


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def swaps_of(devices_: set[str]) -> list[str]:
    lines = Path("/proc/swaps").read_text().splitlines()[1:]
    return [line.split()[0] for line in lines if line.split() and line.split()[0] in devices_]


def md_arrays_over(devices_: set[str]) -> list[str]:
    arrays = []
    names = {Path(d).name for d in devices_}
    for md in Path("/sys/block").glob("md*"):
        slaves = {p.name for p in (md / "slaves").iterdir()} if (md / "slaves").exists() else set()
        parents = {Path(os.path.realpath(f"/sys/class/block/{s}")).parent.name for s in slaves}
        if (slaves | parents) & names:
            arrays.append(f"/dev/{md.name}")
    return arrays


def cleanup(root: Path) -> list[str]:
    """Undo whatever is left under ``root``; returns what it had to clean (for messages)."""
    left = []
    for target in reversed(mounts_under(root)):
        left.append(f"mount {target}")
        if sh("umount", target, check=False).returncode != 0:
            sh("umount", "--lazy", target, check=False)
    loops = loops_under(root)
    family = set(loops)
    for dev in loops:
        family |= {f"/dev/{p.name}" for p in Path(f"/sys/block/{Path(dev).name}").glob(f"{Path(dev).name}p*")}
    for swap in swaps_of(family):
        left.append(f"swap {swap}")
        sh("swapoff", swap, check=False)
    if Path("/proc/mdstat").exists():
        for md in md_arrays_over(family):
            left.append(f"md {md}")
            sh("mdadm", "--stop", md, check=False)
    for dev in loops:
        left.append(f"loop {dev}")
        for _ in range(20):
            if sh("losetup", "--detach", dev, check=False).returncode == 0:
                break
            time.sleep(0.1)
    return left


@pytest.fixture
def scratch(tmp_path):
    """A directory for backing files and mount points; everything under it is
    cleaned up after the test, whatever happened."""
    yield tmp_path
    cleanup(tmp_path)
    deadline = time.monotonic() + 15  # a detached loop udev still holds after a umount goes a moment later
    while loops_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not loops_under(tmp_path), f"loop devices left: {loops_under(tmp_path)}"
    assert not mounts_under(tmp_path), f"mounts left: {mounts_under(tmp_path)}"


@pytest.fixture
def make_loop(scratch):
    """``make_loop(size="64M", partscan=False, name=None) -> "/dev/loopN"`` over a new file."""
    counter = iter(range(1000))

    def make(size: str = "64M", *, partscan: bool = False, name: str | None = None) -> str:
        file = scratch / f"{name or 'loop'}-{next(counter)}.img"
        sh("truncate", "--size", size, file)
        argv = ["losetup", "--find", "--show", "--direct-io=on"]
        if partscan:
            argv.append("--partscan")
        return sh(*argv, file).stdout.strip()

    return make


def unmount(path) -> None:
    """umount, then let udev finish probing the device so its loop can be detached."""
    sh("umount", path)
    sh("udevadm", "settle", "--timeout=10", check=False)


def detach(loop: str, wait_s: float = 30.0) -> None:
    """Detach a loop device a test attached itself, and wait until the kernel has let it go (after a umount
    the release is deferred: a check right after found it still bound)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sh("losetup", "--detach", loop, check=False)
        if not Path(f"/sys/block/{Path(loop).name}/loop/backing_file").exists():
            return
        time.sleep(0.2)


@contextlib.contextmanager
def mounted_image(image: Path, mountpoint: Path, size: str = "64M") -> Iterator[str]:
    """An ext4 file system in a new file ``image`` of ``size``, on a loop device mounted at ``mountpoint``
    (made if missing); yields the loop device. Undone on the way out, also when the test or the set-up
    fails: umount (lazily if busy), udev settled, the loop detached (waited for), the image removed."""
    image, mountpoint = Path(image), Path(mountpoint)
    loop = None
    try:
        mountpoint.mkdir(parents=True, exist_ok=True)
        sh("truncate", "--size", size, image)
        sh("mkfs.ext4", "-q", "-F", image)
        loop = sh("losetup", "--find", "--show", image).stdout.strip()
        sh("mount", loop, mountpoint)
        yield loop
    finally:
        if os.path.ismount(mountpoint) and sh("umount", mountpoint, check=False).returncode != 0:
            sh("umount", "--lazy", mountpoint, check=False)
        sh("udevadm", "settle", "--timeout=10", check=False)
        if loop:
            detach(loop)
        image.unlink(missing_ok=True)


def partition(device: str, sizes_mib: list[int]) -> list[str]:
    """GPT with partitions of ``sizes_mib`` on ``device``; returns their device paths."""
    argv = ["sgdisk", "--zap-all", device]
    sh(*argv)
    argv = ["sgdisk"]
    start = 1
    for number, size in enumerate(sizes_mib, start=1):
        argv.append(f"--new={number}:{start}M:+{size}M")
        start += size
    sh(*argv, device)
    sh("partx", "--update", device)
    name = Path(device).name
    parts = [f"/dev/{name}p{n}" for n in range(1, len(sizes_mib) + 1)]
    deadline = time.monotonic() + 10
    while not all(os.path.exists(p) for p in parts):
        assert time.monotonic() < deadline, f"partitions of {device} did not appear"
        time.sleep(0.05)
    return parts


def write_plan(directory: Path, data: dict, name: str = "plan") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def iolab(*args, check: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed ``iolab`` console script in a fresh process."""
    return subprocess.run([*IOLAB, *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=check, **kwargs)
