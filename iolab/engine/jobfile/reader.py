"""One reader of fio job files for all of iolab: fio's own view, from fio.

fio reads a job file with its own tokeniser (``__parse_jobs_ini`` in fio's
``init.c``), and any Python re-implementation of that grammar drifts from it
(``\\r`` is not a line break to fio, ``;`` cuts a value anywhere, ``[job2``
without ``]`` starts a section, ``[globalX]`` is global, ``$ncpus`` is
expanded...). So the sections and option values iolab acts on come from fio
itself: ``fio --showcmd FILE`` prints fio's view of the file as a command line,
with every option by its canonical name and its value after fio's expansion of
``${VAR}``, ``$ncpus``, ``$mb_memory`` and ``$pagesize``, in the order fio
applies them.

That line alone is ambiguous (a value may contain `` --``; a ``[global]``
section after a job prints its options after the job's; each global section
prints every global option so far), so it is read together with the file's
*lines* as fio splits them (:func:`lines`: only ``\\n`` breaks a line, a ``;``
or ``#`` anywhere ends it, leading and trailing blanks and control characters
go). The lines say how many options each section holds and where they are
(line numbers for messages, raw values before expansion); fio's line says what
they are. Where the two cannot be matched the reader refuses with the reason,
naming the file, the section and the line.

Also from fio: canonical option names and aliases (``fio --cmdhelp``). The rules that need no fio (a
section's kind, whether a job opens its files with O_DIRECT) are in :mod:`iolab.engine.jobfile.rules`.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import re
import subprocess

from iolab.core.errors import IolabError
from iolab.engine.jobfile.rules import is_global
from iolab.isolation import confine

log = logging.getLogger(__name__)

#: fio's longest job-file line (OPT_LEN_MAX, including the newline): fgets splits longer ones.
MAX_LINE = 8191
#: fio's longest section name (``sscanf("[%255[^\\n]]")``).
MAX_NAME = 255
_SPACE = frozenset(b" \t\n\v\f\r")


def _blank(byte: int) -> bool:
    """C's ``isspace(c) || iscntrl(c)`` in the C locale, as fio tests job-file characters."""
    return byte in _SPACE or byte < 32 or byte == 127


@dataclasses.dataclass(frozen=True)
class Line:
    """One meaningful line of a job file, as fio's tokeniser sees it (comments and blank lines dropped)."""

    number: int
    text: str  # after fio's stripping: no leading blanks, cut at ';'/'#', no trailing blanks
    section: str | None  # the section it is in (its own name for a section header)
    kind: str  # "section", "option" or "include"

    @property
    def key(self) -> str:
        return self.text.partition("=")[0].strip()

    @property
    def value(self) -> str | None:
        key, sep, value = self.text.partition("=")
        return value if sep else None


@dataclasses.dataclass(frozen=True)
class Option:
    """One option as fio applied it: canonical name, value after expansion, and its line (0: unknown)."""

    name: str
    value: str | None
    line: int = 0


@dataclasses.dataclass
class Section:
    """A ``[section]`` of a job file in fio's view; ``is_global`` as fio decides it (:func:`is_global`)."""

    name: str
    line: int
    options: list  # [Option] in the order fio applies them

    @property
    def is_global(self) -> bool:
        return is_global(self.name)


def decode(data, source: str) -> str:
    """Job-file text from ``str`` or ``bytes``: UTF-8, no null byte (fio would stop reading there)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise IolabError(f"line {line} is not UTF-8 text (byte 0x{data[exc.start]:02x}); iolab checks only "
                             "text it can read", context=source) from None
    if "\0" in data:
        line = data[:data.index("\0")].count("\n") + 1
        raise IolabError(f"line {line} holds a null byte: fio would read the line only up to it, iolab "
                         "refuses to guess", context=source)
    return data


def _strip(raw: bytes) -> bytes:
    """fio's strip_blank_front + strip_blank_end: cut at the first ';', then '#', trim blanks both ends."""
    start = 0
    while start < len(raw) and raw[start] in _SPACE:
        start += 1
    text = raw[start:]
    text = text.split(b";", 1)[0].split(b"#", 1)[0]
    end = len(text)
    while end > 0 and _blank(text[end - 1]):
        end -= 1
    return text[:end]


