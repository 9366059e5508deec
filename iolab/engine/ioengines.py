"""fio's I/O engines: the one each test runs with, whether the kernel offers io_uring, and when the
engine, not the device, set a figure.

* :func:`choose` applies ``iolab run --ioengine NAME`` (a name ``fio --enghelp`` lists) or the recipe's
  ``ioengine:`` preference (``prefer: io_uring``: qd-sweep, crystaldiskmark; ``depth_1: psync``: crystaldiskmark's
  Q1 rows, where an asynchronous engine only adds a system call per I/O) before a run directory exists. The decision, and on a fallback its reason, go into the manifest (``ioengine``).
* :func:`uring_facts` probes io_uring where fio will run it: fio lists the engine, the kernel's
  ``kernel.io_uring_disabled``, this process's seccomp mode, and a real ``io_uring_setup(2)`` under the
  run's confinement (bubblewrap drops every capability, so a kernel that allows io_uring to privileged
  processes only refuses it there). :func:`uring_verdict` decides on those facts alone.
* :func:`of_job_text` reads a job file as fio does (:mod:`iolab.engine.jobfile.reader`): each job's engine,
  O_DIRECT and iodepth. :func:`with_engines` puts the engines in the manifest's tests, :func:`mark` in each
  result row (column ``ioengine``), with the flag ``engine_sync`` where the engine submitted one I/O at a
  time although the job asked for more (:func:`submits_synchronously`): libaio on a file system in RAM or
  with buffered I/O (``io_submit`` then does the I/O before it returns), or a synchronous engine (psync...)
  at an iodepth above 1. Such a figure is the engine's ceiling, not the device's.
"""
from __future__ import annotations

import copy
import dataclasses
import errno
import functools
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from iolab.analysis.stats import split_flags
from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.engine import memlock as memlock_
from iolab.engine.jobfile import reader as jobreader
from iolab.engine.jobfile import rules as jobrules
from iolab.isolation import confine

log = logging.getLogger(__name__)

#: The flag of a row whose engine submitted synchronously for its target.
FLAG = "engine_sync"
#: fio's engines that do one I/O at a time per job (fio caps their iodepth at 1).
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "splice"})
#: fio's engine when a job names none (fio's HOWTO: psync on every system but Windows).
FIO_DEFAULT = "psync"
#: The asynchronous engine a recipe may prefer where the kernel offers it.
URING = "io_uring"
#: ``io_uring_setup(2)``'s number in the kernel's common system call table (x86-64, arm64 and the rest).
NR_IO_URING_SETUP = 425
PROC_DISABLED = "/proc/sys/kernel/io_uring_disabled"

#: Why io_uring is not used, by reason key (the report's sentences: ``engine.<key>`` in the locales).
REASONS = {
    "not_in_fio": "this fio ({fio}) has no io_uring engine",
    "disabled": "the kernel forbids io_uring (kernel.io_uring_disabled = 2)",
    "restricted": "the kernel allows io_uring only to processes with CAP_SYS_ADMIN or in kernel.io_uring_group "
                  "(kernel.io_uring_disabled = 1), and fio runs as neither",
    "restricted_confined": "the kernel allows io_uring only to processes with CAP_SYS_ADMIN or in "
                           "kernel.io_uring_group (kernel.io_uring_disabled = 1), and fio runs confined by "
                           "bubblewrap with every capability dropped",
    "no_kernel": "the kernel has no io_uring (io_uring_setup: {error})",
    "seccomp": "a seccomp filter refuses io_uring_setup ({error})",
    "confinement": "io_uring_setup is refused inside the run's confinement (bubblewrap): {error}",
    "setup_failed": "io_uring_setup failed: {error}",
    "untested": "io_uring_setup could not be tried: {error}",
}

_SETUP_PROBE = ("import ctypes, os, sys\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "params = ctypes.create_string_buffer(120)\n"
                f"fd = libc.syscall({NR_IO_URING_SETUP}, 1, params)\n"
                "sys.stdout.write(str(ctypes.get_errno() if fd < 0 else 0))\n"
                "os.close(fd) if fd >= 0 else None\n")


