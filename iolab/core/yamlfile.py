"""Reading the YAML files users write (recipes, plans, inventories): errors name file and field."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from iolab.core.errors import IolabError


def read_text(path: str | os.PathLike, *, what: str = "file") -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-UTF-8 file is an :class:`IolabError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IolabError(f"no such {what}", context=str(path)) from None
    except IsADirectoryError:
        raise IolabError(f"is a directory, not a {what}", context=str(path)) from None
    except OSError as exc:
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc
    return decode(data, str(path), what=what)


def decode(data: bytes, source: str, *, what: str = "file") -> str:
    """UTF-8 bytes -> text; otherwise an error naming the first bad byte, its offset and line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start
        line = data.count(b"\n", 0, offset) + 1
        raise IolabError(
            f"not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} (line {line})",
            context=source, hint=f"save the {what} as UTF-8") from None


def parse(text: str, source: str):
    """YAML text -> Python data; a syntax error says where (line, column)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise IolabError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", context=source) from exc


def load(path: str | os.PathLike, *, what: str = "file"):
    return parse(read_text(path, what=what), str(path))
