"""The result store: ``data/<host>/<run_id>/``, written atomically, never overwritten.

A run directory holds::

    manifest.json      provenance and status (running, completed, failed, interrupted)
    recipe.yaml        the recipe as it was run (overrides applied)
    jobs/<test>.fio    the exact job files (re-runnable with plain fio)
    raw/<test>-<rep>.json  fio's own output, untouched
    results.csv        one row per test x repetition x direction (contract columns)

Every file is written to a temporary name and renamed into place, so a reader
(or a crash) never sees half a file; results.csv is rewritten after every
repetition so an interrupted run keeps everything it measured.
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import logging
import os
import re
import secrets
import socket
from pathlib import Path

import pandas as pd

from iolab.core import owner
from iolab.core.columns import EXTRA_COLUMNS, RESULT_COLUMNS
from iolab.core.errors import IolabError
from iolab.core.files import atomic_write  # noqa: F401  (the store writes every file through it)

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RESULTS = "results.csv"


def hostname() -> str:
    """This machine's short host name, safe as a directory name."""
    return safe_name(socket.gethostname().split(".")[0] or "localhost")


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "unnamed"


def utcnow() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")




class Run:
    """One run directory being written."""

    def __init__(self, path: Path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self._results: list[pd.DataFrame] = []

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @classmethod
    def create(cls, data_dir: str | os.PathLike, *, recipe: str, label: str | None = None,
               host: str | None = None, **manifest) -> "Run":
        """Make a new, unique run directory under ``data_dir/<host>/``.

        The directory is created with ``mkdir`` (which fails if it exists), so
        two runs started in the same second never share a directory.
        """
        host = safe_name(host or hostname())
        parent = Path(data_dir) / host
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IolabError(f"cannot create the data directory: {exc.strerror}", context=str(parent)) from exc
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        for _ in range(100):
            run_id = f"{stamp}-{safe_name(recipe)}-{secrets.token_hex(2)}"
            path = parent / run_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 100 collisions of 16 random bits in one second
            raise IolabError("could not find a free run directory name", context=str(parent))
        base = {"schema": 1, "run_id": run_id, "host": host, "label": label or host,
                "recipe": recipe, "status": "running", "started": utcnow(), "ended": None,
                **owner.current()}  # pid, pid_start, boot_id: who may leave it "running"
        run = cls(path, {**base, **manifest})
        run.save_manifest()
        return run

    def save_manifest(self) -> None:
        atomic_write(self.path / MANIFEST, json.dumps(self.manifest, indent=2, sort_keys=False, default=str) + "\n")

    def update(self, **fields) -> None:
        """Merge ``fields`` into the manifest and write it."""
        self.manifest.update(fields)
        self.save_manifest()

    def write(self, relpath: str, data: str | bytes) -> Path:
        target = self.path / relpath
        atomic_write(target, data)
        return target

    def add_results(self, frame: pd.DataFrame) -> None:
        """Append rows and rewrite results.csv (so nothing measured is lost)."""
        self._results.append(frame)
        table = pd.concat(self._results, ignore_index=True)
        table = order_columns(table)
        atomic_write(self.path / RESULTS, table.to_csv(index=False))

    def set_results(self, frame: pd.DataFrame) -> None:
        """Replace all rows (e.g. after flags were computed over the whole run)."""
        self._results = [frame]
        atomic_write(self.path / RESULTS, order_columns(frame.copy()).to_csv(index=False))

    @property
    def results(self) -> pd.DataFrame:
        if not self._results:
            return order_columns(pd.DataFrame(columns=RESULT_COLUMNS))
        return order_columns(pd.concat(self._results, ignore_index=True))

    def finish(self, status: str, reason: str | None = None) -> None:
        self.update(status=status, reason=reason, ended=utcnow())

    def interrupt(self, reason: str) -> None:
        """End the run as ``interrupted``; the test that was running says so too."""
        mark_interrupted(self.manifest, reason)
        self.save_manifest()


#: A test's or run's status while its owner works on it.
RUNNING = "running"


def mark_interrupted(manifest: dict, reason: str) -> dict:
    """``manifest`` with the run and its running test(s) marked interrupted, ``reason`` recorded."""
    now = utcnow()
    tests = manifest.get("tests")
    for test in tests if isinstance(tests, list) else []:
        if isinstance(test, dict) and test.get("status") == RUNNING:
            test.update(status="interrupted", ended=test.get("ended") or now,
                        error=test.get("error") or reason)
    manifest.update(status="interrupted", reason=reason, ended=manifest.get("ended") or now)
    return manifest


def interrupt_orphans(data_dir: str | os.PathLike) -> list[Path]:
    """Mark runs left ``running`` by a process that is gone as ``interrupted``; return their directories.

    The owner is the manifest's ``pid`` with its ``pid_start`` and ``boot_id``
    (recorded by :meth:`Run.create`), so a PID reused by another process does
    not keep a dead run "running". Manifests without a ``pid`` (written before
    owners were recorded) are left as they are: nobody can tell whether their
    owner lives. A missing ``data_dir`` has no orphans.
    """
    if not Path(data_dir).exists():
        return []
    reaped = []
    for run_dir, manifest in readable_runs(data_dir):
        if manifest.get("status") != RUNNING or owner.alive(manifest) is not False:
            continue
        reason = (f"interrupted: the iolab process (pid {manifest['pid']}) ended without finishing "
                  "the run; results so far are kept")
        atomic_write(run_dir / MANIFEST, json.dumps(mark_interrupted(manifest, reason), indent=2, default=str) + "\n")
        log.info("run %s: %s", run_dir, reason)
        reaped.append(run_dir)
    return reaped


def order_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Contract columns first (added as empty if missing), extras after."""
    for column in RESULT_COLUMNS:
        if column not in frame.columns:
            frame[column] = pd.NA
    known = RESULT_COLUMNS + [c for c in EXTRA_COLUMNS if c in frame.columns]
    rest = [c for c in frame.columns if c not in known]
    return frame[known + rest]


def run_dirs(path: str | os.PathLike) -> list[Path]:
    """Every run directory (one holding a manifest.json) at or below ``path``."""
    root = Path(path)
    if not root.exists():
        raise IolabError("no such file or directory", context=str(root))
    if (root / MANIFEST).is_file():
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if MANIFEST in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []  # a run directory holds no runs
        else:
            dirnames.sort()
    return sorted(found)


def read_manifest(run_dir: str | os.PathLike) -> dict:
    """The manifest of ``run_dir``; an :class:`IolabError` naming the file when it is unreadable,
    not JSON, or not what iolab writes: an object (not ``[]`` or a number) with a string
    ``run_id``, ``host``, ``recipe`` and ``status``, and arrays (if any) as ``targets`` and ``tests``."""
    path = Path(run_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except OSError as exc:
        raise IolabError(f"unreadable manifest: {exc.strerror or exc}", context=str(path)) from exc
    except ValueError as exc:  # also bytes that are not UTF-8
        raise IolabError(f"damaged manifest: not JSON ({exc})", context=str(path),
                         hint="restore manifest.json from a copy of the run, or remove the run directory") from exc
    if not isinstance(manifest, dict):
        raise IolabError(f"damaged manifest: a JSON {_json_type(manifest)} where iolab writes an object",
                         context=str(path),
                         hint="restore manifest.json from a copy of the run, or remove the run directory")
    problem = _shape_problem(manifest)
    if problem:
        raise IolabError(f"damaged manifest: {problem}", context=str(path),
                         hint="restore manifest.json from a copy of the run, or remove the run directory")
    return manifest


#: what every manifest iolab writes holds (Run.create), with the JSON type readers rely on
REQUIRED_FIELDS = {"run_id": str, "host": str, "recipe": str, "status": str}
LIST_FIELDS = ("targets", "tests")


def _shape_problem(manifest: dict) -> str | None:
    """Why ``manifest`` cannot be one iolab wrote (None: it can): a missing or mistyped field."""
    for field, kind in REQUIRED_FIELDS.items():
        if field not in manifest:
            return f"no {field}"
        if not isinstance(manifest[field], kind):
            return f"{field} is a JSON {_json_type(manifest[field])}, not a string"
    for field in LIST_FIELDS:
        if manifest.get(field) is not None and not isinstance(manifest[field], list):
            return f"{field} is a JSON {_json_type(manifest[field])}, not an array"
    return None


def _json_type(value) -> str:
    names = {list: "array", dict: "object", str: "string", bool: "boolean", int: "number", float: "number",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)


#: damaged manifests already reported by this process: (path, mtime_ns, size)
_reported: set = set()


def _report_damaged(run_dir: Path, exc: IolabError) -> None:
    """Log a damaged manifest once per process (a notebook loading data again says nothing new)."""
    path = Path(run_dir) / MANIFEST
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        key = (str(path), None, None)
    if key in _reported:
        log.debug("%s (skipped)", exc)
        return
    _reported.add(key)
    log.warning("%s: its run is skipped", exc)


def readable_runs(path: str | os.PathLike, *, named: bool = False) -> list[tuple[Path, dict]]:
    """Every run at or below ``path`` with its manifest, in :func:`run_dirs`'s order.

    A run whose manifest is damaged (unreadable, not JSON, not an object) is
    logged once, naming the file, and skipped: one bad run never breaks the
    others. With ``named``, a damaged manifest of ``path`` itself (the caller
    named that run directory) is raised instead.
    """
    found = []
    for run_dir in run_dirs(path):
        try:
            found.append((run_dir, read_manifest(run_dir)))
        except IolabError as exc:
            if named and run_dir == Path(path):
                raise
            _report_damaged(run_dir, exc)
    return found


def _check_complete(csv: Path) -> None:
    """A results.csv cut short (a copy or a disk that filled up) is refused, not read as NaNs.

    iolab writes it atomically, always ending in a newline, with every row as
    wide as the header: a missing final newline or a short row means the file
    is not the one iolab wrote.
    """
    import csv as csv_mod
    try:
        text = csv.read_text(errors="replace")
    except OSError as exc:
        raise IolabError(f"unreadable results: {exc.strerror}", context=str(csv)) from exc
    if not text.endswith("\n"):
        raise IolabError("truncated results: the last line is incomplete", context=str(csv),
                         hint="copy the run directory again, or delete results.csv to load nothing from it")
    rows = csv_mod.reader(io.StringIO(text, newline=""))  # quoted fields may hold newlines
    width = len(next(rows, []))
    for number, row in enumerate(rows, start=2):
        if len(row) != width:
            raise IolabError(f"truncated results: line {number} has {len(row)} of {width} fields", context=str(csv))


def load(path: str | os.PathLike = "data") -> pd.DataFrame:
    """Every run at or below ``path`` as one tidy DataFrame.

    One row per test x repetition x direction, with the contract columns
    (:data:`iolab.core.columns.RESULT_COLUMNS`) first. Runs without results (a
    failed start) contribute no rows; their manifests are still readable with
    :func:`manifests`. A run whose manifest is damaged is skipped and
    logged once, naming the file.
    """
    frames = []
    for run_dir, _ in readable_runs(path):  # a run without provenance is not loaded
        csv = run_dir / RESULTS
        if not csv.is_file() or csv.stat().st_size == 0:
            continue
        _check_complete(csv)
        try:
            frame = pd.read_csv(csv, keep_default_na=True)
        except (ValueError, OSError) as exc:
            raise IolabError(f"unreadable results: {exc}", context=str(csv)) from exc
        if frame.empty:
            continue
        frame["run_dir"] = str(run_dir)
        frames.append(frame)
    if not frames:
        empty = order_columns(pd.DataFrame(columns=RESULT_COLUMNS))
        return empty
    table = pd.concat(frames, ignore_index=True)
    return order_columns(table)


def manifests(path: str | os.PathLike = "data") -> pd.DataFrame:
    """One row per run with the manifest's flat fields (nested ones as dicts).

    A damaged manifest is logged once and skipped; raised when ``path`` is that run directory.
    """
    rows = []
    for run_dir, manifest in readable_runs(path, named=True):
        manifest["run_dir"] = str(run_dir)
        rows.append(manifest)
    return pd.DataFrame(rows)
