"""The ``hdparm`` engine: ``hdparm -T`` (cached reads) and ``-t`` (buffered disk reads), repeated and averaged.

As hdparm 9.x (``time_cache()``, ``time_device()``):

``cached-reads`` (-T), measured by a Python loop (:mod:`iolab.engine.directio`)
    read the first 2 MiB once, flush (sync, fsync, ``BLKFLSBUF``), sleep 1 s,
    then ``lseek(0)`` + ``read(2 MiB)`` until 2.0 s have passed, minus the time
    of as many bare ``lseek(0)`` calls: the speed of the page cache (memory
    and CPU), not of the disk. fio's equivalent (``pre_read=1 invalidate=0
    time_based``) re-reads through its own per-I/O bookkeeping and came out
    about 40 % below hdparm on the development machine, so Python does it.
``disk-reads`` (-t), measured by fio
    ``rw=read bs=2m psync`` from offset 0 (or ``offset`` GiB) for at most 3 s
    or to the end of the device, after the cache was dropped (sandbox) and
    ``invalidate=1`` (fio issues ``BLKFLSBUF`` on block devices): the same
    2 MiB ``read()`` calls as hdparm, readahead included.

Both wait ``settle`` seconds first (hdparm's ``sleep(3)`` "to let I/O
settle"). ``direct`` makes both O_DIRECT (``hdparm --direct``).

Repetitions alternate over the targets (the GigaExpress article ran
``hdparm -Tt`` five times, alternating between two devices, and averaged).
hdparm's "MB" is MiB: its figure is kept in ``hdparm_mb_sec`` (MiB/s, as
hdparm prints it) and ``bw_mbps`` is decimal MB/s.

``--with-original`` runs ``hdparm -T`` and ``hdparm -t`` themselves on block
device targets (emulated or real), in the same sandbox; hdparm cannot time a
regular file (``BLKFLSBUF`` fails), so a directory or file target gets no
original (noted in the manifest).
"""
from __future__ import annotations

import logging
import os
import subprocess

import pandas as pd

from iolab.core import files
from iolab.core.errors import IolabError
from iolab.classic.originals import MiB, ClassicEngine, Option, parse_hdparm

log = logging.getLogger(__name__)

TESTS = {"cached-reads": "hdparm -T: cached reads (memory, not the disk)",
         "disk-reads": "hdparm -t: buffered disk reads"}
#: hdparm's timing thresholds (seconds) and buffer.
CACHED_SECONDS, DISK_SECONDS, BUFFER = 2.0, 3.0, 2 * MiB