@functools.lru_cache(maxsize=1)
def engines() -> tuple[str, ...]:
    """The I/O engines this fio has (``fio --enghelp``)."""
    from iolab.engine import fio
    out = commands.run([fio.fio_binary(), "--enghelp"]).stdout
    return tuple(line.strip() for line in out.splitlines() if line.startswith(("\t", " ")) and line.strip())


def check(name: str) -> str:
    """``name`` if this fio has that engine, else an :class:`IolabError` naming it and fio's engines."""
    known = engines()
    if name not in known:
        from iolab.engine import fio
        raise IolabError(f"{fio.version()} has no I/O engine {name!r}", context="--ioengine",
                         hint="its engines (fio --enghelp): " + ", ".join(known))
    return name


# ------------------------------------------------------------------ io_uring: the facts and the verdict

@dataclasses.dataclass(frozen=True)
class UringFacts:
    """What decides whether fio can use io_uring here (:func:`uring_facts` gathers them)."""

    listed: bool                  # fio --enghelp lists io_uring
    disabled: int | None          # kernel.io_uring_disabled (None: no such setting, before Linux 6.6)
    seccomp: int | None           # this process's seccomp mode (0 none, 1 strict, 2 filter)
    setup_errno: int | None       # io_uring_setup(2) where fio runs: 0 it worked, None: not tried
    confined: bool                # it was tried inside the run's confinement
    fio: str = "fio"
    detail: str = ""              # why it could not be tried

    def describe(self) -> dict:
        return {**dataclasses.asdict(self), "setup_error": _errno_text(self.setup_errno)}


def _errno_text(number: int | None) -> str | None:
    if not number:
        return None
    return f"{errno.errorcode.get(number, number)} ({os.strerror(number)})"


def uring_verdict(facts: UringFacts) -> tuple[bool, str | None, str | None]:
    """``(usable, reason key, reason)``: whether fio can run io_uring jobs, and why not (English)."""
    error = _errno_text(facts.setup_errno)
    if not facts.listed:
        key = "not_in_fio"
    elif facts.disabled == 2:
        key = "disabled"
    elif facts.setup_errno == 0:
        return True, None, None
    elif facts.setup_errno is None:
        key, error = "untested", facts.detail or "no answer"
    elif facts.disabled == 1 and facts.setup_errno == errno.EPERM:
        key = "restricted_confined" if facts.confined else "restricted"
    elif facts.seccomp == 2 and facts.setup_errno in (errno.EPERM, errno.EACCES, errno.ENOSYS):
        key = "seccomp"
    elif facts.setup_errno == errno.ENOSYS:
        key = "no_kernel"
    elif facts.confined and facts.setup_errno in (errno.EPERM, errno.EACCES):
        key = "confinement"
    else:
        key = "setup_failed"
    return False, key, REASONS[key].format(fio=facts.fio, error=error)


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _seccomp_mode() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Seccomp:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _try_setup() -> tuple[int | None, bool, str]:
    """``io_uring_setup(2)`` tried as the run's processes will (confined where bubblewrap runs here):
    ``(errno or 0, confined, why it could not be tried)``."""
    confined = confine.unavailable() is None
    argv = confine.reader_argv([sys.executable, "-I", "-c", _SETUP_PROBE])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/", timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, confined, str(exc)
    if proc.returncode != 0 or not proc.stdout.strip().isdigit():
        words = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, confined, words
    return int(proc.stdout.strip()), confined, ""


@functools.lru_cache(maxsize=1)
def uring_facts() -> UringFacts:
    """The facts :func:`uring_verdict` decides on, gathered once per process."""
    from iolab.engine import fio
    setup, confined, detail = _try_setup()
    return UringFacts(listed=URING in engines(), disabled=_read_int(PROC_DISABLED), seccomp=_seccomp_mode(),
                      setup_errno=setup, confined=confined, fio=fio.version(), detail=detail)


# ------------------------------------------------------------------ the run's engine

