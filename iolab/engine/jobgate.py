"""The safety gate for everything fio will open.

Before a run, iolab reads every job it will hand to fio the way fio reads it
and lists each file, device and directory a job touches with what the job does
to it (:func:`accesses`). :func:`check` then refuses, naming the job, the
option and the path, unless the user allowed it on purpose:

=====================================  ==========================================
what the gate checks                   how to pass it on purpose
=====================================  ==========================================
a path outside the named targets       ``--allow-path PATH`` (repeatable)
(``filename``, ``directory``,
``filename_format``, ``opendir``,
iolog and log files, ``replay_redirect``)
a block device written or trimmed      the device rules of :mod:`iolab.devices.safety`
                                       (mounted, swap, held, root chain: never;
                                       a signature: ``--confirm DEVICE``)
an existing regular file written       ``--confirm FILE`` (files iolab creates
that iolab did not create              itself need none)
a file backing a loop device           treated like that device, and it needs
                                       ``--confirm FILE`` as well; a swap file
                                       is never written
``allow_mounted_write``                never
``exec_prerun``/``exec_postrun``,      ``--allow-exec`` (checked by
``ioengine=exec``, external engines,   :mod:`iolab.engine.jobcheck`)
``trigger*`` options
``include`` lines                      never (inline the file: iolab checks
                                       only text it sees)
=====================================  ==========================================

"Writes" means any write, trim or destructive side effect: ``rw``/``readwrite``
with any modifier (``randwrite:8``) whose mode fio describes as writing or
trimming, ``verify`` trims (``trim_percentage``), ``zonemode=zbd`` (zone
resets), ``unlink``, file-creating/deleting engines, and iolab's own layout
pass over a ``--target`` file smaller than the test.

Option names are fio's: aliases (``readwrite`` for ``rw``, ``fill_fs`` for
``fill_device``) are mapped to fio's canonical names with fio's own option
table (``fio --cmdhelp``), never a hand-written list of spellings. The job-file
syntax follows fio: ``[global]`` sections apply to the jobs after them, a
later value replaces an earlier one, values end at ``;`` or ``#``, ``${VAR}``
is taken from the environment, and ``directory`` is prepended even to an
absolute ``filename`` (as fio does).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import stat
from typing import Iterable

from iolab.core.errors import IolabError

#: Options whose value names files fio opens (besides filename/directory/opendir).
LOG_OPTIONS = ("write_iolog", "write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
#: Engines that create or delete files instead of reading/writing blocks.
FILE_ENGINES = ("filecreate", "filedelete", "dircreate", "dirdelete")
#: filename_format's default (fio's).
DEFAULT_FORMAT = "$jobname.$jobnum.$filenum"
#: At most this many generated file names are checked per job.
MAX_NAMES = 4096


@dataclasses.dataclass(frozen=True)
class Access:
    """One path a job opens, and what it does there.

    ``path`` is absolute (``os.path.abspath``, symlinks not resolved);
    ``kind`` is ``file``, ``device`` (a block device) or ``directory``, as
    this machine sees the path (one that does not exist is a ``file``);
    ``option`` the fio option that named it (``filename``, ``directory``,
    ``filename_format``, ``opendir``, ``write_iolog``, ..., or ``layout``
    for iolab's own layout pass); ``why`` says what makes it write or trim
    (``rw=randwrite:8``), empty for reads.
    """

    job: str
    option: str
    path: str
    kind: str
    writes: bool
    trims: bool = False
    why: str = ""

    @property
    def destructive(self) -> bool:
        return self.writes or self.trims

    def __str__(self) -> str:
        what = f"{'writes' if self.writes else 'trims' if self.trims else 'reads'}"
        why = f", {self.why}" if self.why else ""
        return f"[{self.job}] {self.option}: {self.path} ({self.kind}, {what}{why})"


@dataclasses.dataclass
class Job:
    name: str
    options: dict  # canonical fio option name -> value (global ones merged in)


def accesses(text: str, source: str = "job file", *, target: str | None = None) -> list[Access]:
    """Every file, device and directory the jobs of fio job file ``text`` open.

    ``target`` is the directory fio is given on its command line
    (``--directory=``) for jobs that set none; ``None`` means fio's working
    directory (the current one). Relative paths are made absolute against it
    (or the current directory). Raises :class:`IolabError` naming ``source``
    for text the gate cannot check (``include`` lines, too many generated
    names). Reads fio's option table once per process.
    """
    found: list[Access] = []
    for job in parse(text, source):
        found += _job_accesses(job, target)
    return found


def outside(accesses: Iterable[Access], roots: Iterable[str]) -> list[Access]:
    """The accesses whose path is not inside any of ``roots``.

    A root is a directory (its whole tree is inside), a file or a device (only
    that path). Paths are compared after resolving symlinks
    (``os.path.realpath``), so a link out of a root is outside.
    """
    real_roots = [os.path.realpath(r) for r in roots if r]
    result = []
    for access in accesses:
        real = os.path.realpath(access.path)
        if not any(real == root or real.startswith(root.rstrip("/") + "/") for root in real_roots):
            result.append(access)
    return result


# ------------------------------------------------------------ fio's option table

@functools.lru_cache(maxsize=1)
def _option_names() -> frozenset:
    """Canonical option names fio lists with ``--cmdhelp=all``."""
    from iolab.core import commands
    from iolab.engine import fio
    proc = commands.run([fio.fio_binary(), "--cmdhelp=all"], check=False)
    names = set()
    for line in proc.stdout.splitlines():
        name, sep, _ = line.partition(":")
        if sep and name.strip() and " " not in name.strip():
            names.add(name.strip())
    if not names:
        raise IolabError("fio --cmdhelp=all listed no options", context="fio")
    return frozenset(names)


@functools.lru_cache(maxsize=256)
def _help(name: str) -> tuple[str | None, tuple, tuple]:
    """fio's ``--cmdhelp=NAME``: (canonical name, aliases, valid values as (value, description))."""
    from iolab.core import commands
    from iolab.engine import fio
    proc = commands.run([fio.fio_binary(), f"--cmdhelp={name}"], check=False)
    text = proc.stdout
    if proc.returncode != 0 or "closest match" in text or "No such command" in text:
        return None, (), ()
    canonical, aliases, values = None, [], []
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        key, rest = key.strip(), rest.strip()
        if not sep:
            continue
        if canonical is None and key and key not in ("alias", "type", "default"):
            canonical = key
        elif key == "alias":
            aliases += [a.strip() for a in rest.split(",") if a.strip()]
        elif key in ("valid values", ""):
            value, _, description = rest.partition(" ")
            if value:
                values.append((value, description.strip()))
    return canonical, tuple(aliases), tuple(values)


def canonical(key: str) -> str:
    """fio's canonical name of option ``key`` (an alias maps to its option; unknown names stay)."""
    if key in _option_names():
        return key
    name, aliases, _ = _help(key)
    return name if name and key in aliases else key


@functools.lru_cache(maxsize=1)
def _rw_modes() -> dict:
    """``rw`` mode -> (writes, trims), from fio's own description of each mode."""
    _, _, values = _help("rw")
    modes = {v: ("write" in d.lower(), "trim" in d.lower()) for v, d in values}
    if not modes:
        raise IolabError("fio --cmdhelp=rw listed no modes", context="fio")
    return modes


# --------------------------------------------------------------- job-file parsing

_ENV = re.compile(r"\$\{([^}]*)\}")


def _clean_value(value: str) -> str:
    for mark in ";#":  # fio ends a value at a comment mark
        value = value.split(mark, 1)[0]
    value = _ENV.sub(lambda m: os.environ.get(m.group(1), ""), value)
    return value.rstrip()


def parse(text: str, source: str = "job file") -> list[Job]:
    """The jobs of a job file with their effective options (fio's canonical names)."""
    jobs: list[Job] = []
    global_options: dict = {}
    current: dict | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and "]" in line:
            name = line[1:line.rindex("]")].strip()
            if name == "global":
                current = global_options
            else:
                jobs.append(Job(name, dict(global_options)))
                current = jobs[-1].options
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep and key.split()[0] == "include":
            raise IolabError("include: iolab checks only job text it sees; put the included options in the file",
                             context=f"{source}:{number}")
        if current is None:
            continue  # fio ignores options before the first section
        current[canonical(key)] = _clean_value(value) if sep else None
    return jobs


# ------------------------------------------------------------ what a job touches

def _split(value: str) -> list[str]:
    """fio's ``:``-separated list, ``\\:`` being a literal colon."""
    parts = re.split(r"(?<!\\):", value)
    return [p.replace("\\:", ":") for p in parts if p]


def _int(value, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def effects(options: dict) -> tuple[bool, bool, str]:
    """(writes, trims, why) of one job's options."""
    reasons, writes, trims = [], False, False
    rw = (options.get("rw") or "read").split(":")[0].strip()
    w, t = _rw_modes().get(rw, (True, True))  # unknown mode: assume the worst (fio rejects it later)
    if w or t:
        writes, trims = w, t
        reasons.append(f"rw={options.get('rw')}")
    if _int(options.get("trim_percentage"), 0) > 0 and options.get("verify") not in (None, "0"):
        trims = True
        reasons.append("verify with trim_percentage")
    if (options.get("zonemode") or "none").strip() == "zbd":
        writes = True
        reasons.append("zonemode=zbd (zone resets)")
    for flag in ("unlink", "unlink_each_loop"):
        if str(options.get(flag, "0")).strip() not in ("0", "", "false"):
            writes = True
            reasons.append(f"{flag} (deletes files)")
    engine = (options.get("ioengine") or "").strip()
    if engine in FILE_ENGINES:
        writes = True
        reasons.append(f"ioengine={engine}")
    return writes, trims, ", ".join(reasons)


def _kind(path: str, default: str = "file") -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return default
    if stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file"


def _names(job: Job) -> list[str]:
    """File names fio generates from filename_format for every clone and file of a job."""
    fmt = job.options.get("filename_format") or DEFAULT_FORMAT
    # unset: fio's 1; not a plain number ($ncpus arithmetic): assume many
    numjobs, nrfiles = (max(1, _int(job.options.get(key) or 1, 64)) for key in ("numjobs", "nrfiles"))
    varies = ("$jobnum" in fmt) * numjobs * ((("$filenum" in fmt) and nrfiles) or 1)
    if varies > MAX_NAMES:
        raise IolabError(f"filename_format {fmt!r} names {varies} files; iolab checks at most {MAX_NAMES}",
                         context=f"[{job.name}]")
    names = []
    for jobnum in range(numjobs if "$jobnum" in fmt else 1):
        for filenum in range(nrfiles if "$filenum" in fmt else 1):
            names.append(fmt.replace("$jobname", job.name).replace("$jobnum", str(jobnum))
                         .replace("$filenum", str(filenum)).replace("$clientuid", "0"))
    return list(dict.fromkeys(names))


def _job_accesses(job: Job, target: str | None) -> list[Access]:
    writes, trims, why = effects(job.options)
    found = []

    def add(option, path, kind=None, w=writes, t=trims, reason=why):
        path = os.path.abspath(path)
        found.append(Access(job.name, option, path, kind or _kind(path), w, t, reason if (w or t) else ""))

    directory = job.options.get("directory")
    dirs = _split(directory) if directory else ([target] if target else [])
    filename = job.options.get("filename")
    if directory and not filename:  # fio makes its files there (with filename= it is only a prefix)
        for d in dirs:
            add("directory", d, _kind(d, "directory"))
    if filename:
        names, option = [n for n in _split(filename) if n != "-"], "filename"
    else:
        names, option = _names(job), "filename_format"
    for name in names:
        if dirs:
            for d in dirs:  # fio prepends the directory even to an absolute name
                add(option, os.path.join(d, name.lstrip("/")))
            if option == "filename_format" and name.startswith("/"):
                add(option, name)
        else:
            add(option, name)
    if job.options.get("opendir"):
        add("opendir", job.options["opendir"], "directory")
    for log_option in LOG_OPTIONS:
        if job.options.get(log_option):
            add(log_option, job.options[log_option], "file", True, False, f"{log_option} writes a log")
    if job.options.get("read_iolog"):
        add("read_iolog", job.options["read_iolog"], "file", False, False)
    if job.options.get("replay_redirect"):
        add("replay_redirect", job.options["replay_redirect"], None, True, False, "replays an iolog's writes")
    return found


# ------------------------------------------------------------------ the run gate

@dataclasses.dataclass(frozen=True)
class Allowances:
    """What the user allowed on purpose (``--allow-path``, ``--allow-exec``); recorded in the manifest."""

    paths: tuple = ()
    exec: bool = False

    def record(self, confirm=None) -> dict:
        """The manifest's ``safety`` entry."""
        return {"confirm": _as_list(confirm), "allow_paths": [os.path.abspath(p) for p in self.paths],
                "allow_exec": bool(self.exec)}


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]


def _marker(target) -> str:
    """Stand-in path for an emulated target's device or file system (made at run time)."""
    return f"/<emulated {target.name}>"


def _default_dir(target) -> str | None:
    """The ``--directory`` the runner gives fio for a job file on this target."""
    if target.kind == "dir":
        return target.path
    if target.kind == "emulated":
        return _marker(target)
    return None


def root_of(target) -> str:
    """The path a target lets jobs reach: its directory tree, file or device."""
    return _marker(target) if target.kind == "emulated" else target.path


def plan_jobs(recipe, target) -> list[tuple[str, str | None]]:
    """(job text, default directory) of every fio job the recipe runs on ``target``."""
    from iolab.engine import fio
    if recipe.jobfile is not None:
        return [(recipe.jobfile, _default_dir(target))]
    stand_in = dataclasses.replace(target)
    if target.kind == "dir":
        stand_in.test_file = os.path.join(target.path, "iolab-<run_id>.dat")
    elif target.kind == "emulated":
        stand_in.test_file = os.path.join(_marker(target), "iolab-<run_id>.dat")
    texts = []
    for step in recipe.steps():
        global_options, options = fio.job_options(recipe, step, stand_in, force_direct=False)
        texts.append((fio.render_job(step.id, options, global_options), None))
    return texts


def target_accesses(recipe, target) -> tuple[list[Access], list[str]]:
    """Every access of ``recipe`` on ``target`` and the job texts behind them."""
    if recipe.engine != "fio":  # the engine opens the target itself, in the steps' directions
        texts, found = [], []
        for step in recipe.steps():
            writes, trims, why = effects(dict(step.options, rw=step.rw or "read"))
            if target.kind != "emulated":
                found.append(Access(step.id, "--target", target.path, _kind(target.path), writes, trims, why))
        return found, texts
    found, texts = [], []
    for text, directory in plan_jobs(recipe, target):
        texts.append(text)
        found += accesses(text, f"recipe {recipe.name}", target=directory)
    if (target.kind == "file" and recipe.jobfile is None
            and os.path.getsize(target.path) < recipe.size):  # runner lays the file out to size
        found.append(Access("layout", "layout", target.path, "file", True, False,
                            "iolab writes the test file up to --size"))
    return found, texts


def check(recipe, targets, *, confirm=None, allow: Allowances | None = None) -> list[Access]:
    """Refuse what the recipe's jobs would do beyond what the user named or allowed.

    Sets ``writes`` and ``confirm`` on each target (so a written block target
    is held with ``O_EXCL`` while it runs) and returns every access. Raises
    :class:`IolabError` naming the job, option and path of the first refusal.
    """
    allow = allow or Allowances()
    confirms = _as_list(confirm)
    roots = [root_of(t) for t in targets] + list(allow.paths)
    everything: list[Access] = []
    for target in targets:
        found, texts = target_accesses(recipe, target)
        for text in texts:
            _check_options(text, f"recipe {recipe.name}", allow)
        root = os.path.realpath(root_of(target))
        target.writes = any(a.destructive and os.path.realpath(a.path) == root for a in found)
        target.confirm = confirm
        everything += found
    unique = list(dict.fromkeys(everything))
    refused = [(a, f"outside the targets ({', '.join(roots)})",
                f"name it with --target, or allow it on purpose with --allow-path {a.path}")
               for a in outside(unique, roots)]
    problems: dict = {}  # one verdict per path, however many jobs write it
    for access in unique:
        if access.destructive:
            key = (os.path.realpath(access.path), access.kind)
            if key not in problems:
                problems[key] = _destructive_problem(access, confirms)
            if problems[key]:
                refused.append((access, *problems[key]))
    if refused:  # the most telling first: a device, then a file, then a directory
        refused.sort(key=lambda item: ("device", "file", "directory").index(item[0].kind))
        access, why, hint = refused[0]
        more = f"; and {len(refused) - 1} more" if len(refused) > 1 else ""
        raise IolabError(f"refusing {access}: {why}{more}", context=f"recipe {recipe.name}", hint=hint)
    return unique


def _check_options(text: str, source: str, allow: Allowances) -> None:
    """allow_mounted_write is never accepted; exec hooks and triggers need ``--allow-exec``."""
    from iolab.engine import jobcheck
    lines = []
    for job in parse(text, source):
        if str(job.options.get("allow_mounted_write", "0")).strip() not in ("0", "", "false"):
            raise IolabError("allow_mounted_write: refused: iolab never writes to a mounted file system's device",
                             context=f"{source}: [{job.name}]")
        lines.append(f"[{job.name}]")
        lines += [f"{k}={v}" if v is not None else k for k, v in job.options.items()]
    refused = [p for p in jobcheck.problems("\n".join(lines), source) if p.category in ("exec", "trigger")]
    if refused and not allow.exec:
        first = refused[0]
        raise IolabError(f"[{first.section}] {first.option}: refused: {first.reason.replace('on the server', 'here')}",
                         context=source, hint="run programs from a job on purpose with --allow-exec")


def _destructive_problem(access: Access, confirms: list[str]) -> tuple[str, str] | None:
    """Why writing ``access`` is refused (reason, hint), or None."""
    from iolab.devices import blockdev, safety
    real = os.path.realpath(access.path)
    confirmed = any(os.path.realpath(c) == real for c in confirms)
    if access.kind == "device":
        try:
            safety.check_writable(access.path, confirm=confirms or None)
        except IolabError as exc:
            return exc.message, exc.hint or ""
        return None
    if access.kind != "file" or not os.path.isfile(real):
        return None  # a new file (or a directory jobs create files in)
    if real in blockdev.swap_files():
        return "it is an active swap file", "iolab never writes a swap file"
    for loop in blockdev.loops_backed_by(real):
        verdict = safety.assess(loop)
        hard = [r.text for r in verdict.reasons if not r.overridable]
        if hard:
            return (f"it backs {loop}, which is {'; '.join(hard)}",
                    "iolab never writes a device that is mounted, swap, held or backs /; --confirm does not change that")
        if not confirmed:
            return (f"it backs {loop}" + (f", which {verdict.why_not}" if verdict.reasons else ""),
                    f"if you really mean to overwrite it, confirm with --confirm {real}")
    if not confirmed:
        return ("an existing file iolab did not create",
                f"if you really mean to overwrite it, confirm with --confirm {real}")
    return None
