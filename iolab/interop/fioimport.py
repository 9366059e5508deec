"""fio's JSON output found in files and trees, as tidy rows through iolab's own parser.

Any output fio writes with ``--output-format=json`` or ``json+`` is read by
:func:`iolab.engine.fio.parse_output` (text before and after the JSON, several documents,
``client_stats`` of client/server runs, ``numjobs`` without ``group_reporting``, failed jobs).
bench-fio's layout ``<target>/<bs>/<rw>-<iodepth>-<numjobs>.json`` is recognised by its path:
each target directory becomes a run of its own (label: the target's name), its tests are named
by the path below the target (``4k/randread-1-1``), and the block size, queue depth and job count
the path states fill what fio's ``job options`` leave out (bench-fio passes them through the
environment, so fio's JSON may not list them).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import IolabError
from iolab.engine.fio.parse import parse_fio_size, parse_output
from iolab.engine.fio.text import scan_documents

log = logging.getLogger(__name__)

#: fio's rw modes, as bench-fio names its files after them
RW_MODES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite")
_BENCH_FIO = re.compile(r"^(?P<rw>" + "|".join(RW_MODES) + r")-(?P<iodepth>\d+)-(?P<numjobs>\d+)\.json$")


@dataclass
class FioFile:
    """One fio output file: where it is, its name inside the import, its rows and what it says of itself."""
    path: Path
    relpath: str
    frame: pd.DataFrame
    target: str | None = None
    bench_fio: dict | None = None

    @property
    def fio_version(self) -> str | None:
        return self.frame.attrs.get("fio_version")

    @property
    def timestamp_ms(self) -> int | None:
        return self.frame.attrs.get("timestamp_ms")

    @property
    def output_format(self) -> str:
        return self.frame.attrs.get("output_format") or "json"


def bench_fio_parts(relpath: str) -> dict | None:
    """``target``, ``bs``, ``rw``, ``iodepth``, ``numjobs`` of a path in bench-fio's layout (None: not one)."""
    parts = Path(relpath).parts
    if len(parts) < 3:
        return None
    found = _BENCH_FIO.match(parts[-1])
    if not found or parse_fio_size(parts[-2]) is None:
        return None
    return {"target": parts[-3], "bs": parts[-2], "rw": found["rw"],
            "iodepth": int(found["iodepth"]), "numjobs": int(found["numjobs"])}


def is_fio_output(text: str) -> bool:
    """Whether ``text`` holds a complete fio JSON document (one with ``jobs`` or ``client_stats``)."""
    return any(isinstance(doc, dict) and ("jobs" in doc or "client_stats" in doc) and "fio version" in doc
               for doc in scan_documents(text).docs)


def _json_plus(text: str) -> bool:
    return '"bins"' in text


def read_file(path: Path, relpath: str) -> FioFile:
    """One fio output file as rows; an error names the file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc
    try:
        frame = parse_output(text)
    except IolabError as exc:
        raise IolabError(f"not fio JSON output: {exc.message}", context=str(path), hint=exc.hint) from exc
    frame.attrs["output_format"] = "json+" if _json_plus(text) else "json"
    parts = bench_fio_parts(relpath)
    fio_file = FioFile(path=path, relpath=relpath, frame=frame, bench_fio=parts,
                       target=parts["target"] if parts else None)
    if parts:
        _fill_from_layout(frame, parts)
    return fio_file


def _fill_from_layout(frame: pd.DataFrame, parts: dict) -> None:
    """What bench-fio's path states, where fio's JSON left it out (never over a value fio gave)."""
    bs = parse_fio_size(parts["bs"])
    for column, value in (("bs", bs), ("iodepth", parts["iodepth"]), ("numjobs", parts["numjobs"])):
        frame[column] = frame[column].fillna(value)


def find_files(root: Path) -> list[tuple[Path, str]]:
    """(path, path relative to ``root``'s parent or ``root``) of every ``*.json`` at or below ``root``."""
    if root.is_file():
        return [(root, root.name)]
    found = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not found:
        raise IolabError("no *.json file at or below it", context=str(root))
    return [(path, path.relative_to(root).as_posix()) for path in found]


def test_names(files: list[FioFile]) -> dict[tuple[str, str | None], str]:
    """The test name of each (file, fio job): bench-fio's path below the target; else the job's name
    when it is unique in the import; else ``<file>:<job>`` (one file holding several jobs) or the file."""
    names: dict[tuple[str, str | None], str] = {}
    jobs_seen: dict[str | None, int] = {}
    for item in files:
        for job in item.frame["job"].drop_duplicates():
            jobs_seen[job] = jobs_seen.get(job, 0) + 1
    for item in files:
        stem = item.relpath[:-5] if item.relpath.endswith(".json") else item.relpath
        jobs = list(item.frame["job"].drop_duplicates())
        for job in jobs:
            if item.bench_fio:
                name = "/".join(Path(stem).parts[-2:])
            elif job and jobs_seen[job] == 1:
                name = job
            elif len(jobs) > 1:
                name = f"{stem}:{job}"
            else:
                name = stem
            names[(item.relpath, job)] = name
    return names
