"""Who made what: a ledger of the objects iolab creates, so a crash leaves nothing unowned.

Every object a run makes on the machine -- a loop device, its backing file, a
mount, a cgroup, a huge-page reservation, a systemd scope, a database
cluster -- gets one small JSON record in the ledger directory, ``owned`` in
iolab's private state directory (:mod:`iolab.core.statedir`: ``/run/iolab/owned``
for root, mode 0700; ``IOLAB_STATE_DIR`` names another one, checked the same way)::

    {"kind": "loop", "id": "/dev/loop3",
     "owner": {"pid": 4711, "start": 1234567, "boot": "0f3c...", "pidns": 4026531836},
     "undo": "losetup --detach /dev/loop3",
     "details": {"backing_file": "/var/tmp/iolab-emulated-4711-ab12cd-x.img"},
     "created": "2026-11-24T22:50:01Z"}

``owner`` is the process (:mod:`iolab.core.owner`): its PID, start time (``/proc/PID/stat``
field 22, so a PID the kernel has since given to another process is not taken for the
owner), the boot (an owner of an earlier boot is gone) and the PID namespace (a process of
another namespace does not judge it). :mod:`iolab.engine.reaper` undoes the objects of owners
that are gone.

How a kind of object registers its undo: the reaper knows the kinds of the layers below it
(loop, mount, cgroup, ...). A layer above it records its objects with
``undone_by=__name__`` and registers ``undo_stale(id, details, *, dry_run) -> str | None``
under that same name with :func:`register_undo` (all of them in one place,
:mod:`iolab.classic.registered`, through :mod:`iolab.engine.registry`).
A record naming an unregistered function is left alone, with a line that says so.

Records are written atomically (an exclusive temporary file renamed over the name, relative
to the directory's descriptor, never through a link) as soon as the object exists -- or,
where the name is known beforehand, just before it is made -- and removed when the object
is undone. Every field is validated when a record is read: a damaged or planted record (not
JSON, wrong types, absurd numbers, a file name that does not match its kind and id) is
reported by :func:`scan` and never acted upon.

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
import re
from pathlib import Path
from typing import Callable

from iolab.core import owner, statedir
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

ENV = "IOLAB_STATE_DIR"
ROOT_STATE_DIR = statedir.ROOT_DIR + "/owned"
KINDS = ("pgcluster", "mariadb", "scope", "mount", "dm", "iscsi", "loop", "file", "cgroup", "hugepages", "sysctl")
#: the kernel's largest PID (PID_MAX_LIMIT on 64-bit)
PID_MAX = 4 * 1024 * 1024
_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_MODULE = re.compile(r"^iolab(\.[a-z_][a-z0-9_]*)+$")
_UNDO: dict[str, Callable] = {}


@dataclasses.dataclass(frozen=True)
class Owner:
    """A process, told apart from a later one with the same PID by its start time and the boot,
    and placed in its PID namespace (the identity of :mod:`iolab.core.owner`)."""

    pid: int
    start: int | None = None
    boot: str | None = None
    pidns: int | None = None

    def verdict(self) -> tuple[str, str]:
        """``(owner.ALIVE | owner.GONE | owner.FOREIGN, why)`` (see :func:`iolab.core.owner.verdict`)."""
        return owner.verdict(self.pid, self.start, self.boot, self.pidns)

    def alive(self) -> bool:
        """Whether this very process may still exist: only an owner known to be gone is not (a zombie
        is gone; one of another PID namespace is not judged, so it counts as alive)."""
        return self.verdict()[0] != owner.GONE

    def as_dict(self) -> dict:
        return {"pid": self.pid, "start": self.start, "boot": self.boot, "pidns": self.pidns}

    @classmethod
    def of(cls, pid: int) -> "Owner":
        """The process ``pid`` as it is now (start None when it is gone)."""
        pid = int(pid)
        return cls(pid, owner.start_ticks(pid), owner.boot_id(), owner.pid_namespace(pid) or owner.pid_namespace())


def me() -> Owner:
    return Owner.of(os.getpid())


def pid_alive(pid: int) -> bool:
    """Whether some live process of this PID namespace has this PID (for objects that carry only a
    PID in their name)."""
    return Owner(int(pid), pidns=owner.pid_namespace()).alive()


def state_dir() -> Path:
    """Where records live: ``$IOLAB_STATE_DIR``, else ``owned`` in :func:`iolab.core.statedir.base`."""
    env = os.environ.get(ENV)
    if env:
        return Path(os.path.abspath(env))
    return statedir.base() / "owned"


@contextlib.contextmanager
def _ledger(create: bool = True):
    """The ledger directory's descriptor, every level checked (raises IolabError when unsafe)."""
    directory = state_dir()
    if not os.environ.get(ENV):
        os.close(statedir.open_dir(directory.parent, create=create))
    with statedir.opened(directory, create=create) as fd:
        yield fd


