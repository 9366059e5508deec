"""The original tools beside their equivalents: bonnie++ and hdparm, in iolab's schema.

Two parts:

* **Parsers** of the tools' own output into tidy rows with the result columns
  (:func:`parse_bonnie_csv`, :func:`parse_hdparm`), tested against output
  captured from the real tools (``tests/fixtures/originals``).
* :class:`ClassicEngine`, the base of the ``bonnie``, ``hdparm`` and
  ``gnomedisks`` engines: it opens the targets and the sandbox like
  :class:`iolab.engine.runner.FioEngine` (and reuses its fio step, annotation, storing and
  progress), and adds steps measured by a Python loop
  (:mod:`iolab.engine.directio`, run inside the sandbox) and steps that run the
  original tool (``--with-original``). Every row says which ``tool`` made it:
  ``fio``, ``python``, ``bonnie++`` or ``hdparm``, so a report can set the
  equivalent beside the original.

Units kept as the tools print them, each in its own column, next to the
contract's decimal ``bw_mbps``:

* ``kps``: bonnie++'s "K/sec" (KiB per second, an integer as bonnie++ prints
  it), ``cpu_pct``: its "%CP", ``plus``: ``"+++++"`` where bonnie++ prints
  that instead of a number (the test took under 0.5 s);
* ``hdparm_mb_sec``: hdparm's "MB/sec", which is MiB/s (hdparm divides by
  2^20); a "kB/sec" figure is converted to the same unit.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections import defaultdict

import pandas as pd

from iolab.core import commands
from iolab.engine import directio, fio
from iolab.engine.jobfile import rules as jobrules
from iolab.core.errors import IolabError
from iolab.engine.recipes import Step
from iolab.engine.fio.outcome import empty_frame
from iolab.engine.runner import FioEngine, relpath
from iolab.engine.store import utcnow
from iolab.core.units import fio_size

log = logging.getLogger(__name__)

MiB = 1024 * 1024
#: bonnie++'s MinTime: a test that took less prints "+++++".
BONNIE_MIN_TIME = 0.5
PLUS = "+++++"
#: bonnie++ CSV format versions this parser knows (bonnie++ 1.98 and 2.00 write "1.98").
BONNIE_CSV_VERSIONS = ("1.98",)
#: The file I/O tests of bonnie++, in its order: (CSV name, direction, bonnie++'s heading).
BONNIE_TESTS = (
    ("putc", "write", "Sequential Output Per-Chr"),
    ("put_block", "write", "Sequential Output Block"),
    ("rewrite", "write", "Sequential Output Rewrite"),
    ("getc", "read", "Sequential Input Per-Chr"),
    ("get_block", "read", "Sequential Input Block"),
    ("seeks", "read", "Random Seeks"),
)
BONNIE_DEFAULT_CHUNK = 8192
#: Columns this module adds to the result schema.
COLUMNS = ("tool", "kps", "cpu_pct", "plus", "hdparm_mb_sec", "file_size", "seed")


# --------------------------------------------------------------------------- bonnie++

def _bonnie_size(text: str, context: str) -> int:
    """bonnie++'s size cell: ``128M``, ``2G`` (MiB, GiB)."""
    match = re.fullmatch(r"(\d+)([MGT])", text.strip())
    if not match:
        raise IolabError(f"not a bonnie++ size: {text!r}", context=context)
    return int(match.group(1)) * {"M": MiB, "G": 1024 * MiB, "T": 1024**2 * MiB}[match.group(2)]


