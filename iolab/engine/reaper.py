"""Undo what iolab processes that died (``kill -9``, a crash, a power-cut shell) left behind.

``reap()`` gathers stale objects from two sources:

* the ownership ledger (:mod:`iolab.core.ownership`): one record per object, with
  the owner's PID, start time and boot -- a record whose owner is gone is stale;
* names that carry the owner's PID, for objects made before their record was
  written (or by an iolab without the ledger): cgroups ``iolab-<pid>-<hex>``
  (and scopes), loop devices over ``iolab-emulated-<pid>-...`` files, mounts
  on ``iolab-mnt-<pid>-...`` or on such a loop device, backing files in
  /var/tmp, huge-page holder marks ``iolab-hugepages.<pid>``. A record, when
  there is one, decides (its start time tells a reused PID from the owner).

They are undone in an order that lets each step succeed: stop a database
cluster (PostgreSQL, MariaDB: its record names the module that undoes it,
imported by that name, as the layers above the engine are not imported here), kill the tasks still in dead owners' cgroups (fio keeps the device
busy), unmount, detach loop devices, remove backing files, remove cgroups and
scopes, give back huge pages. Every undo checks first that the object is
still the one recorded (a loop number, a mount point may have been reused).
With ``data_dir`` the run manifests left ``running`` by dead processes become
``interrupted`` (:func:`iolab.engine.store.interrupt_orphans`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os

from iolab.isolation import cgroups, hugepages, systemd_scope
from iolab.devices import dmdelay, emulated, loopdev
from iolab.core import ownership
from iolab.engine import store
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: the order objects are undone in (see the module docstring)
ORDER = ("pgcluster", "mariadb", "tasks", "mount", "dm", "iscsi", "loop", "file", "scope", "cgroup", "hugepages")


@dataclasses.dataclass
class Stale:
    kind: str
    id: str
    pid: int
    details: dict
    record: ownership.Record | None = None


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
    for pid, pages in hugepages.stale_hugepage_marks().items():
        add("hugepages", f"pid-{pid}", pid, pages=pages)
    return list(found.values())


def find_stale() -> list[Stale]:
    """Every object whose owner is gone, in undo order.

    Not root: only this user's ledger (the machine's loop devices, mounts and
    cgroups are root's to undo, and a warning on every run would help nobody).
    """
    known = {(r.kind, r.id): r for r in ownership.records()}
    stale = [Stale(r.kind, r.id, r.owner.pid, r.details, r) for r in known.values() if not r.owner.alive()]
    if os.geteuid() == 0:
        stale += _from_names(known)
    return sorted(stale, key=lambda s: (ORDER.index(s.kind), s.id))


def _undo_by_module(item: Stale, *, dry_run: bool) -> str | None:
    """Undo an object of a layer above this one with the ``undo_stale`` of the module its record names."""
    name = item.record.undone_by
    if not name.startswith("iolab."):
        raise IolabError(f"the record names {name!r} to undo it, not an iolab module",
                         context=str(item.record.path))
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise IolabError(f"cannot import {name} to undo it: {exc}", context=str(item.record.path)) from None
    return module.undo_stale(item.id, item.details, dry_run=dry_run)


def _undo(item: Stale, *, dry_run: bool) -> str | None:
    d = item.details
    if item.record is not None and item.record.undone_by:
        return _undo_by_module(item, dry_run=dry_run)
    if item.kind == "mount":
        return emulated.undo_stale_mount(item.id, d, dry_run=dry_run)
    if item.kind == "dm":
        return dmdelay.undo_stale(item.id, d, dry_run=dry_run)
    if item.kind == "loop":
        return loopdev.undo_stale(item.id, d, dry_run=dry_run)
    if item.kind == "file":
        return emulated.undo_stale_file(item.id, d, dry_run=dry_run)
    if item.kind == "scope":
        return systemd_scope.undo_stale(item.id, d.get("dirs") or [], dry_run=dry_run)
    if item.kind == "cgroup":
        return cgroups.undo_stale(item.id, d.get("dirs") or [], dry_run=dry_run)
    if item.kind == "hugepages":
        return hugepages.undo_stale_hugepages(item.pid, int(d.get("pages") or 0), dry_run=dry_run)
    raise IolabError(f"unknown kind of object {item.kind!r}", context=str(item.record and item.record.path))


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
    from iolab.core import owner
    lines = []
    for run_dir in store.run_dirs(data_dir) if os.path.exists(data_dir) else []:
        try:
            manifest = store.read_manifest(run_dir)
        except IolabError:
            continue
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


def reap_unlocked(*, dry_run: bool = False) -> list[str]:
    """:func:`reap` without taking the reapers' lock (the caller holds :func:`iolab.core.ownership.locked`)."""
    items = find_stale()
    if not items:
        return []
    return _stop_tasks(items, dry_run=dry_run) + _undo_all(items, dry_run=dry_run)


def reap(*, dry_run: bool = False, data_dir=None) -> list[str]:
    """Undo every object whose owning iolab process is gone; one line per object (what was done,
    or with ``dry_run`` what would be). A failure to undo one object is a line too (its record
    stays for the next attempt); the others are still undone."""
    # a dry run changes nothing, so it does not wait for (or hold up) a reaper at work
    with (contextlib.nullcontext() if dry_run else ownership.locked()):
        lines = reap_unlocked(dry_run=dry_run)
    if data_dir is not None:
        lines += _orphan_runs(data_dir, dry_run=dry_run)
    for line in lines:
        log.info("%s", line)
    return lines


def reap_before_run(data_dir=None) -> list[str]:
    """What ``iolab run`` does first: reap, and say so in one log line (never fails the run)."""
    try:
        lines = reap(data_dir=data_dir)
    except (IolabError, OSError) as exc:
        log.warning("could not reap what earlier iolab runs left: %s", exc)
        return []
    if lines:
        log.warning("reaped %d object(s) left by iolab processes that are gone: %s", len(lines), "; ".join(lines))
    return lines


def stale_loops() -> dict[str, int]:
    """``{"/dev/loopN": owner PID}`` for loop devices whose iolab owner is gone (``iolab devices``)."""
    return {item.id: item.pid for item in find_stale() if item.kind == "loop"}
