"""Every file, device and directory each job of a fio job file touches, read the way fio reads it.

The job file itself is read by fio (:mod:`iolab.engine.jobfile.reader`: ``fio
--showcmd`` gives sections, options by their canonical names and values after
fio's own ``${VAR}``/``$ncpus``/``$mb_memory``/``$pagesize`` expansion). This
module models what fio does with those options, as fio 3.33 does it:

* ``filename=`` *adds* files: a ``[global]`` section's files are added to every
  job after it (fio's ``dup_files``), and every ``filename=`` line adds its own;
  each name gets the ``directory`` in force when fio read it (even an absolute
  one: fio prepends the directory);
* ``opendir=`` adds every regular file below the directory (fio's ``lstat``
  walk, no links followed), also from a ``[global]`` section;
* a job with no files gets names from ``filename_format`` (``$jobname.$jobnum.$filenum``)
  per clone and file; a job named after an existing non-regular file (``[/dev/sdb]``)
  with one file opens that path itself;
* ``read_iolog`` replays the files and writes the log names (``replay_redirect``
  sends them all to one file or device) instead of the job's own files;
* a job that only reads still writes a regular file that is missing or smaller
  than its size: fio lays it out (unlinks and rewrites it).

What the run allows is :mod:`iolab.engine.jobfile.gate`.
"""
from __future__ import annotations

import dataclasses
import os
import re
import stat
from typing import Iterable

from iolab.core.errors import IolabError
from iolab.engine.jobfile import reader as jobreader
from iolab.engine.fio.parse import parse_fio_size

