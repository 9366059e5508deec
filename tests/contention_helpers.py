"""Contention runs shared by the host's test (cgroup v1, tests/isolation/test_contention.py) and the lab VM's
(cgroup v2, tests/lab/test_lab_contention.py): a throttled emulated device read by fio, and a real second writer
(dd, O_DIRECT) on the same loop device while fio runs."""
from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path

from iolab.devices import emulated
from iolab.engine import recipes, runner

MIB = 1024**2

THROTTLED_READS = """
name: contention-reads
description: sequential 1 MiB reads at QD4 on a throttled device
isolation: direct
defaults: {size: 64M, runtime: 4, repeat: 1}
fio: {ioengine: libaio, direct: 1}
tests:
  - name: SEQ1M-Q4
    rw: [read]
    bs: 1M
    iodepth: 4
"""


def run(tmp_path, text, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    result = runner.run(recipes.load(str(path)), ["emulated:hdd"], data_dir=tmp_path / "data", progress=False,
                        scratch_dir=str(tmp_path), ceiling_probe=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    table = result.results
    assert len(table) == 1
    return table.iloc[0]


def flags(row) -> list[str]:
    return str(row["flags"] or "").split(";")


def fio_running(job: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(a.endswith(job.encode()) for a in argv) and any(a.endswith(b"fio") for a in argv) \
                    and b"--parse-only" not in argv:  # the test itself, not the check of its job file
                return True
    return False


def _read_device(loop: str) -> str:
    """The device fio reads: the dm-delay device over the loop device where the kernel has dm (the lab VM: an
    emulated device with true latency), else the loop device."""
    holders = sorted(Path(f"/sys/block/{Path(loop).name}/holders").iterdir())
    return f"/dev/{holders[0].name}" if holders else loop


def _second_writer(done: dict, stop: threading.Event, nbytes: int) -> None:
    """dd ``nbytes`` (O_DIRECT) to the run's device once fio runs the test's job file."""
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        loops = emulated.leftovers(owner=os.getpid())
        if loops and fio_running("/SEQ1M-Q4.fio"):
            time.sleep(0.5)  # fio is under way, and runs 4 s
            proc = subprocess.run(["dd", "if=/dev/zero", f"of={_read_device(loops[0]['device'])}", "bs=1M",
                                   f"count={nbytes // MIB}", "oflag=direct", "conv=notrunc,fsync", "status=none"],
                                  capture_output=True)
            done.update(returncode=proc.returncode, stderr=proc.stderr, fio_after=fio_running("/SEQ1M-Q4.fio"),
                        device=_read_device(loops[0]["device"]))
            return
        time.sleep(0.05)


def with_second_writer(tmp_path, written: int = 32 * MIB) -> tuple:
    """The throttled reads with dd writing ``written`` bytes to the same device meanwhile: (row, dd's outcome)."""
    done, stop = {}, threading.Event()
    writer = threading.Thread(target=_second_writer, args=(done, stop, written))
    writer.start()
    try:
        row = run(tmp_path, THROTTLED_READS, "writer")
    finally:
        stop.set()
        writer.join()
    return row, done
