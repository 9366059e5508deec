"""Undo what iolab processes that died (``kill -9``, a crash, a power-cut shell) left behind.

``reap()`` gathers stale objects from two sources:

* the ownership ledger (:mod:`iolab.core.ownership`): one record per object, with
  the owner's PID, start time, boot and PID namespace -- a record whose owner is gone is
  stale, one of an earlier boot always; a record whose owner lives in another PID namespace
  than this reaper is not judged (its PID means another process here) and is left alone with
  a line that says why; a damaged or planted entry (not JSON, wrong types, absurd numbers,
  a shape its kind never has) is reported and left alone;
* names that carry the owner's PID, for objects made before their record was
  written (or by an iolab without the ledger): cgroups ``iolab-<pid>-<hex>``
  (and scopes), loop devices over ``iolab-emulated-<pid>-...`` files, mounts
  on ``iolab-mnt-<pid>-...`` or on such a loop device, backing files in
  /var/tmp. A record, when there is one, decides (its start time tells a reused PID from
  the owner). Names carry no namespace: they are judged only by a reaper in the machine's
  first PID namespace.

They are undone in an order that lets each step succeed: stop a database
cluster (PostgreSQL, MariaDB: its record names the undo registered for it in
:mod:`iolab.engine.registry`), kill the tasks still in dead owners' cgroups (fio keeps the device
busy), unmount, detach loop devices, remove backing files, remove cgroups and
scopes, give back huge pages, give the machine its dirty-page limits back. Every undo checks first that the object is
still the one recorded (a loop number, a mount point may have been reused).
With ``data_dir`` the run manifests left ``running`` by dead processes become
``interrupted`` (:func:`iolab.engine.store.interrupt_orphans`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os

from iolab.isolation import cgroupfs, cgroups, dirtylimits, hugepages, systemd_scope
from iolab.devices import dmdelay, emulated, loopdev
from iolab.core import owner, ownership, statedir
from iolab.engine import registry, store
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: the order objects are undone in (see the module docstring)
ORDER = ("pgcluster", "mariadb", "tasks", "mount", "dm", "iscsi", "loop", "file", "scope", "cgroup", "hugepages",
         "sysctl")


# A record made with ``undone_by=NAME`` is undone by the function registered as NAME in
# iolab.engine.registry (filled in one place, iolab.classic.registered: run directories, iSCSI targets,
# PostgreSQL clusters, MariaDB servers). A record naming any other is left alone; nothing is imported by it.


@dataclasses.dataclass
class Stale:
    kind: str
    id: str
    pid: int
    details: dict
    record: ownership.Record | None = None


@dataclasses.dataclass
class Survey:
    """What a reaper found: objects to undo, and lines about entries it leaves alone."""

    stale: list[Stale]
    unjudged: list[str] = dataclasses.field(default_factory=list)
    damaged: list[str] = dataclasses.field(default_factory=list)


def _from_names(known: dict) -> list[Stale]:
    """Objects found by their names (owner PID in the name) whose owner is gone and that have no record."""
    found: dict[tuple, Stale] = {}

    def add(kind, ident, pid, **details):
        if (kind, ident) in known or pid is None or ownership.pid_alive(pid):
            return None
        item = found.setdefault((kind, ident), Stale(kind, ident, pid, {}))
        for key, value in details.items():
            if isinstance(value, list):
                item.details.setdefault(key, [])
                item.details[key] += [v for v in value if v not in item.details[key]]
            else:
                item.details[key] = value
        return item

    for path in cgroups.leftovers():
        name = os.path.basename(path)
        kind = "scope" if name.endswith(cgroups.SCOPE_SUFFIX) else "cgroup"
        add(kind, name, cgroups.owner_of(name), dirs=[path])
    for loop in emulated.leftovers():
        backing = loop["backing_file"]
        pid = emulated.owner_of_name(backing, emulated.FILE_PREFIX)
        add("loop", loop["device"], pid, backing_file=backing.replace(" (deleted)", ""))
        if not backing.endswith(" (deleted)"):
            add("file", backing, pid)
    for dm in dmdelay.leftovers():
        add("dm", dm["name"], dm["owner"])
    for mount in emulated.mounts():
        add("mount", mount["mountpoint"], mount["owner"], device=mount["device"])
    for item in emulated.stale_backing_files():
        add("file", item["path"], item["owner"])
    return list(found.values())


def _path(value, what: str) -> None:
    if not isinstance(value, str) or not os.path.isabs(value) or os.path.normpath(value) != value or value == "/":
        raise ValueError(f"{what} is {str(value)[:80]!r}, not an absolute, normal path")


def _check_shape(rec: ownership.Record) -> None:
    """``ValueError`` when the record has a shape its kind never has (damaged or planted)."""
    d = rec.details
    if rec.kind == "loop":
        if not (rec.id.startswith("/dev/loop") and rec.id[9:].isdigit()):
            raise ValueError(f"id {rec.id!r} is not a loop device")
        if d.get("backing_file") is not None:
            _path(d["backing_file"], "details.backing_file")
    elif rec.kind in ("mount", "file", "pgcluster", "mariadb"):
        _path(rec.id, "id")
    elif rec.kind in ("cgroup", "scope", "dm"):
        if "/" in rec.id or rec.id in (".", ".."):
            raise ValueError(f"id {rec.id!r} is not a name")
    if rec.kind in ("cgroup", "scope"):
        dirs = d.get("dirs") or []
        if not isinstance(dirs, list):
            raise ValueError("details.dirs is not a list")
        for path in dirs:
            _path(path, "details.dirs")
            if os.path.basename(path) != rec.id or (os.path.exists(path) and not cgroupfs.is_cgroupfs(path)):
                raise ValueError(f"details.dirs names {path!r}, not the cgroup {rec.id} on a cgroup file system")
    if rec.kind == "hugepages":
        if rec.id != f"pid-{rec.owner.pid}":
            raise ValueError(f"id {rec.id!r} is not pid-{rec.owner.pid}, its owner's")
        pages = d.get("pages")
        if not isinstance(pages, int) or isinstance(pages, bool) or not 0 < pages < 2**31:
            raise ValueError(f"details.pages is {str(pages)[:80]!r}, not a count of huge pages")
    if rec.kind == "sysctl":
        if rec.id != f"vm.dirty.pid-{rec.owner.pid}":
            raise ValueError(f"id {rec.id!r} is not vm.dirty.pid-{rec.owner.pid}, its owner's")
        dirtylimits.check_details(d)
    if rec.undone_by is not None and not registry.has_undo(rec.undone_by):
        raise ValueError(f"undone_by names {rec.undone_by!r}, which registers no undo")


def survey() -> Survey:
    """Every object whose owner is gone, in undo order, and the entries left alone (with why).

    Not root: only this user's ledger (the machine's loop devices, mounts and
    cgroups are root's to undo, and a warning on every run would help nobody). Raises
    :class:`iolab.core.statedir.UnsafeStateDir` when the ledger's directory is not private.
    """
    good, damaged = ownership.scan()
    found = Survey([], damaged=[item.describe() for item in damaged])
    for rec in good:
        try:
            _check_shape(rec)
        except ValueError as exc:
            found.damaged.append(ownership.Damaged(rec.path, str(exc)).describe())
            continue
        verdict, why = rec.owner.verdict()
        if verdict == owner.GONE:
            found.stale.append(Stale(rec.kind, rec.id, rec.owner.pid, rec.details, rec))
        elif verdict == owner.FOREIGN:
            found.unjudged.append(f"PID {rec.owner.pid}: left alone {rec.describe()}: {why}")
    if os.geteuid() == 0:
        if owner.pid_namespace() == owner.INITIAL_PID_NS:
            found.stale += _from_names({(r.kind, r.id): r for r in good})
        else:
            found.unjudged.append(
                f"objects named by their owner's PID (cgroups, loop devices over iolab backing files, mount "
                f"points) are not judged: this process runs in PID namespace pid:[{owner.pid_namespace()}], not "
                f"the machine's first, so the PIDs in their names are not its own")
    found.stale.sort(key=lambda s: (ORDER.index(s.kind), s.id))
    return found


def find_stale() -> list[Stale]:
    """Every object whose owner is gone, in undo order (see :func:`survey`)."""
    return survey().stale


def _undo_hugepages(item: Stale, dry_run: bool) -> str | None:
    return hugepages.undo_stale_hugepages(item.pid, item.details.get("pages"), dry_run=dry_run)


#: kind -> undo(item, dry_run) of the objects of the layers below the reaper
UNDO = {
    "mount": lambda item, dry_run: emulated.undo_stale_mount(item.id, item.details, dry_run=dry_run),
    "dm": lambda item, dry_run: dmdelay.undo_stale(item.id, item.details, dry_run=dry_run),
    "loop": lambda item, dry_run: loopdev.undo_stale(item.id, item.details, dry_run=dry_run),
    "file": lambda item, dry_run: emulated.undo_stale_file(item.id, item.details, dry_run=dry_run),
    "scope": lambda item, dry_run: systemd_scope.undo_stale(item.id, item.details.get("dirs") or [], dry_run=dry_run),
    "cgroup": lambda item, dry_run: cgroups.undo_stale(item.id, item.details.get("dirs") or [], dry_run=dry_run),
    "hugepages": _undo_hugepages,
    "sysctl": lambda item, dry_run: dirtylimits.undo_stale(item.pid, item.details, dry_run=dry_run),
}


def _undo(item: Stale, *, dry_run: bool) -> str | None:
    if item.record is not None and item.record.undone_by:
        undo = registry.undo_function(item.record.undone_by, context=str(item.record.path))
        return undo(item.id, item.details, dry_run=dry_run)
    if item.kind not in UNDO:
        raise IolabError(f"no undo for an object of kind {item.kind!r}", context=str(item.record and item.record.path))
    return UNDO[item.kind](item, dry_run)


def _stop_tasks(items: list[Stale], *, dry_run: bool) -> list[str]:
    """Kill what still runs in dead owners' cgroups (fio, postgres), so mounts and loops can go.

    A scope where systemd manages cgroups is stopped here (``systemctl stop``
    ends its tasks), not emptied behind systemd's back.
    """
    lines = []
    for item in items:
        if item.kind not in ("cgroup", "scope"):
            continue
        if item.kind == "scope" and cgroups.systemd_managed():
            continue  # systemd_scope.undo_stale stops it, first thing (see _undo_all)
        dirs = [d for d in item.details.get("dirs") or [] if os.path.isdir(d)]
        tasks = cgroups.tasks_in(dirs)
        if not tasks or dry_run:
            continue  # the dry run names them on the cgroup's line
        try:
            killed = cgroups.kill_tasks(dirs)
            lines.append(f"PID {item.pid}: killed tasks {killed} left in cgroup {item.id}")
        except IolabError as exc:
            lines.append(f"PID {item.pid}: could not stop the tasks in cgroup {item.id}: {exc}")
    return lines


def _orphan_runs(data_dir, *, dry_run: bool) -> list[str]:
    if not dry_run:
        return [f"marked run {path} interrupted (its iolab process is gone)"
                for path in store.interrupt_orphans(data_dir)]
    lines = []
    for run_dir, manifest in store.readable_runs(data_dir) if os.path.exists(data_dir) else []:
        if manifest.get("status") == store.RUNNING and owner.alive(manifest) is False:
            lines.append(f"would mark run {run_dir} interrupted (its iolab process {manifest.get('pid')} is gone)")
    return lines


def _undo_all(items: list[Stale], *, dry_run: bool) -> list[str]:
    lines = []
    if cgroups.systemd_managed():  # scopes first: systemctl stop ends the tasks that keep mounts busy
        items = sorted(items, key=lambda s: s.kind != "scope")
    for item in items:
        try:
            done = _undo(item, dry_run=dry_run)
        except IolabError as exc:
            lines.append(f"PID {item.pid}: could not undo {item.kind} {item.id}: {exc}")
            continue
        except OSError as exc:
            lines.append(f"PID {item.pid}: could not undo {item.kind} {item.id}: {exc.strerror or exc}")
            continue
        if done:
            lines.append(f"PID {item.pid}: {done}")
        if not dry_run and item.record is not None:
            ownership.drop(item.record)
    return lines


def _reap_unlocked(dry_run: bool) -> tuple[list[str], Survey]:
    found = survey()
    if not found.stale:
        return [], found
    return _stop_tasks(found.stale, dry_run=dry_run) + _undo_all(found.stale, dry_run=dry_run), found


def reap_unlocked(*, dry_run: bool = False) -> list[str]:
    """:func:`reap` without taking the reapers' lock (the caller holds :func:`iolab.core.ownership.locked`);
    only the lines of objects undone (or not)."""
    return _reap_unlocked(dry_run)[0]


def _reap(dry_run: bool, data_dir) -> tuple[list[str], Survey]:
    # a dry run changes nothing, so it does not wait for (or hold up) a reaper at work
    with (contextlib.nullcontext() if dry_run else ownership.locked()):
        lines, found = _reap_unlocked(dry_run)
    if data_dir is not None:
        lines += _orphan_runs(data_dir, dry_run=dry_run)
    for line in lines:
        log.info("%s", line)
    return lines, found


def reap(*, dry_run: bool = False, data_dir=None) -> list[str]:
    """Undo every object whose owning iolab process is gone; one line per object (what was done,
    or with ``dry_run`` what would be). A failure to undo one object is a line too (its record
    stays for the next attempt); the others are still undone. Then a line for each damaged
    ledger entry and each entry not judged (its owner in another PID namespace), left alone."""
    lines, found = _reap(dry_run, data_dir)
    return lines + found.damaged + found.unjudged


def reap_before_run(data_dir=None) -> list[str]:
    """What ``iolab run`` does first: reap, and say so in one log line. Fails the run only when
    the state directory is not private (:class:`iolab.core.statedir.UnsafeStateDir`)."""
    try:
        lines, found = _reap(False, data_dir)
    except statedir.UnsafeStateDir:
        raise
    except (IolabError, OSError) as exc:
        log.warning("could not reap what earlier iolab runs left: %s", exc)
        return []
    for line in found.damaged:
        log.warning("%s", line)
    for line in found.unjudged:
        log.debug("%s", line)
    if lines:
        log.warning("reaped %d object(s) left by iolab processes that are gone: %s", len(lines), "; ".join(lines))
    return lines


def stale_loops() -> dict[str, int]:
    """``{"/dev/loopN": owner PID}`` for loop devices whose iolab owner is gone (``iolab devices``)."""
    return {item.id: item.pid for item in find_stale() if item.kind == "loop"}