#: Options whose value names files fio writes (logs).
LOG_OPTIONS = ("write_iolog", "write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
#: The files each log option writes: NAME_<kind>.<job>.log for each kind.
LOG_KINDS = {"write_bw_log": ("bw",), "write_lat_log": ("lat", "clat", "slat"), "write_iops_log": ("iops",),
             "write_hist_log": ("clat_hist",)}
#: Engines that create or delete files instead of reading/writing blocks.
FILE_ENGINES = ("filecreate", "filedelete", "dircreate", "dirdelete")
#: filename_format's default (fio's).
DEFAULT_FORMAT = "$jobname.$jobnum.$filenum"
#: At most this many generated file names (or files below an opendir) are checked per job.
MAX_NAMES = 4096
#: Options that add files to a job (in the order fio reads them).
FILE_OPTIONS = ("filename", "opendir")
#: The first line of the text iologs fio replays.
IOLOG_HEADERS = ("fio version 2 iolog", "fio version 3 iolog")

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
    """One job in fio's view: its effective options and the files fio added to it, in order.

    ``options``: canonical option name -> the value fio applies last (``[global]``
    ones merged in; ``filename``/``opendir`` hold the last line's value);
    ``files``: (option, name as written, directory in force then) for each file a
    ``filename``/``opendir`` line added, the global sections' first.
    """

    name: str
    options: dict
    files: list = dataclasses.field(default_factory=list)
    line: int = 0
    target: str | None = None  # fio's command-line --directory


def jobs(text: str, source: str = "job file", *, target: str | None = None, load_code: bool = False) -> list[Job]:
    """The jobs of job file ``text`` as fio sets them up; ``target`` is fio's command-line ``--directory``;
    ``load_code``: the user allowed external ioengines (fio loads them to read the job)."""
    global_options: dict = {"directory": target} if target else {}
    global_files: list = []
    found = []
    for section in jobreader.sections(text, source, load_code=load_code):
        if section.is_global:
            _apply(section.options, global_options, global_files, source, section.name)
            continue
        options, files = dict(global_options), list(global_files)
        _apply(section.options, options, files, source, section.name)
        found.append(Job(section.name, options, files, section.line, target))
    return found


def parse(text: str, source: str = "job file") -> list[Job]:
    """The jobs of a job file with their effective options (fio's canonical names)."""
    return jobs(text, source)


def _apply(options: list, into: dict, files: list, source: str, section: str) -> None:
    for option in options:
        if option.name == "filename":  # fio strips the whole value, not each ':' part (checked with fio 3.33)
            value = (option.value or "").lstrip(" \t\n\v\f\r").rstrip("".join(map(chr, range(33))) + "\x7f")
            files += [("filename", name, into.get("directory")) for name in split(value)]
        elif option.name == "opendir" and option.value:
            files.append(("opendir", option.value, into.get("directory")))
        into[option.name] = option.value


def accesses(text: str, source: str = "job file", *, target: str | None = None,
             read_logs: bool = True, load_code: bool = False) -> list[Access]:
    """Every file, device and directory the jobs of fio job file ``text`` open.

    ``target`` is the directory fio is given on its command line
    (``--directory=``) for jobs that set none; ``None`` means fio's working
    directory (the current one). Relative paths are made absolute against it
    (or the current directory). ``read_logs``: read ``read_iolog`` files and
    walk ``opendir`` trees here (False for a fio server elsewhere: a job
    replaying an iolog without ``replay_redirect`` is then refused). Raises
    :class:`IolabError` naming ``source``, the job and the option for what
    the gate cannot decide (fio refuses the file, ``include`` lines, a value
    fio's view leaves ambiguous, too many names, an iolog iolab cannot read)
    and for an external ioengine unless ``load_code`` (fio loads it to read the job).
    """
    found: list[Access] = []
    parsed = jobs(text, source, target=target, load_code=load_code)
    clones = sum(max(1, _int(job.options.get("numjobs") or 1, 1)) for job in parsed)
    for job in parsed:
        found += _job_accesses(job, source, read_logs, clones)
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

canonical = jobreader.canonical


def _rw_modes() -> dict:
    """``rw`` mode -> (writes, trims), from fio's own description of each mode."""
    _, _, values = jobreader.option_help("rw")
    modes = {v: ("write" in d.lower(), "trim" in d.lower()) for v, d in values}
    if not modes:
        raise IolabError("fio --cmdhelp=rw listed no modes", context="fio")
    return modes


# ------------------------------------------------------------ what a job touches

def split(value: str) -> list[str]:
    """fio's ``:``-separated list, ``\\:`` being a literal colon."""
    parts = re.split(r"(?<!\\):", value)
    return [p.replace("\\:", ":") for p in parts if p]


_split = split


def _int(value, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _on(options: dict, flag: str) -> bool:
    """A fio boolean option is set (``unlink``, ``unlink=1``; fio stores a bare flag as set)."""
    if flag not in options:
        return False
    return str(options[flag] if options[flag] is not None else "1").strip().lower() not in ("0", "", "false")


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
        if _on(options, flag):
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
    """File names fio generates for a job without files: every clone and file of filename_format."""
    fmt = job.options.get("filename_format") or DEFAULT_FORMAT
    # unset: fio's 1; not a plain number: assume many
    numjobs, nrfiles = (max(1, _int(job.options.get(key) or 1, 64)) for key in ("numjobs", "nrfiles"))
    if nrfiles == 1 and os.path.lexists(job.name) and not os.path.isfile(job.name):
        return [job.name]  # fio: a job named after an existing non-regular file opens it
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


def _placed(name: str, directory: str | None) -> list[str]:
    """Where fio opens file ``name``: below each of ``directory``'s entries (even an absolute name), or as is."""
    if not directory:
        return [name]
    return [os.path.join(d, name.lstrip("/")) for d in split(directory)]


def _below(directory: str, source: str, job: str) -> list[str]:
    """The regular files below ``directory`` as fio's opendir walks them (``lstat``, links not followed)."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                found.append(path)
        if len(found) > MAX_NAMES:
            raise IolabError(f"opendir {directory} holds more than {MAX_NAMES} files; iolab checks at most "
                             f"{MAX_NAMES}", context=f"{source}: [{job}]")
    return found


def _file_size(options: dict, files: int) -> tuple[int | None, bool]:
    """(bytes fio lays each file out to, known): ``filesize`` (a range: its top), else ``size`` / files."""
    value = options.get("filesize")
    if value:
        top = str(value).split("-")[-1].split(":")[-1]
        size = parse_fio_size(top)
        return size, size is not None
    value = options.get("size")
    if value is None or _percent(value) is not None:
        return None, True  # fio uses the file's own size (or a share of it: _layout_rewrites)
    size = parse_fio_size(value)
    return (size // max(1, files) if size else None), size is not None


def iolog_files(path: str, source: str, job: str) -> dict:
    """File name -> (writes, trims) of every file a text iolog (fio version 2 or 3) opens or does I/O on."""
    context = f"{source}: [{job}] read_iolog"
    try:
        with open(path, "rb") as handle:
            data = handle.read(64 << 20)
    except OSError as exc:
        raise IolabError(f"cannot read {path} to see what it replays: {exc.strerror}", context=context) from exc
    header, _, rest = data.partition(b"\n")
    version = next((i for i, h in enumerate(IOLOG_HEADERS, start=2) if header.startswith(h.encode())), None)
    if version is None:
        raise IolabError(f"{path} is not a text iolog iolab can read (a blktrace or an old format): iolab cannot "
                         "tell which files and devices it writes", context=context,
                         hint="send the replay to one file or device inside the target with replay_redirect")
    found: dict = {}
    for raw in rest.split(b"\n"):
        words = raw.decode("utf-8", "replace").split()
        if version == 3:
            words = words[1:]
        if len(words) < 2:
            continue
        name, action = words[0], words[1]
        writes, trims = found.get(name, (False, False))
        found[name] = (writes or action == "write", trims or action == "trim")
    return found


def _job_accesses(job: Job, source: str = "job file", read_logs: bool = True, clones: int = 1) -> list[Access]:
    """What one job opens; ``clones``: the jobs in the whole file, clones counted (fio numbers logs by them)."""
    writes, trims, why = effects(job.options)
    found = []
    directory = job.options.get("directory")

    def add(option, path, kind=None, w=writes, t=trims, reason=why):
        path = os.path.abspath(path)
        found.append(Access(job.name, option, path, kind or path_kind(path), w, t, reason if (w or t) else ""))

    log = job.options.get("read_iolog")
    if log:
        for one in split(log):
            add("read_iolog", one, "file", False, False)
        redirect = job.options.get("replay_redirect")
        replayed = {}
        unknown = not read_logs
        for one in split(log):
            if read_logs:
                try:
                    replayed.update(iolog_files(one, source, job.name))
                except IolabError:
                    if not redirect:
                        raise
                    unknown = True  # whatever it replays goes to replay_redirect: assume it writes
            elif not redirect:
                raise IolabError(f"{one} is read by the fio server: iolab cannot see which files and devices "
                                 "it writes", context=f"{source}: [{job.name}] read_iolog",
                                 hint="send the replay to one file or device inside the target with "
                                      "replay_redirect")
        if redirect:  # every replayed I/O goes there; the log's own writes are unknown from afar
            w = any(w for w, _ in replayed.values()) or unknown
            t = any(t for _, t in replayed.values()) or unknown
            for path in _placed(redirect, directory):
                add("replay_redirect", path, None, w, t, "replays an iolog's writes" if w or t else "")
        else:
            for name, (w, t) in replayed.items():  # fio 3.33 puts directory= before them (and crashed doing so
                for path in dict.fromkeys(_placed(name, directory) + [name]):  # here): both places are listed
                    add("read_iolog", path, None, w, t, f"the iolog {log} replays writes there" if w or t else "")
    else:
        files = []
        for option, name, where in job.files:
            if option == "opendir":
                add("opendir", name, "directory")
                if read_logs:  # a server elsewhere walks its own tree (the directory itself is judged)
                    files += [("opendir", path, where) for path in _below(name, source, job.name)]
            elif name != "-" or where:  # '-' is stdin/stdout, but under a directory fio makes a file named '-'
                files.append((option, name, where))
        if not job.files:
            if directory and directory != job.target:  # fio makes its files there
                for d in split(directory):
                    add("directory", d, path_kind(d, "directory"))
            files = [("filename_format", name, directory) for name in _names(job)]
        for option, name, where in files:
            for path in _placed(name, where):
                add(option, path)
            if option == "filename_format" and where and name.startswith("/"):
                add(option, name)
        if not writes:
            _layout_rewrites(job, found)
    for log_option in LOG_OPTIONS:
        name = job.options.get(log_option)
        if name:
            add(log_option, name, "file", True, False, f"{log_option} writes a log")
            for kind in LOG_KINDS.get(log_option, ()):  # fio's NAME_bw.1.log, ... (NAME_bw.log: per_job_logs=0)
                for path in [f"{name}_{kind}.log"] + [f"{name}_{kind}.{n}.log" for n in range(1, clones + 1)]:
                    add(log_option, path, "file", True, False, f"{log_option} writes a log")
    if job.options.get("replay_redirect") and not log:
        add("replay_redirect", job.options["replay_redirect"], None, True, False, "replays an iolog's writes")
    return found


def _percent(value) -> float | None:
    """``50%`` -> 50.0; None when ``value`` is no percentage."""
    text = str(value or "").strip()
    if not text.endswith("%"):
        return None
    try:
        return float(text[:-1])
    except ValueError:
        return None


def _layout_rewrites(job: Job, found: list) -> None:
    """A job that only reads still writes its regular files that are missing or shorter than it reads up to
    (``offset`` + its share of ``size``, or a ``size``/``offset`` share of the file above 100%)."""
    files = [a for a in found if a.option in ("filename", "filename_format", "opendir") and a.kind == "file"]
    size, known = _file_size(job.options, len(files))
    share = _percent(job.options.get("filesize") or job.options.get("size"))
    offset_value = job.options.get("offset")
    offset_share = _percent(offset_value)
    offset = parse_fio_size(offset_value) if offset_value and offset_share is None else 0
    sized = any(os.path.isfile(a.path) for a in files)  # without size= fio takes it from the files there are
    for index, access in enumerate(found):
        if access not in files or access.destructive:
            continue
        try:
            have = os.stat(access.path).st_size
        except OSError:
            have = None
        start = offset if offset_share is None else (have or 0) * offset_share / 100
        if have is None:
            if share is None and known and size is None and not sized:
                continue  # fio refuses a new file without a size
            why = "fio creates and lays out the missing file"
        elif share is not None:
            if share + (offset_share or 0) <= 100 and not offset:
                continue
            why = f"size={job.options.get('size')}: fio reads beyond the file's {have} bytes and lays it out again"
        elif not known or start is None:
            why = (f"size={job.options.get('size')}, offset={offset_value}: iolab cannot tell whether fio lays the "
                   "file out again")
        elif size is not None and have < start + size:
            why = f"the file has {have} bytes, fewer than the job reads up to ({start + size:.0f}): fio rewrites it"
        else:
            continue
        found[index] = dataclasses.replace(access, writes=True, why=why)
