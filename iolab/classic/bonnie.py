"""The ``bonnie`` engine: Bonnie++ 1.9x/2.00's file I/O tests, fio where faithful, Python where not.

Tests (bonnie++'s own CSV names, in its order; one pass runs them all, since
each works on the file the previous one left):

============  ===========================  ======  ==================================================
test          bonnie++ heading             tool    how
============  ===========================  ======  ==================================================
putc          Sequential Output Per-Chr    python  one ``write(fd, &c, 1)`` per byte over ``byte_io_size``
put_block     Sequential Output Block      fio     ``rw=write bs=8k psync end_fsync=1`` on a new file
rewrite       Sequential Output Rewrite    python  read chunk, dirty a byte, seek back, write
getc          Sequential Input Per-Chr     python  one ``read(fd, &c, 1)`` per byte
get_block     Sequential Input Block       fio     ``rw=read bs=8k psync invalidate=0``
seeks         Random Seeks                 python  8192 seeks over 5 processes, 10 % written back
============  ===========================  ======  ==================================================

Faithful details, from bonnie++ 2.00a (Debian 12) and checked with strace:
every test's file is closed **with fsync** before the clock stops
(``CFileOp::Close``), so fio gets ``end_fsync=1`` (fio counts it in the
runtime) and the Python loops fsync inside their timing. K/sec = KiB /
elapsed, %CP = (user + system CPU) / elapsed, latency = the worst single
operation (per chunk for the per-char tests); "+++++" when a test took under
0.5 s. The file is ``2 x`` the RAM the test sees: in a memory-limited cgroup
``2 x mem_limit`` (the recipe's 1 GiB default for the default 512 MiB limit);
a smaller ``--size`` is refused, as bonnie++ refuses it, except with
``--isolation none``.

``--with-original`` runs ``bonnie++ -d DIR -s SIZE:CHUNK:SEEKS:PROCS -r RAM -n
0 -f<MiB> -z SEED -q`` in the same sandbox after each pass and parses its CSV
line into the same rows (``tool = bonnie++``).
"""
from __future__ import annotations

import logging
import os
import secrets

import pandas as pd

from iolab.engine import sysinfo
from iolab.core.errors import IolabError
from iolab.classic.originals import BONNIE_MIN_TIME, BONNIE_TESTS, PLUS, ClassicEngine, Option, parse_bonnie_csv
from iolab.engine.store import safe_name
from iolab.core.units import fio_size, human_size

log = logging.getLogger(__name__)

MiB = 1024 * 1024
TESTS = {name: heading for name, _, heading in BONNIE_TESTS}
DIRECTIONS = {name: direction for name, direction, _ in BONNIE_TESTS}
#: The tests whose spread decides whether another pass runs.
HEADLINE = ("put_block", "rewrite", "get_block")