def bonnie_latency_us(text: str) -> float | None:
    """bonnie++'s latency cell (``22520us``, ``107ms``, ``2s``) in microseconds; '' -> None."""
    text = (text or "").strip()
    if not text:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(us|ms|s)", text)
    if not match:
        raise IolabError(f"not a bonnie++ latency: {text!r}", context="bonnie++ CSV")
    return float(match.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[match.group(2)]


def _number(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("+"):
        return None
    return float(text)


def parse_bonnie_csv(text: str, *, chunk: int | None = None, byte_io: int | None = None) -> pd.DataFrame:
    """Rows from bonnie++'s CSV lines (format 1.98, written by bonnie++ 1.98 and 2.00).

    ``text`` may hold the human-readable table, a ``format_version,...``
    header (``-x N``) and one CSV line per run; every CSV line gives six rows
    (putc, put_block, rewrite, getc, get_block, seeks) with ``kps`` (K/sec =
    KiB/s), ``cpu_pct`` (%CP), ``plus`` ("+++++" when the test took under
    0.5 s), ``iops`` (seeks/s for ``seeks``), ``lat_max_us`` (bonnie++'s
    latency: the worst single operation), the decimal ``bw_mbps`` and
    ``runtime_s`` derived from them. A test bonnie++ skipped (``-f``: no
    per-char tests) gives no row.

    bonnie++ 2.00a leaves the chunk-size cell empty even when ``-s
    size:chunk`` changed it, so ``chunk`` (bytes) tells the parser the chunk
    that was asked for; ``byte_io`` is the per-char size in bytes (``-f``,
    default 3 MiB; it is not in the CSV either).
    """
    rows = []
    lines = [line for line in text.splitlines() if re.match(r"^\d+\.\d+,", line)]
    if not lines:
        raise IolabError("no bonnie++ CSV line in the output", context="bonnie++",
                         hint="bonnie++ prints one CSV line per run at the end of its output")
    for number, line in enumerate(lines, start=1):
        cells = line.split(",")
        context = f"bonnie++ CSV line {number}"
        if cells[0] not in BONNIE_CSV_VERSIONS:
            raise IolabError(f"CSV format {cells[0]} is not supported (iolab reads format "
                             f"{', '.join(BONNIE_CSV_VERSIONS)}: bonnie++ 1.98 and 2.00)", context=context)
        if len(cells) < 44:
            raise IolabError(f"{len(cells)} cells, expected at least 44", context=context)
        file_size = _bonnie_size(cells[5], context)
        io_chunk = int(cells[6]) if cells[6].strip().isdigit() else (chunk or BONNIE_DEFAULT_CHUNK)
        seeks, procs = int(cells[7]), int(cells[8])
        per_char = byte_io if byte_io is not None else 3 * MiB
        for index, (test, direction, heading) in enumerate(BONNIE_TESTS):
            value, cpu = cells[9 + 2 * index].strip(), cells[10 + 2 * index].strip()
            if not value:
                continue  # test not run (-f: no per-char tests)
            plus = PLUS if value.startswith("+") else None
            rate = _number(value)
            row = {"test": test, "direction": direction, "heading": heading, "tool": "bonnie++",
                   "bonnie_version": cells[1], "name": cells[2], "concurrency": int(cells[3]),
                   "seed": int(cells[4]) if cells[4].strip().lstrip("-").isdigit() else None,
                   "file_size": file_size, "chunk": io_chunk, "seeks": seeks, "seek_procs": procs,
                   "plus": plus, "cpu_pct": _number(cpu), "lat_max_us": bonnie_latency_us(cells[38 + index]),
                   "iodepth": 1, "numjobs": procs if test == "seeks" else 1, "line": number, "error": None}
            if test == "seeks":
                row.update(bs=io_chunk, iops=rate, kps=None, io_bytes=seeks * io_chunk,
                           runtime_s=seeks / rate if rate else None,
                           bw_mbps=rate * io_chunk / 1e6 if rate else None)
            else:
                nbytes = per_char if test in ("putc", "getc") else file_size
                row.update(bs=1 if test in ("putc", "getc") else io_chunk, kps=rate, io_bytes=nbytes,
                           bw_mbps=rate * 1024 / 1e6 if rate else None,
                           runtime_s=nbytes / 1024 / rate if rate else None)
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- hdparm

_HDPARM_TIMING = re.compile(
    r"Timing (?P<what>O_DIRECT cached|O_DIRECT disk|cached|buffer-cache|buffered disk) reads"
    r"(?: \(offset (?P<offset>\d+) GB\))?:[ \t]*"
    r"(?:(?P<mb>\d+) MB in +(?P<seconds>[\d.]+) seconds = +(?P<rate>[\d.]+) (?P<unit>[kM])B/sec)?")
_HDPARM_DEVICE = re.compile(r"^(?P<device>\S.*):$")


def parse_hdparm(text: str, stderr: str = "") -> pd.DataFrame:
    """Rows from hdparm's ``-T`` / ``-t`` output (one per timing line, per device).

    hdparm prints ``Timing cached reads: 12850 MB in 1.98 seconds = 6485.15
    MB/sec`` where "MB" is MiB; ``hdparm_mb_sec`` keeps that figure
    (``kB/sec`` results converted to the same unit), ``bw_mbps`` is decimal
    MB/s, ``io_bytes`` = MB x 2^20, ``runtime_s`` the seconds printed. Tests are
    ``cached-reads`` (-T, "buffer-cache" in old versions) and ``disk-reads``
    (-t); ``direct`` is 1 for ``--direct`` ("O_DIRECT"). A timing line without
    a result (hdparm failed: a regular file, a device too small) gives a row
    whose ``error`` holds hdparm's message from ``stderr``.
    """
    rows, device = [], None
    problems = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    for line in text.splitlines():
        header = _HDPARM_DEVICE.match(line)
        if header and "Timing" not in line:
            device = header.group("device")
            continue
        match = _HDPARM_TIMING.search(line)
        if not match:
            continue
        what = match.group("what")
        row = {"device": device, "tool": "hdparm",
               "test": "cached-reads" if "cached" in what or "cache" in what else "disk-reads",
               "direction": "read", "direct": int(what.startswith("O_DIRECT")), "bs": 2 * MiB, "iodepth": 1,
               "numjobs": 1, "offset_gb": int(match.group("offset")) if match.group("offset") else None,
               "error": None}
        if match.group("mb") is None:
            row["error"] = "hdparm: " + ("; ".join(problems) or "no result on the timing line")
        else:
            mib, seconds, rate = int(match.group("mb")), float(match.group("seconds")), float(match.group("rate"))
            mib_s = rate / 1024 if match.group("unit") == "k" else rate
            row.update(hdparm_mb_sec=mib_s, bw_mbps=mib_s * MiB / 1e6, io_bytes=mib * MiB, runtime_s=seconds,
                       iops=mib_s / 2)
        rows.append(row)
    if not rows:
        raise IolabError("no timing line in hdparm's output", context="hdparm",
                         hint="; ".join(problems) or "was -T or -t given?")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- options

@dataclasses.dataclass
class Option:
    """One engine option of a recipe: its default and how it is checked."""

    default: object
    kind: str          # int | size | bool | seconds | int_or_none
    minimum: float | None = None
    help: str = ""


def check_options(given: dict, schema: dict, source: str) -> dict:
    """Validate a recipe's ``options`` mapping; errors name the file and the field."""
    from iolab.core.units import parse_seconds, parse_size
    unknown = sorted(set(given) - set(schema))
    if unknown:
        raise IolabError(f"unknown option {unknown[0]!r} (known: {', '.join(sorted(schema))})",
                         context=f"{source}: options")
    out = {}
    for name, option in schema.items():
        value = given.get(name, option.default)
        ctx = f"{source}: options.{name}"
        if value is None:
            out[name] = None
            continue
        if option.kind == "bool":
            if not isinstance(value, bool):
                raise IolabError(f"must be true or false, got {value!r}", context=ctx)
        elif option.kind == "size":
            value = 0 if value == 0 else parse_size(value, context=ctx)
        elif option.kind == "seconds":
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise IolabError(f"not a duration: {value!r}", context=ctx)
            value = 0.0 if value in (0, "0") else parse_seconds(value, context=ctx)
        elif option.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise IolabError(f"must be a whole number, got {value!r}", context=ctx)
        if option.minimum is not None and value < option.minimum:
            raise IolabError(f"must be at least {option.minimum:g}, got {value!r}", context=ctx)
        out[name] = value
    return out


# --------------------------------------------------------------------------- engine base

class ClassicEngine(FioEngine):
    """Shared machinery of the classic-tool engines (bonnie, hdparm, gnomedisks).

    Subclasses set :attr:`OPTIONS` (the recipe's ``options`` schema),
    :attr:`TESTS` (test name -> description; the recipe's tests must be among
    them), :attr:`TARGET_KINDS` and :attr:`BUFFERED`, and implement
    :meth:`measure`. Everything else -- targets, sandbox, manifest records,
    adaptive passes, fio / Python / original-tool steps -- is here.
    """

    OPTIONS: dict = {}
    TESTS: dict = {}
    TARGET_KINDS = ("dir", "file", "block", "emulated")
    BUFFERED = True
    #: the original tool (bonnie++, hdparm) or None
    ORIGINAL: str | None = None

    def __init__(self, recipe, targets, run_, *, mem_limit, progress, scratch_dir):
        super().__init__(recipe, targets, run_, mem_limit=mem_limit, progress=progress, scratch_dir=scratch_dir)
        source = recipe.source or recipe.name
        self.options = check_options(recipe.options or {}, self.OPTIONS, source)
        self.steps = {}
        for index, step in enumerate(recipe.steps()):
            if step.test not in self.TESTS:
                raise IolabError(f"unknown test {step.test!r} for engine {recipe.engine} "
                                 f"(known: {', '.join(self.TESTS)})", context=f"{source}: tests[{index}]")
            self.steps[step.test] = step
        for target in targets:
            if target.kind not in self.TARGET_KINDS:
                raise IolabError(f"{recipe.engine} cannot test a {target.kind} target "
                                 f"(it takes: {', '.join(self.TARGET_KINDS)})", context=f"--target {target.spec}")
        self.with_original = bool(run_.manifest.get("options", {}).get("with_original"))
        self.values: dict = defaultdict(list)   # (target, test) -> headline values, for adaptive passes
        self.errors: dict = defaultdict(list)   # test -> error messages
        self.originals: dict = {}
        self.sandbox = None
        self.buffered = self.BUFFERED

    # ---- the run
    def execute(self) -> None:
        self.check_before_open()
        with self.session(buffered=self.buffered, direct_ok=not self.buffered) as sandbox:
            self.sandbox = sandbox
            self.run.update(isolation=self.sandbox.describe(), engine_options=self.options)
            self.prepare()
            try:
                self.measure()
            finally:
                self.run.update(isolation=self.sandbox.describe(), originals=self.originals or None)
        self.flag()

    def check_before_open(self) -> None:
        """Checks that need no open target (e.g. block devices a write test would touch)."""

    def prepare(self) -> None:
        """Checks and preparation once targets and sandbox exist (the engine's own; no job files up front:
        each fio step writes and checks its job file when it first runs, :meth:`fio_step`)."""

    def measure(self) -> None:
        raise NotImplementedError

    # ---- passes and manifest records
    def passes(self, headline_tests=()):
        """Repetition numbers: ``repeat`` passes, more while a headline value's CoV is high."""
        from iolab.analysis.stats import needs_more
        min_n = self.recipe.repeat
        max_n = max(min_n, self.recipe.max_repeat)
        cov_target = self.recipe.cov_target
        rep = 0
        while rep < max_n:
            watched = [v for (_, test), v in self.values.items() if test in headline_tests]
            if rep >= min_n and not any(needs_more(v, cov_target=cov_target, min_n=min_n, max_n=max_n)
                                        for v in watched):
                break
            if rep and any(self.errors.values()):
                break  # a failing test does not get better by repeating it
            rep += 1
            yield rep

    def record(self, name: str, *, rw: str = "", test: str | None = None) -> dict:
        """The manifest's record of test ``name`` (made when the recipe did not list it)."""
        for entry in self.run.manifest["tests"]:
            if entry["name"] == name:
                return entry
        entry = {"name": name, "test": test or name, "rw": rw, "status": "pending", "reps": 0}
        self.run.manifest["tests"].append(entry)
        return entry

    def started(self, name: str, **kwargs) -> None:
        entry = self.record(name, **kwargs)
        if entry["status"] == "pending":
            entry.update(status="running", started=utcnow())
            self.run.save_manifest()

    def finished(self, name: str, rep: int, frame: pd.DataFrame | None) -> None:
        entry = self.record(name)
        if frame is not None and "error" in frame:
            self.errors[name] += [e for e in frame["error"].dropna().unique() if e]
        entry.update(reps=rep, status="failed" if self.errors[name] else "completed",
                     error="; ".join(dict.fromkeys(self.errors[name])) or None, ended=utcnow())
        self.run.save_manifest()

    def add(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.store(frame)
        return frame

    # ---- steps
    def step(self, test: str, **options) -> Step:
        """The recipe's step for ``test`` (a made-up one for tests the engine adds)."""
        base = self.steps.get(test) or Step(id=test, test=test, rw=options.get("rw", ""), options={})
        merged = {**base.options, **options}
        return dataclasses.replace(base, options=merged, direct=jobrules.is_direct(merged, source=f"test {test}"))

    def fio_step(self, step: Step, target, rep: int, options: dict) -> pd.DataFrame:
        """Run one fio job (written to ``jobs/`` and checked with ``fio --parse-only`` once) by :meth:`measure_step`."""
        rel = relpath("jobs", step.id, target, self.multi, ".fio")
        path = self.run.path / rel
        if not path.exists():
            global_options = {"filename": target.filename}
            if target.emulated is not None:  # what the device needs for its declared limits to hold
                global_options.update(target.emulated.fio_options)
            path = self.run.write(rel, fio.render_job(step.id, options, global_options))
            fio.check_job(path)
            argv = fio.command(path, output_format=self.recipe.output_format)  # one job, numjobs=1
            self.run.manifest.setdefault("commands", {})[rel] = argv
            self.run.save_manifest()
        frame = self.measure_step(self.sandbox, dataclasses.replace(step, options={**step.options, **options}),
                                  target, rep, path)
        frame["tool"] = "fio"
        return frame

    def _measured(self, argv: list[str], target, rel: str, label: str, expected: float | None = None):
        """Run ``argv`` in the sandbox as a test (caches dropped, device counted), stdout into ``rel``.

        Returns the process, its stderr, the device's byte counts, the
        sandbox's evidence and the wall time: what :meth:`annotate` takes.
        """
        raw = self.run.path / rel
        raw.parent.mkdir(parents=True, exist_ok=True)
        self.run.manifest.setdefault("commands", {})[rel] = argv
        if os.sep not in argv[0]:  # bonnie++, hdparm live in /usr/sbin: not on a normal user's PATH
            argv = [commands.find(argv[0]) or argv[0], *argv[1:]]
        self.sandbox.prepare_test()
        return self.measure_process(self.sandbox, argv, target, raw, label, expected)

    def _label(self, test: str, target, rep: int, tool: str) -> str:
        return f"{test}" + (f" @{target.name}" if self.multi else "") + f" [{tool}] {rep}/{self.recipe.repeat}"

    def _rows(self, frame: pd.DataFrame, step: Step, target, rep: int, measured, tool: str) -> pd.DataFrame:
        """Annotate like fio's rows; rows that name their own test keep it."""
        _, _, device, evidence, elapsed = measured
        tests = frame["test"].tolist() if "test" in frame else None
        frame = self.annotate(frame, step, target, rep, device, evidence, elapsed, self.sandbox)
        if tests is not None:
            frame["test"] = tests
        frame["tool"] = tool
        return frame

    def python_step(self, step: Step, target, rep: int, op: str, spec: dict, convert) -> pd.DataFrame:
        """Run a :mod:`iolab.engine.directio` loop inside the sandbox; ``convert(result) -> rows``."""
        rel = relpath("raw", step.id, target, self.multi, f"-{rep}.json")
        measured = self._measured(directio.command(op, spec), target, rel, self._label(step.id, target, rep, "python"))
        proc, stderr = measured[0], measured[1].strip()
        try:
            result = json.loads((self.run.path / rel).read_text())
        except ValueError:
            result = {"error": f"the Python worker printed no result (exit {proc.returncode})"
                               + (f": {stderr.splitlines()[-1]}" if stderr else "")}
        if "error" in result or proc.returncode != 0:
            message = result.get("error") or f"the Python worker exited with {proc.returncode}"
            frame = empty_frame(step.id, f"{op}: {message}")
        else:
            frame = pd.DataFrame(convert(result))
            if "error" not in frame:
                frame["error"] = None
        return self._rows(frame, step, target, rep, measured, "python")

    def tool_step(self, step: Step, target, rep: int, argv: list[str], parse, *, tool: str,
                  expected: float | None = None) -> pd.DataFrame:
        """Run the original tool inside the sandbox; ``parse(stdout, stderr) -> DataFrame``."""
        rel = relpath("raw", f"{step.id}-{tool}", target, self.multi, f"-{rep}.txt")
        measured = self._measured(argv, target, rel, self._label(step.id, target, rep, tool), expected)
        proc, stderr = measured[0], measured[1]
        raw = self.run.path / rel
        if stderr.strip():
            raw.with_suffix(".err").write_text(stderr)
        try:
            frame = parse(raw.read_text(errors="replace"), stderr)
            if proc.returncode != 0:
                frame["error"] = frame["error"].where(frame["error"].notna(), f"{tool} exited with {proc.returncode}")
        except IolabError as exc:
            detail = [line for line in stderr.splitlines() if line.strip()]
            frame = empty_frame(step.id, f"{tool} exited with {proc.returncode}: {detail[0] if detail else exc}")
            frame["test"] = step.test
        return self._rows(frame, step, target, rep, measured, tool)

    def original_available(self) -> bool:
        """Whether ``--with-original`` applies and the tool is installed (noted in the manifest)."""
        if not self.with_original or self.ORIGINAL is None:
            return False
        if self.ORIGINAL in self.originals:
            return self.originals[self.ORIGINAL].get("ran", False)
        path = commands.find(self.ORIGINAL)  # bonnie++, hdparm: in /usr/sbin, also for a normal user
        if path is None:
            from iolab.core.commands import INSTALL_HINTS
            self.originals[self.ORIGINAL] = {"ran": False, "reason": f"{self.ORIGINAL} is not installed; "
                                                                      f"{INSTALL_HINTS.get(self.ORIGINAL, '')}"}
            log.warning("--with-original: %s", self.originals[self.ORIGINAL]["reason"])
            return False
        self.originals[self.ORIGINAL] = {"ran": True, "path": path, "version": self.original_version(path)}
        return True

    def original_version(self, path: str) -> str | None:
        return None

    # ---- helpers shared by the engines
    def layout(self, target, size: int | None) -> None:
        """Write the test file (or an emulated device) once, sequentially, untimed, inside the sandbox."""
        step = self.step("_layout", rw="write", direct=1)
        options = {"rw": "write", "bs": "1m", "ioengine": "psync", "direct": 1, "end_fsync": 1}
        if size:
            options["size"] = fio_size(size)
        frame = self.fio_step(step, target, 1, options)
        errors = [e for e in frame["error"].dropna() if e]
        if errors:
            raise IolabError(f"could not lay out the test data: {errors[0]}", context=target.spec)
        self.run.manifest.setdefault("layout", {})[target.name] = {
            "bytes": int(frame["io_bytes"].sum()), "seconds": float(frame["runtime_s"].max() or 0)}
        self.run.save_manifest()

    def emptied(self, frame: pd.DataFrame, flag: str) -> pd.DataFrame:
        """Drop ``flag`` from the rows' flags (e.g. cache_suspect where caching is the point)."""
        from iolab.analysis.stats import split_flags
        frame["flags"] = [";".join(f for f in split_flags(v) if f != flag) or None for v in frame["flags"]]
        return frame
