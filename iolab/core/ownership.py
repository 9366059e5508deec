"""Who made what: a ledger of the objects iolab creates, so a crash leaves nothing unowned.

Every object a run makes on the machine -- a loop device, its backing file, a
mount, a cgroup, a huge-page reservation, a systemd scope, a database
cluster -- gets one small JSON record in the state directory (default
``/run/iolab/owned`` for root, ``IOLAB_STATE_DIR`` overrides it)::

    {"kind": "loop", "id": "/dev/loop3",
     "owner": {"pid": 4711, "start": 1234567, "boot": "0f3c..."},
     "undo": "losetup --detach /dev/loop3",
     "details": {"backing_file": "/var/tmp/iolab-emulated-4711-ab12cd-x.img"},
     "created": "2026-11-24T22:50:01Z"}

An object made by a higher layer (a database cluster of :mod:`iolab.classic`)
names the module that undoes it (``"undone_by": "iolab.classic.pgcluster"``):
the reaper, which sits below that layer, imports it by that name and calls its
``undo_stale(id, details, dry_run=)``.

The record is written (atomically: temporary file + rename) as soon as the
object exists -- or, where the name is known beforehand, just before it is
made -- and removed when the object is undone. ``owner.start`` is the
process start time from ``/proc/PID/stat`` (field 22, clock ticks since
boot), so a PID the kernel has since given to another process is not taken
for the owner. :mod:`iolab.engine.reaper` undoes the objects of owners that are gone.

Objects also carry the owner in their names where they can (cgroups
``iolab-<pid>-<hex>``, backing files ``iolab-emulated-<pid>-...``, mount
points ``iolab-mnt-<pid>-...``), so the reaper finds them even when a process
died between making an object and writing its record.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from iolab.core import owner

log = logging.getLogger(__name__)

ENV = "IOLAB_STATE_DIR"
ROOT_STATE_DIR = "/run/iolab/owned"
KINDS = ("pgcluster", "mariadb", "scope", "mount", "dm", "iscsi", "loop", "file", "cgroup", "hugepages")


@dataclasses.dataclass(frozen=True)
class Owner:
    """A process, told apart from a later one with the same PID by its start time and the boot
    (the identity of :mod:`iolab.core.owner`, which run manifests use too)."""

    pid: int
    start: int | None = None
    boot: str | None = None

    def alive(self) -> bool:
        """Whether this very process still exists (a zombie counts as gone)."""
        if self.boot and self.boot != owner.boot_id():
            return False
        if _state(self.pid) in (None, "Z", "X"):
            return False
        return self.start is None or owner.start_ticks(self.pid) == self.start

    def as_dict(self) -> dict:
        return {"pid": self.pid, "start": self.start, "boot": self.boot}

    @classmethod
    def of(cls, pid: int) -> "Owner":
        """The process ``pid`` as it is now (start None when it is gone)."""
        return cls(int(pid), owner.start_ticks(int(pid)), owner.boot_id())


def _state(pid: int) -> str | None:
    """The state letter in /proc/PID/stat (R, S, D, Z, ...), None when there is no such process."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def me() -> Owner:
    return Owner.of(os.getpid())


def pid_alive(pid: int) -> bool:
    """Whether some live process has this PID (for objects that carry only a PID in their name)."""
    return Owner(int(pid)).alive()


def state_dir() -> Path:
    """Where records live: ``$IOLAB_STATE_DIR``, else /run/iolab/owned (root), else a per-user temp dir."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path(ROOT_STATE_DIR)
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"iolab-{os.geteuid()}" / "owned"


@dataclasses.dataclass
class Record:
    kind: str
    id: str
    owner: Owner
    undo: str
    details: dict
    created: str | None = None
    path: Path | None = None
    #: the module whose ``undo_stale`` undoes the object (objects of layers above the reaper)
    undone_by: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.id}"


def _file_name(kind: str, ident: str) -> str:
    digest = hashlib.sha1(ident.encode()).hexdigest()[:16]
    return f"{kind}-{digest}.json"


def record(kind: str, ident: str, *, undo: str, by: Owner | None = None, undone_by: str | None = None,
           **details) -> Path | None:
    """Write (or replace) the record of object ``kind``/``ident`` owned by ``by``; returns its path.

    ``undone_by`` names the module whose ``undo_stale`` undoes the object (see the module docstring).

    Never raises: a ledger that cannot be written (read-only /run, no space)
    is logged, and the object then has only its name to carry its owner.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown object kind {kind!r}")
    by = by or me()
    data = {"kind": kind, "id": str(ident), "owner": by.as_dict(), "undo": undo, "details": details,
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if undone_by is not None:
        data["undone_by"] = undone_by
    directory = state_dir()
    path = directory / _file_name(kind, str(ident))
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, default=str)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        log.warning("cannot record %s %s in %s: %s", kind, ident, directory, exc.strerror or exc)
        return None
    log.debug("recorded %s %s (owner %d)", kind, ident, by.pid)
    return path


def forget(kind: str, ident: str) -> None:
    """Remove this process's record of ``kind``/``ident`` once the object is undone.

    A record that names another owner is left alone (the reaper drops those
    with :func:`drop`; a live owner's record is not ours to remove).
    """
    path = state_dir() / _file_name(kind, str(ident))
    found = _load(path)
    if found is None or found.owner.pid != os.getpid():
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def drop(rec: Record) -> None:
    """Remove ``rec``'s file (the reaper, after undoing the object)."""
    if rec.path is not None:
        with contextlib.suppress(FileNotFoundError):
            rec.path.unlink()


def _load(path: Path) -> Record | None:
    try:
        data = json.loads(path.read_text())
        who = data["owner"]
        return Record(kind=data["kind"], id=str(data["id"]),
                      owner=Owner(int(who["pid"]), who.get("start"), who.get("boot")),
                      undo=str(data.get("undo", "")), details=dict(data.get("details") or {}),
                      created=data.get("created"), path=path, undone_by=data.get("undone_by"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable ownership record %s: %s", path, exc)
        return None


def records(kind: str | None = None) -> list[Record]:
    """Every readable record (optionally of one kind)."""
    directory = state_dir()
    try:
        names = sorted(p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except OSError:
        return []
    out = []
    for path in names:
        rec = _load(path)
        if rec is not None and (kind is None or rec.kind == kind):
            out.append(rec)
    return out


def find(kind: str, ident: str) -> Record | None:
    return _load(state_dir() / _file_name(kind, str(ident)))


@contextlib.contextmanager
def locked():
    """Serialise reapers (two runs starting at once must not undo the same object twice)."""
    import fcntl
    directory = state_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.warning("cannot lock %s: %s", directory, exc.strerror)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
