"""Shared pieces for the tests that use the real kernel: cgroups, loop devices, huge pages, fio.

Imported by test_cgroups, test_isolation, test_blockstat and test_emulated.
The ``machine_clean`` fixtures check, after every test and every module, that
this test process left no iolab cgroup, no loop device, no mount, no huge
page and no ownership record (:mod:`iolab.core.ownership`) behind -- and clean up
whatever it finds (so one failure does not spill into the next test) before
failing.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.isolation import cgroups, hugepages
from iolab.devices import emulated
from iolab.core import ownership
from iolab.isolation.cgroups import Group

IS_ROOT = os.geteuid() == 0
FIO = shutil.which("fio")

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (cgroups, loop devices, drop_caches, huge pages)")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")


def layout():
    try:
        return cgroups.detect()
    except Exception:  # noqa: BLE001 - a machine without /proc/self/mountinfo
        return None


LAYOUT = layout()


class StandInNotice(UserWarning):
    """Shown in the warnings summary: these tests ran against a stand-in, not systemd. (Defined here, not in
    the test file: pytest-xdist's controller imports a warning's class by its module to show it.)"""


def layout_summary() -> str:
    if LAYOUT is None:
        return "no cgroup mounts"
    return (f"cgroup {LAYOUT.version}: v1 controllers [{', '.join(sorted(LAYOUT.v1)) or 'none'}], "
            f"v2 {LAYOUT.v2 or 'not mounted'} with [{', '.join(sorted(LAYOUT.v2_controllers)) or 'no controllers'}]")


def has_v1(controller: str) -> bool:
    return LAYOUT is not None and controller in LAYOUT.v1


def has_v2(controller: str) -> bool:
    return LAYOUT is not None and LAYOUT.v2 is not None and controller in LAYOUT.v2_controllers


def nr_hugepages() -> int:
    return int(Path("/proc/sys/vm/nr_hugepages").read_text())


def _other_iolab_runs() -> list[str]:
    """Other live iolab processes that hold huge pages or cgroups (they change nr_hugepages too)."""
    mine = os.getpid()
    out = [f"pid {pid} holds {pages} huge pages" for pid, pages in hugepages.hugepage_holders().items()
           if pid != mine]
    for path in cgroups.leftovers():
        owner = int(Path(path).name.split("-")[1])
        if owner != mine and Path(f"/proc/{owner}").exists():
            out.append(path)
    return out


_BASETEMP: list[str] = []  # pytest's base temp dir: our scratch dirs and mount points live there


def _our_mounts() -> list[str]:
    """Mount points made by emulated_device under this test session's temp dir."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if "iolab-mnt-" in point and any(point.startswith(base) for base in _BASETEMP):
            mounts.append(point)
    return mounts


def check_and_clean(hugepages_before: int | None, others_before: list[str] = ()) -> list[str]:
    """What this process left behind (after cleaning it up).

    ``nr_hugepages`` is machine-wide: other iolab runs (other developers' tests on this box)
    add and give back pages too. Our own pages are accounted exactly
    (:func:`iolab.isolation.hugepages.outstanding_hugepages`); the machine-wide value must be back where
    it was unless another iolab run was active when the test started or when it ended.
    """
    problems = []
    pid = os.getpid()
    for path in cgroups.leftovers(owner=pid):
        problems.append(f"cgroup left: {path}")
        try:
            Group(Path(path).name, {"x": ("v1", Path(path))}).remove()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"cannot remove {path}: {exc}")
    for point in _our_mounts():
        problems.append(f"mount left: {point}")
        subprocess.run(["umount", "--lazy", point], check=False)
    for loop in emulated.leftovers(owner=pid):
        problems.append(f"loop device left: {loop['device']} -> {loop['backing_file']}")
        subprocess.run(["losetup", "--detach", loop["device"]], check=False)
    for rec in ownership.records():  # every object undone must have dropped its record too
        if rec.owner.pid == pid:
            problems.append(f"ownership record left: {rec.describe()} ({rec.path})")
            ownership.drop(rec)
    if hugepages.outstanding_hugepages():
        problems.append(f"{hugepages.outstanding_hugepages()} huge pages not given back by this process")
    if hugepages_before is not None and Path("/proc/sys/vm/nr_hugepages").exists():
        now = nr_hugepages()
        if now != hugepages_before:
            others = sorted(set(others_before) | set(_other_iolab_runs()))
            if others:
                print(f"note: nr_hugepages {hugepages_before} -> {now}, but other iolab runs are active "
                      f"({', '.join(others)}); our own reservations are all given back")
            else:
                problems.append(f"nr_hugepages is {now}, was {hugepages_before}")
    return problems