class Engine(ClassicEngine):
    OPTIONS = {
        "byte_io_size": Option("3M", "size", 0, "per-char test size (bonnie++ -f; 0 skips the per-char tests)"),
        "chunk_size": Option("8k", "size", 256, "I/O chunk of the block tests (bonnie++ -s SIZE:CHUNK)"),
        "seeks": Option(8192, "int", 1, "seeks in the random-seek test"),
        "seek_procs": Option(5, "int", 1, "processes sharing the seeks"),
        "seed": Option(None, "int", 0, "random seed of the seek test (default: a new one, recorded)"),
        "sync": Option(False, "bool", None, "fsync each block the seek test writes back (bonnie++ -b)"),
    }
    TESTS = TESTS
    TARGET_KINDS = ("dir", "file", "emulated")
    BUFFERED = True
    ORIGINAL = "bonnie++"

    def __init__(self, recipe, targets, run_, **kwargs):
        super().__init__(recipe, targets, run_, **kwargs)
        source = recipe.source or recipe.name
        chunk = self.options["chunk_size"]
        if chunk & (chunk - 1) or chunk > MiB:
            raise IolabError(f"must be a power of two from 256 bytes to 1 MiB, got {chunk}",
                             context=f"{source}: options.chunk_size")
        if recipe.size % MiB:
            raise IolabError(f"bonnie++ sizes files in whole MiB, got {recipe.size} bytes", context="--size")
        if self.options["byte_io_size"] % chunk:
            raise IolabError(f"must be a multiple of chunk_size ({chunk})", context=f"{source}: options.byte_io_size")
        if self.options["seed"] is None:
            self.options["seed"] = secrets.randbelow(2**31)
        self.size = recipe.size
        self.byte_io = min(self.options["byte_io_size"], self.size)
        ram = self.ram_seen()
        if recipe.isolation != "none" and self.size < 2 * ram:
            raise IolabError(
                f"the file ({human_size(self.size)}) must be at least twice the RAM the test sees "
                f"({human_size(ram)} with isolation {recipe.isolation}), as bonnie++ requires",
                context="--size", hint=f"use --size {-(-2 * ram // MiB)}M or a smaller --mem-limit")

    # ---- checks
    def ram_seen(self) -> int:
        """RAM the test can use for page cache: the limit in a memory cgroup or beside huge pages, else all."""
        if self.recipe.isolation in ("cgroup", "hugepages"):
            return self.mem_limit
        return sysinfo.ram_bytes() or self.mem_limit

    def prepare(self) -> None:
        for target in self.targets:
            if not target.test_file:
                raise IolabError("bonnie++ tests a file system: give a directory, a file or an emulated "
                                 "device with a file system", context=f"--target {target.spec}")
        self.run.update(bonnie={"file_size": self.size, "ram_seen": self.ram_seen(), "byte_io_size": self.byte_io,
                                "chunk_size": self.options["chunk_size"], "seeks": self.options["seeks"],
                                "seek_procs": self.options["seek_procs"], "seed": self.options["seed"]})

    # ---- the passes
    def measure(self) -> None:
        tests = [t for t in TESTS if t in self.steps]
        if self.byte_io == 0:
            tests = [t for t in tests if t not in ("putc", "getc")]
        for rep in self.passes(HEADLINE):
            for target in self.targets:  # interleaved: drift hits every target alike
                for test in tests:
                    self.started(self.steps[test].id)
                    frame = self.add(self.one(test, target, rep))
                    self.finished(self.steps[test].id, rep, frame)
                    value = frame["bw_mbps"].iloc[0] if len(frame) else None
                    self.values[(target.name, test)].append(value)
                self.remove_file(target)  # bonnie++ deletes its file at the end of a run
                if self.original_available():
                    self.started("bonnie++", test="original", rw="randrw")
                    self.finished("bonnie++", rep, self.add(self.original(target, rep)))

    def remove_file(self, target) -> None:
        try:
            os.unlink(target.test_file)
        except FileNotFoundError:
            pass

    def one(self, test: str, target, rep: int) -> pd.DataFrame:
        chunk, path = self.options["chunk_size"], target.test_file
        step = self.step(test, direct=0)
        if test in ("put_block", "get_block"):
            if test == "put_block":
                self.remove_file(target)  # bonnie++ writes the file from scratch (unlink, O_EXCL)
                options = {"rw": "write", "end_fsync": 1, "fallocate": "none"}
            else:
                self.ensure_file(target)
                options = {"rw": "read", "invalidate": 0}
            options.update(bs=chunk, ioengine="psync", direct=0, size=fio_size(self.size), iodepth=1, numjobs=1)
            frame = self.fio_step(step, target, rep, options)
            return self.bonnie_columns(frame, test, chunk)
        if test != "putc":
            self.ensure_file(target)
        spec = {"path": path, "chunk": chunk}
        if test in ("putc", "getc"):
            spec["bytes"] = self.byte_io
            step = self.step(test, direct=0, bs=1)
        if test == "seeks":
            spec.update(seeks=self.options["seeks"], procs=self.options["seek_procs"],
                        seed=self.options["seed"], sync=self.options["sync"])
        frame = self.python_step(step, target, rep, f"bonnie-{test}", spec, self.converter(test))
        return self.bonnie_columns(frame, test, chunk)

    def ensure_file(self, target) -> None:
        """The file the read tests need, written untimed when the recipe leaves out put_block."""
        try:
            if os.path.getsize(target.test_file) >= self.size:
                return
        except OSError:
            pass
        self.layout(target, self.size)

    def converter(self, test: str):
        def convert(result: dict) -> list[dict]:
            elapsed = result["elapsed_s"]
            row = {"direction": DIRECTIONS[test], "io_bytes": result["bytes"], "runtime_s": elapsed,
                   "cpu_usr_pct": 100 * result["usr_s"] / elapsed if elapsed else None,
                   "cpu_sys_pct": 100 * result["sys_s"] / elapsed if elapsed else None,
                   "lat_max_us": result["lat_max_s"] * 1e6, "bw_mbps": result["bytes"] / elapsed / 1e6,
                   "iodepth": 1, "numjobs": 1, "bs": 1 if test in ("putc", "getc") else result.get("chunk")}
            if test == "seeks":
                row.update(iops=result["seeks"] / elapsed, numjobs=result["procs"], bs=result["chunk"],
                           seeks=result["seeks"], seek_writes=result["writes"], seed=result["seed"])
            return [row]
        return convert

    def bonnie_columns(self, frame: pd.DataFrame, test: str, chunk: int) -> pd.DataFrame:
        """bonnie++'s statistics beside the measurement: K/sec, %CP, +++++."""
        frame = frame.copy()
        if test != "seeks" and "bs" in frame:
            frame["bs"] = frame["bs"].fillna(1 if test in ("putc", "getc") else chunk)
        # the per-char tests read and write byte_io_size bytes by design: not a "small file"
        frame["file_size"] = None if test in ("putc", "getc") else self.size
        frame["heading"] = TESTS[test]
        cpu = _column(frame, "cpu_usr_pct") + _column(frame, "cpu_sys_pct")
        runtime = _column(frame, "runtime_s")
        short = runtime < BONNIE_MIN_TIME
        frame["plus"] = [PLUS if s else None for s in short]
        frame["cpu_pct"] = cpu.where(~short).round(0)
        if test == "seeks":
            frame["kps"] = None
        else:
            frame["kps"] = (frame["io_bytes"].astype(float) / 1024 / runtime).where(~short).floordiv(1)
        return frame

    # ---- bonnie++ itself
    def original_argv(self, target) -> list[str]:
        directory = os.path.dirname(target.test_file)
        ram_mib = max(1, min(self.ram_seen(), self.size // 2) // MiB)
        byte_io_mib = self.byte_io // MiB
        argv = ["bonnie++", "-d", directory, "-s",
                f"{self.size // MiB}:{self.options['chunk_size']}:{self.options['seeks']}:{self.options['seek_procs']}",
                "-r", str(ram_mib), "-n", "0", "-m", safe_name(self.run.manifest.get("label") or "iolab"),
                "-z", str(self.options["seed"]), "-q",
                f"-f{byte_io_mib}" if byte_io_mib else "-f"]
        if self.options["sync"]:
            argv.append("-b")
        if os.geteuid() == 0:
            argv += ["-u", "root"]  # bonnie++ refuses to run as root without -u
        return argv

    def original(self, target, rep: int) -> pd.DataFrame:
        chunk = self.options["chunk_size"]
        if self.byte_io % MiB:
            log.warning("bonnie++ takes the per-char size in whole MiB: %d bytes ran as %d MiB",
                        self.byte_io, self.byte_io // MiB)

        def parse(stdout, stderr):
            frame = parse_bonnie_csv(stdout, chunk=chunk, byte_io=self.byte_io // MiB * MiB)
            frame["error"] = None
            return frame

        step = self.step("bonnie++", direct=0)
        frame = self.tool_step(step, target, rep, self.original_argv(target), parse, tool="bonnie++")
        frame["heading"] = frame["test"].map(TESTS)
        if "bonnie_version" in frame and frame["bonnie_version"].notna().any():
            self.originals[self.ORIGINAL]["version"] = f"bonnie++ {frame['bonnie_version'].dropna().iloc[0]}"
        if "file_size" in frame:
            frame["file_size"] = frame["file_size"].where(~frame["test"].isin(["putc", "getc"]))
        return frame

    def flag(self) -> None:
        from iolab.analysis.stats import flag_results
        table = self.run.results
        if table.empty:
            return
        isolated = self.run.manifest.get("isolation", {}).get("mode") in ("cgroup", "hugepages")
        flagged = flag_results(table, cpu_count=os.cpu_count(), min_runtime_s=BONNIE_MIN_TIME,
                               mem_limit=self.mem_limit if isolated else None,
                               by=("run_id", "target", "test", "direction", "tool"),
                               cov_threshold=0.05, buffered=True)
        flagged["flags"] = flagged["flags"].replace("", None)
        self.run.set_results(flagged)


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where missing (a failed step has no CPU or runtime)."""
    if name not in frame:
        return pd.Series(float("nan"), index=frame.index)
    return pd.to_numeric(frame[name], errors="coerce")
