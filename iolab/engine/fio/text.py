"""fio's output as text: the JSON documents in it, the text around them and fio's error lines.

fio's stdout is rarely "just JSON" (notes, ``fio: pid=..., err=...`` lines,
``<host>``-prefixed server output, several documents with
``--status-interval``); this module finds the complete fio documents and reads
the lines between them. Turning a document into rows is :mod:`iolab.engine.fio.parse`.
"""
from __future__ import annotations

import errno as _errno
import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

log = logging.getLogger(__name__)

_ERROR_LINE = re.compile(
    r"fio: pid=(?P<pid>\d+), err=(?P<err>-?\d+)/file:(?P<file>[^,]*), "
    r"func=(?P<func>.*?), error=(?P<message>.*?)\s*$"
)
# A fio JSON document starts with "{" in the first column (nested objects are indented).
_DOC_START = re.compile(r"^\{", re.MULTILINE)
# "<vm> text" -- the prefix fio's client puts on the servers' output.
_HOST_PREFIX = re.compile(r"^<[^>\s]*>\s?")


# --------------------------------------------------------------------------- documents

@dataclass
class Scan:
    docs: list[dict]          # complete documents, in order
    spans: list[tuple[int, int]]
    truncated_at: int | None  # offset of an incomplete document after the last complete one
    truncated_reason: str | None


def scan_documents(text: str) -> Scan:
    decoder = json.JSONDecoder()
    docs: list[dict] = []
    spans: list[tuple[int, int]] = []
    truncated_at = reason = None
    pos = 0
    while True:
        match = _DOC_START.search(text, pos)
        if match is None:
            break
        start = match.end() - 1  # the "{"
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            truncated_at, reason = start, exc.msg
            pos = start + 1
            continue
        if isinstance(doc, dict) and _looks_like_fio(doc):
            docs.append(doc)
            spans.append((start, end))
            truncated_at = reason = None
        else:
            log.debug("ignoring a JSON value that is not a fio result at offset %d", start)
        pos = end
    return Scan(docs, spans, truncated_at, reason)


def _looks_like_fio(doc: Mapping) -> bool:
    return "jobs" in doc or "client_stats" in doc or "fio version" in doc


def documents(text: str) -> list[dict]:
    """Every complete fio JSON document in ``text``, in order of appearance.

    ``--status-interval`` prints one per interval and the final result last;
    text around and between documents is skipped.
    """
    return scan_documents(text).docs


def fio_version(doc: Mapping) -> str | None:
    """``"3.33"`` for a document written by ``fio-3.33``; ``None`` if it does not say."""
    raw = doc.get("fio version")
    if not raw:
        return None
    return str(raw).strip().removeprefix("fio-")


def outside_documents(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with the JSON documents cut out."""
    parts, last = [], 0
    for start, end in spans:
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    return "\n".join(parts)


def first_meaningful_line(text: str) -> str | None:
    """fio's own error message if the text has one, else its first non-blank line."""
    lines = [_HOST_PREFIX.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if line.startswith("fio:"):
            return line
    for line in lines:
        if not line.startswith(("note:", "{")):
            return line
    return lines[0] if lines else None


# --------------------------------------------------------------------------- errors

@dataclass(frozen=True)
class FioErrorLine:
    """One ``fio: pid=..., err=...`` line of fio's output."""

    pid: int
    errno: int
    file: str
    func: str
    message: str
    line: str


def error_lines(text: str) -> list[FioErrorLine]:
    """The ``fio: pid=..., err=N/file:..., func=..., error=...`` lines in ``text``."""
    found = []
    for raw in text.splitlines():
        match = _ERROR_LINE.search(raw)
        if match:
            found.append(FioErrorLine(
                pid=int(match["pid"]), errno=int(match["err"]), file=match["file"].strip(),
                func=match["func"].strip(), message=match["message"].strip(),
                line=_HOST_PREFIX.sub("", raw).strip(),
            ))
    return found


def error_text(code: int, line: FioErrorLine | None = None) -> str:
    """``"errno 28 (ENOSPC): No space left on device (func=io_u error, io_u.c:1876)"``."""
    name = _errno.errorcode.get(abs(code))
    head = f"errno {code} ({name})" if name else f"errno {code}"
    if line is not None and line.message:
        message = line.message
    else:
        try:
            message = os.strerror(abs(code))
        except ValueError:
            message = ""
    text = f"{head}: {message}" if message else head
    if line is not None:
        where = ", ".join(part for part in (
            f"func={line.func}" if line.func else "", line.file) if part)
        if where:
            text = f"{text} ({where})"
    return text
