"""The kernel's dirty-page limits scaled to a run's memory limit, as a ``mem=512M`` boot scales them.

A kernel booted with ``mem=512M`` lets buffered writers dirty ``vm.dirty_ratio`` (20%) of
its memory before they must write back themselves, and starts background writeback at
``vm.dirty_background_ratio`` (10%). A memory cgroup does not shrink these global limits
(under cgroup v1 a group's dirty pages are not even counted apart): a buffered writer in a
512M group on a large machine fills its group with dirty pages that reclaim cannot free
faster than a slow disk takes them, and is OOM-killed. So a cgroup-mode run with buffered
tests sets ``vm.dirty_bytes`` and ``vm.dirty_background_bytes`` to those ratios of its
memory limit (:func:`scaled`) while it runs, and gives the machine its values back afterwards.

Several iolab runs may hold the limits at once: each holder has a ledger record
(:mod:`iolab.core.ownership`, kind ``sysctl``, id ``vm.dirty.pid-<pid>``) with the machine's
values from before the first holder (``previous``) and the values it wants (``want``); the
values in force are the smallest any holder wants, changed under the lock ``dirty.lock`` in
the state directory. The last holder to leave writes ``previous`` back -- unless the values
in force are no longer iolab's (someone changed them meanwhile): those are left as found,
and the record says so. :mod:`iolab.engine.reaper` does the same for a holder that died
(:func:`undo_stale`), so ``iolab cleanup`` restores the machine's limits after a crash.
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from iolab.core import ownership, statedir
from iolab.core.errors import IolabError
from iolab.core.units import human_size

log = logging.getLogger(__name__)

VM = Path("/proc/sys/vm")
#: what a kernel booted with ``mem=`` applies when the machine sets ratios, not bytes (the kernel's defaults)
DEFAULT_RATIOS = {"dirty": 20, "dirty_background": 10}
#: the smallest ``vm.dirty_bytes`` the kernel takes (two pages)
MIN_DIRTY_BYTES = 2 * 4096
KIND = "sysctl"
LOCK_NAME = "dirty.lock"
FIELDS = ("dirty_bytes", "dirty_ratio", "dirty_background_bytes", "dirty_background_ratio")


def _read(vm: Path) -> dict:
    try:
        return {name: int((vm / name).read_text().strip()) for name in FIELDS}
    except (OSError, ValueError) as exc:
        raise IolabError(f"cannot read the dirty-page limits: {exc}", context=str(vm)) from None


def _write(vm: Path, name: str, value: int) -> None:
    try:
        fd = os.open(vm / name, os.O_WRONLY)
        try:
            os.write(fd, str(int(value)).encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise IolabError(f"cannot write {value}: {exc.strerror}", context=str(vm / name)) from None


def scaled(mem_limit: int, machine: dict) -> dict:
    """``{"dirty_bytes", "dirty_background_bytes"}`` a kernel with ``mem_limit`` of RAM would have.

    The machine's ratios where it sets ratios (else the kernel's defaults, 20% and 10%) applied
    to ``mem_limit``; a machine's own byte limit that is smaller stays (a boot keeps it too).
    """
    want = {}
    for kind in ("dirty", "dirty_background"):
        own_bytes = machine.get(f"{kind}_bytes") or 0
        ratio = DEFAULT_RATIOS[kind] if own_bytes else (machine.get(f"{kind}_ratio") or DEFAULT_RATIOS[kind])
        value = int(mem_limit) * int(ratio) // 100
        want[f"{kind}_bytes"] = min(value, own_bytes) if own_bytes else value
    want["dirty_bytes"] = max(MIN_DIRTY_BYTES, want["dirty_bytes"])
    want["dirty_background_bytes"] = max(1, min(want["dirty_background_bytes"], want["dirty_bytes"] // 2))
    return want


def check_details(details: dict) -> None:
    """``ValueError`` unless ``details`` has the shape of a holder's record (the reaper writes from it)."""
    previous, want = details.get("previous"), details.get("want")
    if not isinstance(previous, dict) or not isinstance(want, dict):
        raise ValueError("details.previous and details.want must be objects")
    for name in FIELDS:
        value, high = previous.get(name), 100 if name.endswith("ratio") else 2**62
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
            raise ValueError(f"details.previous.{name} is {str(value)[:40]!r}, not a number from 0 to {high}")
    for name in ("dirty_bytes", "dirty_background_bytes"):
        value = want.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 2**62:
            raise ValueError(f"details.want.{name} is {str(value)[:40]!r}, not a positive number of bytes")


def _holders() -> list[ownership.Record]:
    found = []
    for rec in ownership.records(KIND):
        try:
            check_details(rec.details)
        except ValueError as exc:
            log.warning("ignored the dirty-limit record %s: %s", rec.path, exc)
            continue
        found.append(rec)
    return sorted(found, key=lambda r: (r.created or "", r.id))


