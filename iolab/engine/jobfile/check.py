"""Safety check of fio job files before they are sent to a fio server.

A fio server runs whatever job file a client sends, with the server's
privileges (often root). Some job options do more than I/O: they run programs
or pull in text iolab has not seen. iolab refuses those in every job file it
sends to a server (:mod:`iolab.fleet.runs`), before anything connects:

=============  ===============================================================
allowance      what is refused without it
=============  ===============================================================
``exec``       ``exec_prerun=``, ``exec_postrun=`` (run a program on the server),
               ``ioengine=exec`` (runs a program as the workload), and external
               engines (``ioengine=external:...`` or a path: load a shared
               object into fio on the server)
``trigger``    ``trigger*`` options (``trigger``, ``trigger-file``,
               ``trigger-remote``, ...): run a command when a trigger fires
``include``    ``include FILE`` lines: text read on the server, never checked
``expansion``  ``$`` anywhere in a line: fio expands ``${VAR}`` from the
               *server's* environment and evaluates ``$(...)``/``$ncpus``
               arithmetic, so the job that runs is not the one checked here
=============  ===============================================================

Pass ``allow={"exec", ...}`` to accept a category on purpose (the inventory's
``allow_job_options`` list does this for ``iolab run --hosts``). Errors name
the job file, the section and the option (``jobs/a.fio: [seq] exec_prerun: ...``),
and every problem of a file is reported at once.

Lines are split by fio's own rules (:func:`iolab.engine.jobfile.reader.lines`):
``[section]`` headers (any line starting with ``[``), ``key=value`` or bare
``key`` lines, ``;`` or ``#`` ending a line wherever they are, any line starting
with ``include`` an include; option names are compared without regard to case
or ``-``/``_`` (stricter than fio, which rejects such spellings).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Iterable

from iolab.core.errors import IolabError

#: The categories that can be allowed, with one line each.
ALLOWANCES = {
    "exec": "exec_prerun/exec_postrun, ioengine=exec and external ioengines (run code on the server)",
    "trigger": "trigger* options (run a command on the server when a trigger fires)",
    "include": "include directives (job text read on the server)",
    "expansion": "$ expansion (environment variables and arithmetic evaluated on the server)",
}
ALL = frozenset(ALLOWANCES)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One refused line of a job file."""

    source: str
    line: int
    section: str | None
    option: str
    category: str
    reason: str

    def __str__(self) -> str:
        where = f"[{self.section}] " if self.section else ""
        return f"{self.source}:{self.line}: {where}{self.option}: {self.reason}"


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def engine_name(value) -> str:
    """An ``ioengine=`` value as fio matches it: spaces and quotes around it dropped, lower case ('' for None)."""
    return str(value or "").strip().strip("'\"").lower()


def _engine_problem(value: str) -> str | None:
    engine = engine_name(value)
    if engine == "exec":
        return "ioengine=exec runs a program on the server"
    if engine.startswith("external") or "/" in engine or engine.endswith(".so"):
        return "an external ioengine loads a shared object into fio on the server"
    return None


def option_problem(name: str, value) -> tuple[str, str] | None:
    """(category, reason) when option ``name`` (as written or canonical) with ``value`` runs code, else None."""
    norm = _norm(name)
    if norm in ("exec_prerun", "exec_postrun"):
        return "exec", f"runs {value!r} on the server"
    if norm.startswith("trigger"):
        return "trigger", "runs a command on the server when the trigger fires"
    if norm == "ioengine":
        reason = _engine_problem(value)
        if reason:
            return "exec", reason
    return None


def problems(text: str, source: str = "job file") -> list[Problem]:
    """Every refused line of job file ``text`` (nothing is allowed).

    Lines are split as fio splits them (:func:`iolab.engine.jobfile.reader.lines`:
    only ``\\n`` ends a line, ``;`` and ``#`` cut it anywhere, any line starting
    with ``include`` includes); no fio is run, so the ``$`` in a line is seen
    before anything expands it. Undecodable text or a null byte is an
    :class:`IolabError`.
    """
    from iolab.engine.jobfile import reader as jobreader
    found = []
    for line in jobreader.lines(text, source):
        section = line.section
        if line.kind == "section":
            if "$" in section:
                found.append(Problem(source, line.number, section, "section name", "expansion",
                                     "'$' expansion is evaluated on the server"))
            continue
        if line.kind == "include":
            what = line.text[len("include"):].strip()
            found.append(Problem(source, line.number, section, "include", "include",
                                 f"includes {what or 'a file'} that iolab does not check"))
            continue
        if line.value is not None:
            key, value = line.key, line.value.strip()
        else:
            key, _, value = line.text.partition(" ")
            key, value = key.strip(), value.strip()
        option = key or line.text
        problem = option_problem(key, value)
        if problem:
            category, reason = problem
            shown = f"{key}={value}" if category == "exec" and _norm(key) == "ioengine" else key
            found.append(Problem(source, line.number, section, shown, category, reason))
        if "$" in line.text:
            found.append(Problem(source, line.number, section, option, "expansion",
                                 "'$' expansion (${VAR}, $(...), $ncpus) is evaluated on the server"))
    return found


def allowance(allow: Iterable[str] | None) -> frozenset:
    """The categories ``allow`` names (``"all"``: every one); an unknown name is an :class:`IolabError`."""
    if allow is None:
        return frozenset()
    if isinstance(allow, str):
        allow = [allow]
    allowed = frozenset(a.strip().lower() for a in allow)
    if "all" in allowed:
        return ALL
    unknown = sorted(allowed - ALL)
    if unknown:
        raise IolabError(f"unknown allowance {unknown[0]!r} (known: {', '.join(ALLOWANCES)}, all)",
                         context="allow_job_options")
    return allowed


def check_text(text: str, source: str = "job file", *, allow: Iterable[str] | None = None) -> None:
    """Raise :class:`IolabError` listing every refused line not covered by ``allow``."""
    allowed = allowance(allow)
    refused = [p for p in problems(text, source) if p.category not in allowed]
    if not refused:
        return
    first = refused[0]
    where = f"[{first.section}] " if first.section else ""
    message = f"{where}{first.option}: refused: {first.reason}"
    if len(refused) > 1:
        message += "; also " + "; ".join(
            f"line {p.line} {'[' + p.section + '] ' if p.section else ''}{p.option} ({p.category})"
            for p in refused[1:])
    categories = sorted({p.category for p in refused})
    raise IolabError(message, context=f"{source}:{first.line}",
                     hint="a fio server runs this with its own privileges; allow it on purpose with "
                          f"allow_job_options: [{', '.join(categories)}]")


def check_file(path: str | os.PathLike, *, allow: Iterable[str] | None = None) -> None:
    """:func:`check_text` of a job file on disk; errors name the file."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc
    check_text(text, str(path), allow=allow)