@pytest.fixture
def machine_clean():
    """After the test: nothing of ours left (cgroups, loops, mounts, huge pages)."""
    before = nr_hugepages() if Path("/proc/sys/vm/nr_hugepages").exists() else None
    others = _other_iolab_runs()
    yield
    problems = check_and_clean(before, others)
    assert not problems, "test left things behind: " + "; ".join(problems)


@pytest.fixture(scope="module")
def module_clean(tmp_path_factory):
    _BASETEMP.append(str(tmp_path_factory.getbasetemp()))
    before = nr_hugepages() if Path("/proc/sys/vm/nr_hugepages").exists() else None
    others = _other_iolab_runs()
    yield
    problems = check_and_clean(before, others)
    assert not problems, "module left things behind: " + "; ".join(problems)


@pytest.fixture
def scratch(tmp_path_factory):
    """A scratch directory on a disk file system (loop devices need O_DIRECT: not tmpfs)."""
    path = tmp_path_factory.mktemp("scratch")
    return path


# --------------------------------------------------------------------------- fio

def fio_json(argv_tail: list[str], *, popen=subprocess.Popen, timeout: float = 60) -> dict:
    """Run fio (``--output-format=json`` added) and return its first job's dict."""
    argv = [FIO, "--output-format=json", *argv_tail]
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"fio failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}"
    start = text.find("{")
    return json.loads(text[start:])["jobs"][0]


def write_file(path: Path, size: int, *, chunk: int = 1 << 20) -> None:
    """A file of ``size`` bytes of non-zero data, written and synced."""
    block = (b"iolab-test-data-" * (chunk // 16))[:chunk]
    with open(path, "wb") as fh:
        left = size
        while left > 0:
            fh.write(block[:min(chunk, left)])
            left -= chunk
        fh.flush()
        os.fsync(fh.fileno())


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache (util-linux fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout.strip()
    return int(out or 0)


def within(measured: float, declared: float, tolerance: float) -> bool:
    return abs(measured - declared) <= tolerance * declared


#: blk-throttle enforces its limits per time slice: 100 ms (v1; v2's throttling works in the same slices)
THROTTLE_SLICE = 0.1


def throttle_slack(seconds: float) -> float:
    """How far above its limit a throttled run of ``seconds`` may measure: it can be off by about
    one slice at its start (0.1/T) plus one slice's burst (0.1/T)."""
    return 2 * THROTTLE_SLICE / seconds


def under_throttle(measured: float, limit: float, seconds: float) -> bool:
    """Whether a rate measured over ``seconds`` respects a throttle of ``limit``.

    Only the ceiling is the test's to control: how close a run comes to it from below depends
    on how fast this machine's loop device and disk are while other work shares them.
    """
    return measured <= limit * (1 + throttle_slack(seconds))


#: A run on a device whose own speed is many times its throttle reaches the throttle: from below,
#: it may lose the first slice and the time fio takes to start and stop its jobs (a few percent on
#: a busy 2-core machine), never more than this share. A lower result means the throttle, not the
#: device, is wrong. Used only where the backing loop device is >= 5x faster than the limit.
REACHES_LIMIT = 0.90


def at_throttle(measured: float, limit: float, seconds: float) -> bool:
    """``measured`` is the throttle's rate: not above it (within its slice), and not far below."""
    return REACHES_LIMIT * limit <= measured and under_throttle(measured, limit, seconds)


@contextlib.contextmanager
def mounted(where: Path, fstype: str, size: str):
    """A small RAM file system (``tmpfs``, ``ramfs``) mounted at ``where`` (made here), unmounted after."""
    where.mkdir()
    subprocess.run(["mount", "-t", fstype, "-o", f"size={size}", f"iolab-test-{fstype}", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()