def choose(recipe, requested: str | None = None, *, facts: UringFacts | None = None, memlock: int | None = None):
    """``(recipe, decision)``: a copy of the recipe with its tests' engine set by ``--ioengine`` or by its
    ``ioengine:`` preference where that applies, and the decision for the manifest (``ioengine``).
    ``facts``: io_uring's facts to decide on (default: :func:`uring_facts`, probed once); ``memlock``: the
    RLIMIT_MEMLOCK fio will run under (default: :func:`fio_memlock_limit`).

    Refused before anything is created: ``--ioengine`` on a recipe whose engine is not fio's job files
    or on a plain job file (it names its own engines), an engine fio does not have, and io_uring asked
    for on a kernel that refuses it (with the reason).
    """
    preference = dict(getattr(recipe, "ioengine", None) or {})
    recipe = copy.deepcopy(recipe)  # the one copy the choice changes; the caller's recipe stays as loaded
    if requested:
        _requestable(recipe, requested)
        check(requested)
        decision = {"by": "--ioengine", "requested": requested}
        if requested == URING:
            decision["io_uring"] = _uring_or_refuse(facts or uring_facts())
        _set_engine(recipe, requested, every_test=True)
        return recipe, {**decision, "chosen": requested}
    if recipe.engine != "fio" or recipe.jobfile is not None:
        return recipe, {"by": "recipe" if recipe.jobfile is None else "job file"}
    recipe_engine = recipe.fio.get("ioengine", FIO_DEFAULT)
    presets = preference.get("presets") or []
    if not preference.get("prefer") or (presets and recipe.preset not in presets):
        return recipe, {"by": "recipe", "chosen": recipe_engine}
    facts = facts or uring_facts()
    usable, key, reason = uring_verdict(facts)
    decision = {"by": "recipe", "prefer": preference["prefer"], "io_uring": facts.describe()}
    decision = _set_depth_1(recipe, preference.get("depth_1"), decision)
    if usable:
        _set_engine(recipe, URING, every_test=False)
        decision = _set_options(recipe, dict(preference.get("options") or {}), decision, memlock=memlock)
        return recipe, {**decision, "chosen": URING}
    log.warning("%s: %s not used: %s; the tests run with %s", recipe.name, URING, reason, recipe_engine)
    return recipe, {**decision, "chosen": recipe_engine, "fallback": {"reason_key": key, "reason": reason}}


def _set_depth_1(recipe, engine: str | None, decision: dict) -> dict:
    """The preference's ``depth_1`` engine on each test that keeps one I/O in flight (every iodepth 1) and names
    no engine of its own; the decision, returned, lists those tests (``depth_1``: engine and tests)."""
    tests = [t for t in recipe.tests if set(t.iodepth) == {1} and "ioengine" not in t.fio] if engine else []
    for test in tests:
        test.fio["ioengine"] = engine
    return {**decision, "depth_1": {"engine": engine, "tests": [t.name for t in tests]}} if tests else decision


def _set_options(recipe, options: dict, decision: dict, *, memlock: int | None = None) -> dict:
    """The preferred engine's ``options`` on each test that runs it (no engine of its own), then ``fixedbufs``
    only where it fits (:func:`_fit_fixedbufs`) the locked memory fio may use (``memlock``, default
    :func:`iolab.engine.memlock.fio_memlock_limit`). The decision, returned, records the options too."""
    if not options:
        return decision
    for test in _preferring(recipe):
        test.fio.update({k: v for k, v in options.items() if k not in test.fio})
    limit = memlock_.fio_memlock_limit() if memlock is None else memlock
    return _fit_fixedbufs(recipe, {**decision, "options": options}, limit, why="RLIMIT_MEMLOCK; as root, iolab's own bound")


def _preferring(recipe) -> list:
    """The tests that run the recipe's preferred engine: those naming no engine of their own."""
    return [test for test in recipe.tests if "ioengine" not in test.fio]


