"""The path gate for job files sent to fio servers: everything a job opens stays inside the host's target.

A fio server opens whatever paths a job names, with its own privileges
(often root). Before anything connects, :mod:`iolab.fleet.runs` checks every job
file it will send with :func:`check`, from the *server's* point of view:

* every file, directory and device a job opens (``filename`` and its ``:``
  lists, ``directory``, ``filename_format``, the default ``$jobname.$jobnum.$filenum``
  names, ``opendir``, ``write_iolog``, ``read_iolog``, ``replay_redirect``,
  ``merge_blktrace_file``; fio's aliases included) must be the inventory
  entry's ``target`` or lie below it; the list comes from
  :func:`iolab.engine.jobfile.gate.accesses`, so the job file is read the way the local
  gate reads it: from fio's own view (:mod:`iolab.engine.jobfile.reader`), a
  ``[global]`` section's files added to every job, every ``filename=`` line
  adding files; a ``read_iolog`` (read on the server, out of iolab's sight) is
  refused unless ``replay_redirect`` sends its I/O to one place inside the target;
* files read into the data written (``buffer_pattern``/``verify_pattern``
  with fio's ``'file'`` syntax) and buffer files (``mem=mmap:FILE``,
  ``mmaphuge:FILE``) likewise;
* no ``..`` component in any of these paths, and no relative path that fio
  would resolve against the server's working directory: the server resolves
  symlinks on its side, where iolab cannot look, so a path is judged by its
  text (for a server on this machine symlinks are resolved too);
* the bandwidth/latency/IOPS/histogram logs (``write_bw_log`` and friends)
  are written by fio's *client*, on this machine, into the fleet's ``logs/``
  directory: their names must be plain names, without ``/``;
* ``ioscheduler``, ``cgroup*`` and network ioengines, as the local gate refuses them
  (:data:`iolab.engine.jobfile.gate.OUTSIDE_OPTIONS`);
* ``${VAR}`` in any of these values is refused: it would be expanded from the
  server's environment, so the path that runs is not the one checked.

Refusals name the job file, the section, the option and the value; every
refusal of a file is reported at once.
"""
from __future__ import annotations

import dataclasses
import os
import re

from iolab.engine.jobfile import gate as jobgate
from iolab.engine.jobfile import reader as jobreader
from iolab.core.errors import IolabError

#: Logs that fio's client writes on this machine (the server sends them over).
CLIENT_LOGS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
#: Options whose value is one path (or, for filename/directory, a ``:`` list) opened on the server.
PATH_OPTIONS = ("filename", "directory", "filename_format", "opendir", "write_iolog", "read_iolog",
                "replay_redirect", "merge_blktrace_file")
#: Options whose value may name files fio reads (``'path'``) into its buffers.
PATTERN_OPTIONS = ("buffer_pattern", "verify_pattern")
#: fio's own variables in filename_format (not environment expansion).
_FORMAT_VARS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)")


@dataclasses.dataclass(frozen=True)
class Refusal:
    """One path of a job that a fio server must not open."""

    source: str
    job: str
    option: str
    value: str
    reason: str

    def __str__(self) -> str:
        if not self.value:  # the file as a whole (fio's view could not be had or judged)
            return self.reason
        return f"[{self.job}] {self.option}={self.value}: {self.reason}"


