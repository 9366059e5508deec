"""A fio job file read the way fio reads it, and every file, device and directory each job touches.

Option names are fio's: aliases (``readwrite`` for ``rw``, ``fill_fs`` for
``fill_device``) are mapped to fio's canonical names with fio's own option
table (``fio --cmdhelp``), never a hand-written list of spellings. The job-file
syntax follows fio: ``[global]`` sections apply to the jobs after them, a
later value replaces an earlier one, values end at ``;`` or ``#``, ``${VAR}``
is taken from the environment, and ``directory`` is prepended even to an
absolute ``filename`` (as fio does). What the run allows is :mod:`iolab.engine.jobgate`.
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


def path_kind(path: str, default: str = "file") -> str:
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
        found.append(Access(job.name, option, path, kind or path_kind(path), w, t, reason if (w or t) else ""))

    directory = job.options.get("directory")
    dirs = _split(directory) if directory else ([target] if target else [])
    filename = job.options.get("filename")
    if directory and not filename:  # fio makes its files there (with filename= it is only a prefix)
        for d in dirs:
            add("directory", d, path_kind(d, "directory"))
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