def _empty_or_comment(raw: bytes) -> bool:
    """fio's is_empty_or_comment: only blanks before a ';' or '#' (or the end)."""
    for byte in raw:
        if byte in (ord(";"), ord("#")):
            return True
        if not _blank(byte):
            return False
    return True


def lines(text: str, source: str = "job file") -> list[Line]:
    """The lines of a job file as fio's tokeniser splits them (no fio run; raw values, no expansion)."""
    text = decode(text, source)
    found: list[Line] = []
    section = None
    for number, raw in enumerate(text.encode("utf-8").split(b"\n"), start=1):
        if len(raw) + 1 > MAX_LINE:
            raise IolabError(f"line {number} is longer than fio's {MAX_LINE} characters: fio would split it "
                             "into two lines", context=source)
        if _empty_or_comment(raw):
            continue
        line = _strip(raw)
        if line.startswith(b"["):
            name = line[1:1 + MAX_NAME][:-1].decode("utf-8", "replace")  # fio drops the last character
            section = name
            found.append(Line(number, line.decode("utf-8", "replace"), name, "section"))
        elif section is not None and line.startswith(b"include"):  # fio: any line starting "include"
            found.append(Line(number, line.decode("utf-8", "replace"), section, "include"))
        else:
            found.append(Line(number, line.decode("utf-8", "replace"), section, "option"))
    return found


# ------------------------------------------------------------------ fio's view

def _fio() -> str:
    from iolab.engine import fio
    return fio.fio_binary()


def _showcmd(text: str, source: str) -> str:
    """``fio --showcmd -`` of ``text`` (given on stdin: no file to place where a confined fio can see it,
    e.g. with TMPDIR under /dev/shm); fio's refusal is raised."""
    argv = confine.reader_argv([_fio(), "--showcmd", "-"])  # fio reads what it is told (includes)
    try:
        proc = subprocess.run(argv, cwd="/", input=text.encode("utf-8"), capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IolabError(f"fio --showcmd could not read the job file: {exc}", context=source) from exc
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        errors = [line.strip() for line in (proc.stderr.decode("utf-8", "replace") + out).splitlines()
                  if line.strip().startswith("fio:") or "Bad option" in line or "failed parsing" in line]
        why = "; ".join(errors[:3]) or f"fio --showcmd exited {proc.returncode}"
        raise IolabError(f"fio refuses this job file: {why}", context=source)
    return out


def _tokens(out: str, source: str) -> list[tuple[str, str | None]]:
    """(name, value) of each ``--name[=value]`` of fio's command line, split at every `` --``."""
    body = out.strip("\n")
    if not body.startswith("fio "):
        raise IolabError(f"fio --showcmd printed {body[:60]!r}, not a command line", context=source)
    body = body[len("fio "):]
    if body.endswith(" "):
        body = body[:-1]
    if not body:
        return []
    if not body.startswith("--"):
        raise IolabError(f"fio --showcmd printed {body[:60]!r}, not options", context=source)
    tokens = []
    for part in body[2:].split(" --"):
        name, sep, value = part.partition("=")
        if sep and name == "description" and len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]  # fio quotes only the description
        tokens.append((name.rstrip(" "), value if sep else None))
    return tokens


def _ambiguous(section: str, number: int, source: str, why: str) -> IolabError:
    return IolabError(f"[{section}] line {number}: iolab cannot tell how fio reads this: {why}", context=source,
                      hint="write each value without ' --' (fio's own view of the file is ambiguous there)")