def _parts(value: str, option: str) -> list[str]:
    """The paths in an option's value (``:`` lists of filename/directory, ``\\:`` a literal colon)."""
    if option in ("filename", "directory", "read_iolog"):
        return [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", value) if p]
    return [value] if value else []


def pattern_files(value: str) -> list[str]:
    """Files a fio data pattern reads: its ``'quoted'`` parts (``"strings"`` and ``0x`` numbers are data)."""
    files, index = [], 0
    while index < len(value):
        char = value[index]
        if char in "\"'":
            end = value.find(char, index + 1)
            end = len(value) if end < 0 else end
            if char == "'":
                files.append(value[index + 1:end])
            index = end + 1
        else:
            index += 1
    return files


def _memory_file(value: str | None) -> str | None:
    """The file behind ``mem=mmap:FILE`` / ``mmaphuge:FILE`` / ``mmapshared:FILE``."""
    kind, sep, path = (value or "").partition(":")
    return path if sep and kind.strip().startswith("mmap") else None


def _inside(path: str, root: str, local: bool) -> bool:
    """``path`` is ``root`` or below it: by its text, and for a server on this machine also after symlinks."""
    norm, base = os.path.normpath(path), os.path.normpath(root)
    textual = norm == base or norm.startswith(base.rstrip("/") + "/")
    if not textual or not local:
        return textual
    real, real_base = os.path.realpath(path), os.path.realpath(root)
    return real == real_base or real.startswith(real_base.rstrip("/") + "/")


def _raw_refusals(text: str, source: str) -> list[Refusal]:
    """``$`` in a path option as written: expanded from the server's environment, so never checkable here.

    Read from the file's lines as fio splits them (:func:`iolab.engine.jobfile.reader.lines`), before any expansion.
    """
    found = []
    for line in jobreader.lines(text, source):
        if line.kind != "option" or line.value is None:
            continue
        option = jobgate.canonical(line.key)
        checked = option in PATH_OPTIONS + PATTERN_OPTIONS + CLIENT_LOGS + ("mem",)
        if checked and "$" in _FORMAT_VARS.sub("", line.value):
            found.append(Refusal(source, line.section, option, line.value.strip(),
                                 "'$' is expanded from the fio server's environment: the path cannot be checked"))
    return found


def _read_refusals(text: str, source: str, root: str, local: bool) -> list[Refusal]:
    """Files a pattern reads or ``mem=mmap:FILE`` creates, from every such line as written (fio reads a pattern
    file while parsing the job, so these are checked without asking fio: the file may exist only on the server)."""
    found = []
    for line in jobreader.lines(text, source):
        if line.kind != "option" or line.value is None:
            continue
        option, value = jobgate.canonical(line.key), line.value.strip()
        paths = pattern_files(value) if option in PATTERN_OPTIONS else \
            [p for p in [_memory_file(value)] if p] if option == "mem" else []
        for path in paths:
            if ".." in path.split("/"):
                reason = "a '..' component: the fio server resolves it past symlinks iolab cannot see"
            elif not os.path.isabs(path):
                reason = f"a relative file is opened in the fio server's working directory, not in the target {root}"
            elif not _inside(path, root, local):
                what = "reads" if option in PATTERN_OPTIONS else "creates"
                reason = f"{what} {path} on the fio server, outside the target {root}"
            else:
                continue
            found.append(Refusal(source, line.section, option, value, reason))
    return found


def _job_refusals(job: jobgate.Job, source: str, root: str, local: bool) -> list[Refusal]:
    """Refusals iolab finds in one job's option values (the paths jobgate does not list)."""
    found = []

    def refuse(option, value, reason):
        found.append(Refusal(source, job.name, option, value, reason))

    options = job.options
    directories = [where for _, _, where in job.files if where] + [options.get("directory") or ""]
    for option in PATH_OPTIONS:
        values = list(dict.fromkeys(d for d in directories if d)) if option == "directory" else \
            [name for kind, name, _ in job.files if kind == option] if option in ("filename", "opendir") else \
            [options.get(option)]
        for value in values:
            for part in _parts(value or "", option):
                if ".." in part.split("/"):
                    refuse(option, value, "a '..' component: the fio server resolves it past symlinks iolab "
                                          "cannot see")
                elif option in ("filename", "filename_format"):
                    continue  # below: relative to directory= if there is one; jobgate lists the paths
                elif not os.path.isabs(part):
                    refuse(option, value, f"a relative path is opened in the fio server's working directory, "
                                          f"not in the target {root}")
                elif option != "directory" and not _inside(part, root, local):
                    refuse(option, value, f"opens {part} on the fio server, outside the target {root}")
    relative = [name for kind, name, where in job.files
                if kind == "filename" and not where and name != "-" and not os.path.isabs(name)]
    if relative:
        refuse("filename", ":".join(relative), f"without directory= a relative name is opened in the fio "
                                                f"server's working directory, not in the target {root}")
    if not job.files and not options.get("directory") and not options.get("read_iolog"):
        value = options.get("filename_format") or f"{jobgate.DEFAULT_FORMAT} (fio's default)"
        if not os.path.isabs(value):
            refuse("filename_format", value, f"without directory= a relative name is opened in the fio server's "
                                             f"working directory, not in the target {root}")
    for option, value, why, _ in jobgate.outside_problems(job):  # as the local gate, from the server's side
        refuse(option, value, "it sends I/O from the fio server to another machine or service"
               if option == "ioengine" else f"it {why} on the fio server")
    if not job.files and ".." in job.name.split("/"):
        refuse("filename_format", f"[{job.name}]", "the job name becomes the file name and has a '..' component")
    for option in CLIENT_LOGS:
        value = options.get(option)
        if value and ("/" in value or value in (".", "..")):
            refuse(option, value, "fio's client writes this log on this machine: give a plain name "
                                  "(iolab keeps the logs in the fleet's logs/ directory)")
    return found


def refusals(text: str, source: str, *, root: str, local: bool = False, allow_code: bool = False) -> list[Refusal]:
    """Every path of job file ``text`` that the fio server of a host with target ``root`` must not open.

    The job file is read the way fio reads it (:func:`iolab.engine.jobfile.access.jobs`: fio's own view of it,
    global files added to every job, every ``filename=`` line adding files). ``local``: the server runs on
    this machine, so symlinks are resolved and iologs read here. ``allow_code``: external ioengines were
    allowed (``allow_job_options: [exec]``); fio loads them to read the job, so without it they are refused.
    """
    found = _raw_refusals(text, source) + _read_refusals(text, source, root, local)
    try:
        parsed = jobgate.jobs(text, source, load_code=allow_code)
    except IolabError as exc:  # fio's view cannot be had or matched: nothing more can be judged
        if not found:
            raise
        return found + [Refusal(source, "?", "job file", "", exc.message)]
    for job in parsed:
        found += _job_refusals(job, source, root, local)
    done = {(r.job, r.option) for r in found}
    try:
        listed = jobgate.accesses(text, source, read_logs=local, load_code=allow_code)
    except IolabError as exc:  # what the gate cannot decide (an iolog it cannot read) is refused
        found.append(Refusal(source, "?", "job file", "", exc.message))
        listed = []
    by_name = {job.name: job for job in parsed}
    for access in listed:  # relative names without directory= are refused above
        if access.option in CLIENT_LOGS or (access.job, access.option) in done:
            continue
        if not _inside(access.path, root, local):
            job = by_name.get(access.job)
            value = (job.options.get(access.option) if job else None) or access.path
            verb = "writes" if access.destructive else "opens"
            found.append(Refusal(source, access.job, access.option, value,
                                 f"{verb} {access.path} on the fio server, outside the target {root}"))
            done.add((access.job, access.option))
    return found


def check(text: str, source: str, *, root: str, local: bool = False, context: str | None = None,
          allow_code: bool = False) -> None:
    """Raise :class:`IolabError` listing every refusal of :func:`refusals` (none: return)."""
    found = refusals(text, source, root=root, local=local, allow_code=allow_code)
    if not found:
        return
    message = f"refused: {found[0]}"
    if len(found) > 1:
        message += "; also " + "; ".join(str(r) for r in found[1:])
    raise IolabError(message, context=source,
                     hint=f"a fio server opens these paths with its own privileges: every path a job names "
                          f"must be inside {context + ' ' if context else ''}target {root}")