def register_undo(name: str, undo: Callable) -> None:
    """Register ``undo(id, details, *, dry_run) -> str | None`` for records made with ``undone_by=name``."""
    if not _MODULE.match(name):
        raise ValueError(f"an undo is registered under its module's name, not {name!r}")
    _UNDO[name] = undo


def undo_function(name: str) -> Callable | None:
    """The undo registered under ``name`` (None when its module has not registered it)."""
    return _UNDO.get(name)


@dataclasses.dataclass
class Record:
    kind: str
    id: str
    owner: Owner
    undo: str
    details: dict
    created: str | None = None
    path: Path | None = None
    #: the name whose registered ``undo_stale`` undoes the object (objects of layers above the reaper)
    undone_by: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.id}"


@dataclasses.dataclass
class Damaged:
    """A ledger entry that is not a valid record: reported, never acted upon."""

    path: Path
    why: str

    def describe(self) -> str:
        return f"skipped damaged ledger entry {self.path}: {self.why} (left in place; not acted upon)"


def _file_name(kind: str, ident: str) -> str:
    digest = hashlib.sha1(ident.encode()).hexdigest()[:16]
    return f"{kind}-{digest}.json"


def record(kind: str, ident: str, *, undo: str, by: Owner | None = None, undone_by: str | None = None,
           **details) -> Path | None:
    """Write (or replace) the record of object ``kind``/``ident`` owned by ``by``; returns its path.

    ``undone_by`` names the registered undo of the object (see the module docstring).

    Never raises for the machine's sake: a ledger that cannot be written (read-only /run, no
    space, a state directory refused as unsafe) is logged, and the object then has only its name
    to carry its owner.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown object kind {kind!r}")
    by = by or me()
    data = {"kind": kind, "id": str(ident), "owner": by.as_dict(), "undo": undo, "details": details,
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if undone_by is not None:
        data["undone_by"] = undone_by
    name = _file_name(kind, str(ident))
    try:
        with _ledger() as fd:
            statedir.replace(fd, name, json.dumps(data, default=str).encode())
        where = state_dir() / name
    except (OSError, IolabError) as exc:
        log.warning("cannot record %s %s in iolab's ledger: %s", kind, ident, getattr(exc, "strerror", None) or exc)
        return None
    log.debug("recorded %s %s (owner %d)", kind, ident, by.pid)
    return where


def forget(kind: str, ident: str) -> None:
    """Remove this process's record of ``kind``/``ident`` once the object is undone.

    A record that names another owner is left alone (the reaper drops those
    with :func:`drop`; a live owner's record is not ours to remove).
    """
    found = find(kind, ident)
    if found is None or found.owner.pid != os.getpid():
        return
    drop(found)


def drop(rec: Record) -> None:
    """Remove ``rec``'s file (the reaper, after undoing the object)."""
    if rec.path is None:
        return
    try:
        with statedir.opened(rec.path.parent, create=False) as fd:
            statedir.remove(fd, rec.path.name)
    except (OSError, IolabError) as exc:
        log.warning("cannot remove ledger entry %s: %s", rec.path, getattr(exc, "strerror", None) or exc)


def _int(value, low: int, high: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} is {value!r}, not a whole number from {low} to {high}")
    return value


def _str(value, what: str, *, limit: int = 4096, empty: bool = False) -> str:
    if not isinstance(value, str) or len(value) > limit or "\0" in value or (not value and not empty):
        raise ValueError(f"{what} is {str(value)[:80]!r}, not a text of at most {limit} characters")
    return value


def _owner(value) -> Owner:
    if not isinstance(value, dict):
        raise ValueError(f"owner is {type(value).__name__}, not an object")
    start, boot, pidns = value.get("start"), value.get("boot"), value.get("pidns")
    if boot is not None and not (isinstance(boot, str) and _BOOT_ID.match(boot)):
        raise ValueError(f"owner.boot is {str(boot)[:80]!r}, not a boot id")
    return Owner(_int(value.get("pid"), 1, PID_MAX, "owner.pid"),
                 None if start is None else _int(start, 0, 2**63, "owner.start"), boot,
                 None if pidns is None else _int(pidns, 1, 2**64, "owner.pidns"))


def parse(data, name: str) -> Record:
    """The record in ``data`` (the JSON of the entry ``name``), every field checked; ``ValueError`` why not."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    kind = data.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind is {str(kind)[:80]!r}, not one of {', '.join(KINDS)}")
    ident = _str(data.get("id"), "id")
    if name != _file_name(kind, ident):
        raise ValueError(f"the name is not {_file_name(kind, ident)}, the one of {kind} {ident!r} (renamed or planted)")
    details = data.get("details", {})
    if not isinstance(details, dict):
        raise ValueError(f"details is {type(details).__name__}, not an object")
    created, undone_by = data.get("created"), data.get("undone_by")
    if undone_by is not None and not (isinstance(undone_by, str) and _MODULE.match(undone_by)):
        raise ValueError(f"undone_by is {str(undone_by)[:80]!r}, not the name of an iolab module")
    return Record(kind=kind, id=ident, owner=_owner(data.get("owner")), undo=_str(data.get("undo", ""), "undo", empty=True),
                  details=details, created=None if created is None else _str(created, "created", limit=64),
                  undone_by=undone_by)


def _load(fd: int, directory: Path, name: str) -> Record | Damaged | None:
    try:
        rec = parse(json.loads(statedir.read(fd, name)), name)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Damaged(directory / name, f"cannot read it: {exc.strerror}")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return Damaged(directory / name, str(exc) if not isinstance(exc, json.JSONDecodeError)
                       else f"not JSON ({exc.msg} at character {exc.pos})")
    rec.path = directory / name
    return rec


def scan(kind: str | None = None) -> tuple[list[Record], list[Damaged]]:
    """Every valid record (optionally of one kind), and every entry that is not one.

    A ledger directory that is missing has no records; one that is refused as unsafe raises
    :class:`IolabError` (nothing in it is trusted).
    """
    try:
        directory = state_dir()
        with _ledger(create=False) as fd:
            found = [_load(fd, directory, name) for name in statedir.names(fd)
                     if name.endswith(".json") and not name.startswith(".")]
    except FileNotFoundError:
        return [], []
    except statedir.UnsafeStateDir:
        raise
    except IolabError as exc:  # no place for a ledger at all (a user with no home): nothing recorded
        log.debug("no ledger: %s", exc)
        return [], []
    good = [r for r in found if isinstance(r, Record) and (kind is None or r.kind == kind)]
    return good, [r for r in found if isinstance(r, Damaged)]


def records(kind: str | None = None) -> list[Record]:
    """Every valid record (optionally of one kind); damaged entries are logged and left out."""
    try:
        good, damaged = scan(kind)
    except IolabError as exc:
        log.warning("%s", exc)
        return []
    for item in damaged:
        log.warning("%s", item.describe())
    return good


def find(kind: str, ident: str) -> Record | None:
    name = _file_name(kind, str(ident))
    try:
        directory = state_dir()
        with _ledger(create=False) as fd:
            found = _load(fd, directory, name)
    except (FileNotFoundError, IolabError):
        return None
    return found if isinstance(found, Record) and found.kind == kind and found.id == str(ident) else None


@contextlib.contextmanager
def locked():
    """Serialise reapers (two runs starting at once must not undo the same object twice).

    A ledger that cannot be locked (read-only /run) is logged and the caller goes on unlocked;
    a state directory refused as unsafe raises :class:`iolab.core.statedir.UnsafeStateDir`.
    """
    stack = contextlib.ExitStack()
    try:
        fd = stack.enter_context(_ledger())
        stack.enter_context(statedir.lock(fd, ".lock", what="iolab's ledger lock"))
    except statedir.UnsafeStateDir:
        stack.close()
        raise
    except (OSError, IolabError) as exc:
        stack.close()
        log.warning("cannot lock iolab's ledger: %s", getattr(exc, "strerror", None) or exc)
    except BaseException:
        stack.close()
        raise
    with stack:
        yield