def sections(text: str, source: str = "job file", *, load_code: bool = False) -> list[Section]:
    """fio's view of job file ``text``: every section with its options, values after fio's expansion.

    Raises :class:`IolabError` naming ``source`` when fio rejects the file, when
    it holds ``include`` lines (text iolab does not see), or when fio's view
    cannot be matched to the file's lines (a value containing `` --``).
    Expansion uses this process's environment, as the fio iolab starts does.

    Reading a job can run code: fio loads an external ioengine (``ioengine=/x.so``,
    ``external:/x.so``) while it parses, before anything runs. Unless
    ``load_code`` (the user allowed it: ``--allow-exec``), a job naming an engine
    that is not a plain name is refused here, before fio sees it.
    """
    text = decode(text, source)
    if not load_code:
        loading = code_loading(lines(text, source))
        if loading:
            raise IolabError(f"[{loading.section}] line {loading.number}: {loading.text}: refused: an external "
                             "ioengine loads a shared object into fio (fio loads it even to read the job)",
                             context=source, hint="run programs from a job on purpose with --allow-exec")
    return [dataclasses.replace(s, options=list(s.options)) for s in _sections(text, source, _env_key())]


def code_loading(file_lines: list[Line]) -> Line | None:
    """The first line setting ``ioengine`` to anything but a plain engine name (a path, ``external:``, ``$``)."""
    for line in file_lines:
        if line.kind == "option" and line.value is not None and canonical(line.key) == "ioengine":
            if not re.fullmatch(r"[A-Za-z0-9_-]+", line.value.strip().strip("'\"").strip()):
                return line
    return None


def written_sections(text: str, source: str = "job file") -> list[Section]:
    """The sections of job file ``text`` as written, without fio: values as in the file (no expansion; a bare
    option's value None), canonical names, in the file's order. For a job fio must not read (it would load
    an external engine while reading it); :func:`sections` is fio's own view."""
    found: list[Section] = []
    for line in lines(text, source):
        if line.kind == "section":
            found.append(Section(line.section, line.number, []))
        elif line.kind == "option" and found:
            value = None if line.value is None else line.value.strip()
            found[-1].options.append(Option(canonical(line.key), value, line.number))
    return found


def _env_key() -> str:
    return hashlib.sha256(repr(sorted(os.environ.items())).encode()).hexdigest()


@functools.lru_cache(maxsize=64)
def _sections(text: str, source: str, env_key: str) -> tuple:
    file_lines = lines(text, source)
    includes = [line for line in file_lines if line.kind == "include"]
    if includes:
        first = includes[0]
        raise IolabError(f"[{first.section}] line {first.number}: {first.text!r} includes a file into the job "
                         "(fio includes any line starting with 'include'); iolab checks only job text it sees",
                         context=source, hint="put the included options in the job file itself")
    headers = [line for line in file_lines if line.kind == "section"]
    options_of = {}
    for line in file_lines:
        if line.kind == "option":
            if line.section is None:
                raise IolabError(f"line {line.number}: option {line.text!r} outside of a [section]",
                                 context=source)
            options_of.setdefault(id_of(headers, line), []).append(line)
    tokens = _tokens(_showcmd(text, source), source)
    result, index, globals_so_far = [], 0, []
    for position, header in enumerate(headers):
        own = options_of.get(position, [])
        global_section = is_global(header.section)
        if not global_section:
            if index >= len(tokens) or tokens[index] != ("name", header.section):
                where = own[0].number if own else header.number
                raise _ambiguous(header.section, where, source,
                                 f"fio's view has {tokens[index] if index < len(tokens) else 'nothing'} "
                                 f"where the section starts")
            index += 1
            expected = len(own)
        else:
            expected = len(globals_so_far) + len(own)  # fio prints every global option so far
        dump = tokens[index:index + expected]
        index += expected
        if len(dump) != expected:
            raise _ambiguous(header.section, header.number, source, "fio's view holds fewer options than the lines")
        if global_section:
            if dump[:len(globals_so_far)] != globals_so_far:
                raise _ambiguous(header.section, header.number, source,
                                 "a value contains ' --' (fio's view of the global options shifted)")
            mine = dump[len(globals_so_far):]
            globals_so_far = list(dump)
        else:
            mine = dump
        result.append(Section(header.section, header.number, _with_lines(mine, own)))
    if index != len(tokens):
        suspects = [line for line in file_lines if line.kind == "option" and " --" in line.text]
        line = suspects[0] if suspects else (file_lines[-1] if file_lines else Line(0, "", "?", "option"))
        raise _ambiguous(line.section or "?", line.number, source,
                         f"{line.key or 'a value'} contains ' --' (fio's view has {len(tokens) - index} "
                         "options more than the file has lines)")
    return tuple(result)