def _fit_fixedbufs(recipe, decision: dict, limit: int, *, why: str) -> dict:
    """``fixedbufs`` kept on each preferring test whose registered buffers fit ``limit`` (:func:`memlock.fits`:
    io_uring counts them against RLIMIT_MEMLOCK and fails the job with ENOMEM past it, fio's own alignment on
    top: 8 MiB of buffers failed under an 8 MiB limit), turned off on the others. The decision, returned, lists
    the tests that register buffers (``fixedbufs_tests``) and those that went without (``without_fixedbufs``:
    the tests, the limit, ``why`` that limit)."""
    pinning, without = [], list((decision.get("without_fixedbufs") or {}).get("tests", []))
    for test in _preferring(recipe):
        if not memlock_.registers_buffers(test.fio.get("fixedbufs", 0)):
            continue
        sizes = {"bs": test.bs or "4k", "iodepth": max(test.iodepth), "numjobs": max(test.numjobs),
                 **{k: test.fio[k] for k in ("bsrange", "bssplit") if k in test.fio}}
        pinned = memlock_.pinned_bytes(sizes, f"{recipe.name}: {test.name}")
        if memlock_.fits(pinned, limit):
            pinning.append(test.name)
        else:
            test.fio["fixedbufs"] = 0
            without.append({"test": test.name, "pinned_bytes": pinned})
    decision = {k: v for k, v in decision.items() if k not in ("fixedbufs_tests", "without_fixedbufs")}
    if pinning:
        decision["fixedbufs_tests"] = pinning
    if without:
        decision["without_fixedbufs"] = {
            "memlock_bytes": limit, "tests": without,
            "reason": f"its buffers would pin more than {memlock_.MEMLOCK_SHARE:.0%} of the {limit} bytes fio may lock "
                      f"({why}), which fio's alignment and other io_uring users share"}
        log.info("%s: fixedbufs left out of %s: fio may lock %d bytes", recipe.name,
                 ", ".join(w["test"] for w in without), limit)
    return decision


def confine_jobs(run, recipe, confinement, jobs) -> tuple:
    """``(confinement, rewrite)`` once a run's job files ``jobs`` (paths) are written: the confinement fio runs
    under (:func:`iolab.engine.memlock.confinement_for`), the manifest's ``confinement`` entry updated when it
    keeps CAP_IPC_LOCK or was refused it (``lock_memory_refused``). When refused, the tests' ``fixedbufs`` are
    fitted again to RLIMIT_MEMLOCK, which fio then runs under, and ``rewrite`` says the job files must be
    written again (the manifest's ``ioengine`` updated) because a test lost its registered buffers."""
    decision = run.manifest.get("ioengine")
    kept, refused = memlock_.confinement_for(confinement, decision, jobs)
    if kept is not confinement or refused:
        run.update(confinement={**kept.describe(), **({"lock_memory_refused": refused} if refused else {})})
    if not refused:
        return kept, False
    refitted = _fit_fixedbufs(recipe, decision, memlock_.fio_rlimit_memlock(),
                              why="RLIMIT_MEMLOCK: CAP_IPC_LOCK was refused")
    rewrite = refitted.get("fixedbufs_tests") != decision.get("fixedbufs_tests")
    if rewrite:
        run.update(ioengine=refitted)
    return kept, rewrite


def _requestable(recipe, requested: str) -> None:
    if recipe.jobfile is not None:
        raise IolabError("a plain fio job file runs as is: set ioengine in the job file", context="--ioengine",
                         hint=f"drop --ioengine {requested}")
    if recipe.engine != "fio":
        raise IolabError(f"recipe {recipe.name} runs its tests through its own engine ({recipe.engine}), which "
                         "sets how they do their I/O", context="--ioengine")


def _uring_or_refuse(facts: UringFacts) -> dict:
    usable, _, reason = uring_verdict(facts)
    if not usable:
        raise IolabError(f"io_uring cannot be used here: {reason}", context="--ioengine",
                         hint="use --ioengine libaio, or no --ioengine (the recipe's engine)")
    return facts.describe()


def _set_engine(recipe, name: str, *, every_test: bool) -> None:
    """The recipe's tests run ``name``; a test naming its own engine keeps it unless ``every_test``."""
    recipe.fio["ioengine"] = name
    if every_test:
        for test in recipe.tests:
            test.fio.pop("ioengine", None)