class Engine(ClassicEngine):
    OPTIONS = {
        "direct": Option(False, "bool", None, "O_DIRECT reads (hdparm --direct)"),
        "offset": Option(0, "int", 0, "start -t this many GiB into the device (hdparm --offset)"),
        "settle": Option(3, "seconds", 0, "seconds to wait before each timing (hdparm sleeps 3)"),
    }
    TESTS = TESTS
    ORIGINAL = "hdparm"

    def __init__(self, recipe, targets, run_, **kwargs):
        super().__init__(recipe, targets, run_, **kwargs)
        self.direct = self.options["direct"]
        self.buffered = not self.direct

    def prepare(self) -> None:
        for target in self.targets:
            if target.kind == "emulated" and target.test_file is None:
                self.layout(target, None)      # a fresh emulated device reads holes: give it data
            elif target.created_file:
                self.layout(target, self.recipe.size)
            size = files.size_of(target.filename)
            if size < BUFFER + self.options["offset"] * 1024 * MiB:
                raise IolabError(f"too small for hdparm's 2 MiB reads at offset {self.options['offset']} GiB "
                                 f"({size} bytes)", context=f"--target {target.spec}")

    def measure(self) -> None:
        for rep in self.passes(("disk-reads",)):
            for target in self.targets:  # alternating, as the GigaExpress article did
                if "cached-reads" in self.steps:
                    self.timed("cached-reads", rep, self.cached(target, rep))
                if "disk-reads" in self.steps:
                    frame = self.timed("disk-reads", rep, self.disk(target, rep))
                    self.values[(target.name, "disk-reads")].append(frame["bw_mbps"].iloc[0])
                if self.original_available() and self.original_target(target):
                    for test in (t for t in TESTS if t in self.steps):
                        name = f"{test} (hdparm)"
                        self.started(name, test=test, rw="read")
                        self.finished(name, rep, self.add(self.original(target, test, rep)))

    def timed(self, test: str, rep: int, frame: pd.DataFrame) -> pd.DataFrame:
        self.started(self.steps[test].id)
        self.add(frame)
        self.finished(self.steps[test].id, rep, frame)
        return frame

    def cached(self, target, rep: int) -> pd.DataFrame:
        step = self.step("cached-reads", direct=int(self.direct), bs=BUFFER)
        spec = {"path": target.filename, "direct": self.direct, "settle": self.options["settle"],
                "seconds": CACHED_SECONDS}

        def convert(result: dict) -> list[dict]:
            elapsed = result["elapsed_s"]
            return [{"direction": "read", "bs": BUFFER, "iodepth": 1, "numjobs": 1, "io_bytes": result["bytes"],
                     "runtime_s": elapsed, "bw_mbps": result["bytes"] / elapsed / 1e6,
                     "hdparm_mb_sec": result["iterations"] * 2 / elapsed, "iops": result["iterations"] / elapsed,
                     "cpu_usr_pct": 100 * result["usr_s"] / elapsed, "cpu_sys_pct": 100 * result["sys_s"] / elapsed}]

        frame = self.python_step(step, target, rep, "hdparm-cached", spec, convert)
        return self.emptied(frame, "cache_suspect")  # -T reads the cache on purpose

    def disk(self, target, rep: int) -> pd.DataFrame:
        step = self.step("disk-reads", direct=int(self.direct), bs=BUFFER)
        options = {"rw": "read", "bs": "2m", "ioengine": "psync", "direct": int(self.direct), "invalidate": 1,
                   "runtime": f"{DISK_SECONDS:g}s", "iodepth": 1, "numjobs": 1}
        if self.options["settle"]:
            options["startdelay"] = f"{int(self.options['settle'] * 1000)}ms"
        if self.options["offset"]:
            options["offset"] = f"{self.options['offset']}g"
        if target.test_file:
            options["size"] = files.size_of(target.filename) - self.options["offset"] * 1024 * MiB
        frame = self.fio_step(step, target, rep, options)
        frame["hdparm_mb_sec"] = pd.to_numeric(frame["bw_mbps"], errors="coerce") * 1e6 / MiB
        return frame

    # ---- hdparm itself
    def original_target(self, target) -> bool:
        if target.test_file is None:
            return True
        skipped = self.originals[self.ORIGINAL].setdefault("skipped", {})
        skipped[target.name] = "hdparm times block devices only (BLKFLSBUF fails on a regular file)"
        return False

    def original_version(self, path: str):
        proc = subprocess.run([path, "-V"], capture_output=True, text=True)
        return proc.stdout.strip() or None

    def original(self, target, test: str, rep: int) -> pd.DataFrame:
        flag = "-T" if test == "cached-reads" else "-t"
        argv = ["hdparm", flag] + (["--direct"] if self.direct else [])
        if flag == "-t" and self.options["offset"]:
            argv += ["--offset", str(self.options["offset"])]
        argv.append(target.filename)
        step = self.step(test, direct=int(self.direct), bs=BUFFER)
        frame = self.tool_step(step, target, rep, argv, parse_hdparm, tool="hdparm")
        if test == "cached-reads":
            frame = self.emptied(frame, "cache_suspect")
        return frame

    def flag(self) -> None:
        from iolab.analysis.stats import flag_results
        table = self.run.results
        if table.empty:
            return
        flagged = flag_results(table, cpu_count=os.cpu_count(), min_runtime_s=1.0, cov_threshold=0.05,
                               by=("run_id", "target", "test", "direction", "tool"))
        flagged["flags"] = flagged["flags"].replace("", None)
        self.run.set_results(flagged)