def id_of(headers: list[Line], line: Line) -> int:
    """Index of the last section header before ``line``."""
    position = -1
    for number, header in enumerate(headers):
        if header.number < line.number:
            position = number
    return position


def _with_lines(dump: list, own: list[Line]) -> list[Option]:
    """fio's (name, value) pairs with the line each came from (matched by canonical name, in order)."""
    pending = {}
    for line in own:
        pending.setdefault(canonical(line.key), []).append(line.number)
    result = []
    for name, value in dump:
        numbers = pending.get(name) or []
        result.append(Option(name, value, numbers.pop(0) if numbers else 0))
    return result


# ------------------------------------------------------------ fio's option table

@functools.lru_cache(maxsize=1)
def option_names() -> frozenset:
    """Canonical option names fio lists with ``--cmdhelp=all``."""
    proc = subprocess.run([_fio(), "--cmdhelp=all"], capture_output=True, text=True, errors="replace",
                          stdin=subprocess.DEVNULL)
    names = set()
    for line in proc.stdout.splitlines():
        name, sep, _ = line.partition(":")
        if sep and name.strip() and " " not in name.strip():
            names.add(name.strip())
    if not names:
        raise IolabError("fio --cmdhelp=all listed no options", context="fio")
    return frozenset(names)


@functools.lru_cache(maxsize=256)
def option_help(name: str) -> tuple:
    """fio's ``--cmdhelp=NAME``: (canonical name or None, aliases, valid values as (value, description))."""
    proc = subprocess.run([_fio(), f"--cmdhelp={name}"], capture_output=True, text=True, errors="replace",
                          stdin=subprocess.DEVNULL)
    text = proc.stdout
    if proc.returncode != 0 or "closest match" in text or "No such command" in text:
        return None, (), ()
    found, aliases, values = None, [], []
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        key, rest = key.strip(), rest.strip()
        if not sep:
            continue
        if found is None and key and key not in ("alias", "type", "default"):
            found = key
        elif key == "alias":
            aliases += [a.strip() for a in rest.split(",") if a.strip()]
        elif key in ("valid values", ""):
            value, _, description = rest.partition(" ")
            if value:
                values.append((value, description.strip()))
    return found, tuple(aliases), tuple(values)


def canonical(key: str) -> str:
    """fio's canonical name of option ``key`` (an alias maps to its option; unknown names stay)."""
    if not key or key in option_names():
        return key
    name, aliases, _ = option_help(key)
    if name and (key in aliases or key.lower() == name.lower()):
        return name
    lowered = key.lower()
    return lowered if lowered in option_names() else key


def job_options(text: str, source: str = "job file") -> dict:
    """``{job name: [(canonical option, value), ...]}`` of a job file, as fio reads it ([global] sections apply to
    the jobs after them). A job loading an external engine (allowed with ``--allow-exec``) is read from its lines
    as written, without fio (fio would load the engine to read it)."""
    read = written_sections if code_loading(lines(text, source)) is not None else sections
    jobs, globals_ = {}, []
    for section in read(text, source):
        options = [(canonical(o.name), o.value) for o in section.options]
        if section.is_global:
            globals_ += options
        else:
            jobs[section.name] = globals_ + options
    return jobs