# ------------------------------------------------------------------ what each job ran with

@dataclasses.dataclass(frozen=True)
class JobEngine:
    """One job's engine, whether it used O_DIRECT, and the iodepth it asked for."""

    engine: str
    direct: bool
    iodepth: int


def _job_engine(options: list, source: str) -> JobEngine:
    """A job's engine from its options, ``(canonical name, value)`` in the order fio applies them."""
    last = dict(options)  # fio keeps the last value of an option
    try:
        iodepth = int(str(last.get("iodepth", 1)).strip())
    except ValueError:
        iodepth = 1
    return JobEngine(engine=str(last.get("ioengine") or FIO_DEFAULT).strip(),
                     direct=jobrules.is_direct(options, source=source), iodepth=iodepth)


@functools.lru_cache(maxsize=256)
def of_job_text(text: str, source: str = "job file") -> dict:
    """``{job name: JobEngine}`` of a job file, as fio reads it (:func:`iolab.engine.jobfile.reader.job_options`)."""
    return {name: _job_engine(options, source) for name, options in jobreader.job_options(text, source).items()}


def _read(path) -> dict:
    """:func:`of_job_text` of the job file at ``path``; ``{}`` (logged) where fio cannot read it: the job gate
    has let it through, so the run goes on, its engine unrecorded."""
    try:
        return of_job_text(Path(path).read_text(), str(path))
    except (IolabError, OSError) as exc:
        log.warning("the I/O engine of %s is not recorded: %s", path, exc)
        return {}


def with_engines(tests: list, jobs: dict) -> list:
    """The manifest's ``tests`` with the engine each one runs (``ioengine``: a name, or ``{job: engine}`` when
    its jobs differ), read from its job files ``jobs`` (``{(step id, target name): path}``)."""
    by_step: dict = {}
    for (step_id, _target), path in jobs.items():
        engines_ = {job: e.engine for job, e in _read(path).items()}
        by_step.setdefault(step_id, {}).update(engines_)
    recorded = []
    for test in tests:
        found = by_step.get(test.get("name"))
        if found:
            names = set(found.values())
            test = {**test, "ioengine": names.pop() if len(names) == 1 else dict(found)}
        recorded.append(test)
    return recorded


def submits_synchronously(job: JobEngine, *, ram_backed: bool) -> str | None:
    """Why ``job``'s engine, not the target, set its figure (None: it did not): ``libaio_ram`` (libaio on a
    file system in RAM: each I/O done inside io_submit, and at any depth its two system calls per I/O cost
    more than the I/O: measured 0.54 of psync's 4 KiB QD1 rate on tmpfs), ``sync_engine`` (psync and the
    like at an iodepth above 1), ``libaio_buffered`` (libaio without O_DIRECT at an iodepth above 1)."""
    if job.engine == "libaio" and ram_backed:
        return "libaio_ram"
    if job.iodepth <= 1:
        return None
    if job.engine in SYNC_ENGINES:
        return "sync_engine"
    if job.engine == "libaio" and not job.direct:
        return "libaio_buffered"
    return None


def mark(frame: pd.DataFrame, jobfile, *, ram_backed: bool) -> pd.DataFrame:
    """``frame`` (one pass's rows) with each row's ``ioengine`` and, where :func:`submits_synchronously`,
    the ``engine_sync`` flag."""
    if frame.empty or "job" not in frame:
        return frame
    jobs = _read(jobfile)
    frame = frame.copy()
    frame["ioengine"] = frame["job"].map(lambda name: jobs[name].engine if name in jobs else None)
    synchronous = frame["job"].map(lambda name: name in jobs and bool(submits_synchronously(jobs[name],
                                                                                              ram_backed=ram_backed)))
    if synchronous.any():
        flags = frame["flags"] if "flags" in frame else pd.Series(None, index=frame.index, dtype=object)
        frame["flags"] = [";".join(dict.fromkeys(split_flags(flags.loc[i]) + ([FLAG] if synchronous.loc[i] else [])))
                          or None for i in frame.index]
    return frame