def _in_force(wants: list[dict]) -> dict:
    return {name: min(w[name] for w in wants) for name in ("dirty_bytes", "dirty_background_bytes")}


def _set(vm: Path, values: dict) -> None:
    """Write the byte limits (which zero their ratio twins) and check the kernel took them."""
    _write(vm, "dirty_bytes", values["dirty_bytes"])
    _write(vm, "dirty_background_bytes", values["dirty_background_bytes"])
    now = _read(vm)
    if any(now[name] != values[name] for name in ("dirty_bytes", "dirty_background_bytes")):
        raise IolabError(f"the kernel shows dirty_bytes {now['dirty_bytes']}, dirty_background_bytes "
                         f"{now['dirty_background_bytes']} after writing {values}", context=str(vm))


def _put_back(vm: Path, previous: dict) -> None:
    """The machine's values again: a ratio written back clears its byte twin, and the other way round."""
    for kind in ("dirty", "dirty_background"):
        name = f"{kind}_bytes" if previous[f"{kind}_bytes"] else f"{kind}_ratio"
        _write(vm, name, previous[name])
    now = _read(vm)
    if any(now[name] != previous[name] for name in FIELDS):
        raise IolabError(f"the kernel shows {now} after writing back {previous}", context=str(vm))


@contextlib.contextmanager
def _locked():
    with statedir.opened(statedir.base()) as fd, \
            statedir.lock(fd, LOCK_NAME, timeout=60, what="the dirty-page limits (vm.dirty_*)"):
        yield


def _ident(pid: int) -> str:
    return f"vm.dirty.pid-{pid}"


def hold(mem_limit: int, *, vm: Path = VM) -> dict:
    """Set the dirty limits for ``mem_limit`` (bytes); returns the record for the manifest (give it to
    :func:`release`): ``previous`` (the machine's), ``want``, ``in_force`` (read back), ``restored`` None."""
    with _locked():
        others = _holders()
        previous = dict(others[0].details["previous"]) if others else _read(vm)
        want = scaled(mem_limit, previous)
        ownership.record(KIND, _ident(os.getpid()), undo="write back vm.dirty_* (previous)",
                         previous=previous, want=want)  # before the write: a crash right after is undone
        in_force = _in_force([want] + [r.details["want"] for r in others])
        try:
            _set(vm, in_force)
        except BaseException:
            with contextlib.suppress(IolabError):
                _set(vm, _in_force([r.details["want"] for r in others])) if others else _put_back(vm, previous)
            ownership.forget(KIND, _ident(os.getpid()))
            raise
    log.info("dirty limits for a %s memory limit: dirty_bytes %s, dirty_background_bytes %s", human_size(mem_limit),
             human_size(in_force["dirty_bytes"]), human_size(in_force["dirty_background_bytes"]))
    return {"mem_limit": int(mem_limit), "previous": previous, "want": want, "in_force": in_force,
            "held_with": [r.owner.pid for r in others], "restored": None, "note": None}


def _leave(vm: Path, ident: str, details: dict) -> tuple[bool, str]:
    """One holder leaves (under the lock): ``(restored, what was done)``."""
    records = _holders()
    wants = [r.details["want"] for r in records if r.id != ident] + [details["want"]]
    remaining = [r for r in records if r.id != ident]
    now = _read(vm)
    expected = _in_force(wants)
    if any(now[name] != expected[name] for name in expected):
        return False, (f"vm.dirty_bytes {now['dirty_bytes']} and vm.dirty_background_bytes "
                       f"{now['dirty_background_bytes']} are not what iolab set ({expected}): someone changed "
                       f"them meanwhile, left as found")
    if remaining:
        _set(vm, _in_force([r.details["want"] for r in remaining]))
        return False, (f"still held by iolab process(es) {', '.join(str(r.owner.pid) for r in remaining)}: "
                       f"the last one gives the machine its values back")
    _put_back(vm, details["previous"])
    return True, f"gave back the machine's dirty limits {details['previous']}"


def release(record: dict | None, *, vm: Path = VM) -> None:
    """Give back what :func:`hold` set (once); ``record`` gains ``restored`` and ``note``."""
    if not record or record.get("restored") is not None:
        return
    ident = _ident(os.getpid())
    try:
        with _locked():
            restored, note = _leave(vm, ident, record)
    finally:
        ownership.forget(KIND, ident)
    record.update(restored=restored, note=note)
    log.info("dirty limits: %s", note)


def undo_stale(pid: int, details: dict, *, dry_run: bool, vm: Path = VM) -> str | None:
    """The reaper's undo for holder ``pid``, which is gone (its record is dropped afterwards)."""
    check_details(details)
    if dry_run:
        return f"would give back the machine's dirty limits {details['previous']} (vm.dirty_*)"
    with _locked():
        _, note = _leave(vm, _ident(pid), details)
    return note
