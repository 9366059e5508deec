"""The safety rules for writing a block device (the one place they live; ``iolab devices``, ``iolab setup`` and
raw-device targets all use :func:`assess` / :func:`check_writable`):

A device is refused, with every reason that applies, when

* it is **mounted**, itself or any of its partitions (found by device number in
  ``/proc/self/mountinfo``, so the name used to mount it does not matter);
* it is **swap**, itself or a partition (``/proc/swaps``);
* it has **holders** (``/sys/class/block/X/holders``, also of its partitions:
  md, LVM/device-mapper, bcache, ...);
* it is in the **chain of /**: the device holding the root file system, its
  whole disk, and everything below it (md/dm slaves, a loop device's backing
  file's device, recursively);
* it is **read-only**, has **no capacity** (size 0), or cannot be probed;
* it carries a **signature** (file system, RAID member, partition table, swap,
  LVM, LUKS, ... as listed by ``wipefs --no-act``).

Only the last reason can be overridden, and only by ``confirm`` naming that
very device (the realpaths of ``confirm`` and the device must be equal, so a
``/dev/disk/by-id/...`` link works and a wrong path still refuses). A mounted,
swap, held or root-chain device is never written: confirmation does not change
that. There is no global "yes".

The checks are a snapshot; :func:`open_exclusive` (``O_EXCL`` on a block
device fails while it is mounted, held or exclusively opened) closes the window
right before writing. ``mkfs.ext4``, ``mkfs.xfs`` and ``mdadm`` open their
device with ``O_EXCL`` themselves as well.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os

from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.devices import loopdev
from iolab.devices.blockdev import (
    SYS_BLOCK, Mount, devno_of_name, name_of_devno, sysfs_text, holders, is_partition, mounts, mounts_of,
    parent_disk, partitions, resolve, size_bytes, slaves, swap_devnos)

log = logging.getLogger(__name__)

#: wipefs/libblkid type names of partition tables
PARTITION_TABLES = {"gpt", "PMBR", "dos", "bsd", "sun", "sgi", "mac", "atari", "aix",
                    "solaris", "unixware", "minix", "amiga", "ultrix"}

# Reason kinds. Only SIGNATURE can be overridden by confirmation.
MOUNTED, SWAP, HOLDERS, ROOT_CHAIN, READ_ONLY, EMPTY, UNREADABLE, NOT_BLOCK, SIGNATURE = (
    "mounted", "swap", "holders", "root-chain", "read-only", "empty", "unreadable",
    "not-a-block-device", "signature")
OVERRIDABLE = {SIGNATURE}


# --------------------------------------------------------------- chain of /

def _below(name: str, seen: set[str]) -> None:
    """Add ``name`` and everything it is built on to ``seen``."""
    if not name or name in seen:
        return
    seen.add(name)
    if is_partition(name):
        _below(parent_disk(name), seen)
    for slave in slaves(name):
        _below(slave, seen)
    backing = loopdev.backing_file(f"/dev/{name}") if (SYS_BLOCK / name / "loop").exists() else None
    if backing:
        try:
            devno = os.stat(backing.removesuffix(" (deleted)")).st_dev
        except OSError:
            devno = None
        if devno is not None:
            _below(name_of_devno(devno), seen)


def root_chain() -> set[str]:
    """Kernel names of the devices the root file system lives on (and their parents)."""
    seen: set[str] = set()
    try:
        devno = os.stat("/").st_dev
    except OSError:
        return seen
    name = name_of_devno(devno)
    if name is None:
        # overlay or another anonymous device: fall back to the mount table
        for mount in mounts():
            if mount.target == "/" and mount.devno is not None:
                name = name_of_devno(mount.devno)
    if name:
        _below(name, seen)
    return seen


# --------------------------------------------------------------- signatures

def signatures(device: str) -> list[dict]:
    """Signatures ``wipefs --no-act`` finds: ``[{type, kind, offset, label, uuid}]``.

    ``kind`` is one of ``partition table``, ``RAID member``, ``swap``,
    ``LVM``, ``encryption`` or ``file system``.
    """
    proc = commands.run(["wipefs", "--no-act", "--json", device], check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or "no output").splitlines()[-1]
        for prefix in ("wipefs: ", "error: ", f"{device}: "):
            detail = detail[len(prefix):] if detail.startswith(prefix) else detail
        raise IolabError(f"cannot probe signatures: {detail}", context=device)
    text = proc.stdout.strip()
    if not text:
        return []
    try:
        found = json.loads(text).get("signatures", [])
    except ValueError as exc:
        raise IolabError(f"unreadable wipefs output: {exc}", context=device) from exc
    return [{"type": s.get("type"), "kind": _kind(s.get("type") or ""), "offset": s.get("offset"),
             "label": s.get("label"), "uuid": s.get("uuid")} for s in found]


def describe_signature(sig: dict) -> str:
    """``a file-system signature (ext4, label 'data')``, ``a partition-table signature (gpt)``."""
    sigtype = sig.get("type") or "unknown"
    kind = sig.get("kind") or _kind(sigtype)
    details = [] if kind == sigtype else [sigtype]
    if sig.get("label"):
        details.append(f"label {sig['label']!r}")
    text = f"a {kind.replace(' ', '-')} signature"
    return f"{text} ({', '.join(details)})" if details else text


def _kind(sigtype: str) -> str:
    if sigtype in PARTITION_TABLES:
        return "partition table"
    if sigtype.endswith("_raid_member"):
        return "RAID member"
    if sigtype == "swap":
        return "swap"
    if sigtype.startswith("LVM"):
        return "LVM"
    if sigtype.startswith("crypto_"):
        return "encryption"
    return "file system"


# ------------------------------------------------------------------ verdicts

@dataclasses.dataclass
class Reason:
    kind: str
    text: str

    @property
    def overridable(self) -> bool:
        return self.kind in OVERRIDABLE


@dataclasses.dataclass
class Verdict:
    """What iolab thinks of writing to one device."""
    device: str             # the realpath (/dev/loop3)
    name: str               # the kernel name (loop3)
    reasons: list[Reason]
    signatures: list[dict]
    confirmed: bool = False

    @property
    def writable(self) -> bool:
        """Writable without confirmation."""
        return not self.reasons

    def allowed(self, confirmed: bool | None = None) -> bool:
        confirmed = self.confirmed if confirmed is None else confirmed
        return all(r.overridable and confirmed for r in self.reasons)

    @property
    def why_not(self) -> str:
        return "; ".join(r.text for r in self.reasons)


def assess(device: str | os.PathLike, *, mount_table: list[Mount] | None = None,
           swaps: dict[int, str] | None = None, chain: set[str] | None = None) -> Verdict:
    """Every reason iolab would refuse to write ``device`` (none: writable).

    The optional arguments let :func:`iolab.devices.listing.table` share one snapshot of the
    mount table, swap list and root chain across devices.
    """
    real, name, devno = resolve(device)
    mount_table = mounts() if mount_table is None else mount_table
    swaps = swap_devnos() if swaps is None else swaps
    chain = root_chain() if chain is None else chain
    reasons: list[Reason] = []
    family = [name] + (partitions(name) if not is_partition(name) else [])

    for member in family:
        where = "" if member == name else f"partition {member} "
        for mount in mounts_of(member, mount_table):
            reasons.append(Reason(MOUNTED, f"{where}mounted at {mount.target}".strip()))
        member_devno = devno_of_name(member)
        if member_devno in swaps:
            reasons.append(Reason(SWAP, f"{where}in use as swap ({swaps[member_devno]})".strip()))
        held = holders(member)
        if held:
            reasons.append(Reason(HOLDERS, f"{where}held by {', '.join(held)}".strip()))
    if is_partition(name):
        disk = parent_disk(name)
        held = holders(disk)
        if held:
            reasons.append(Reason(HOLDERS, f"its disk {disk} is held by {', '.join(held)}"))
        if devno_of_name(disk) in swaps:
            reasons.append(Reason(SWAP, f"its disk {disk} is in use as swap"))
    if name in chain:
        reasons.append(Reason(ROOT_CHAIN, "backs the root file system (/)"))
    if sysfs_text(SYS_BLOCK / name / "ro") == "1":
        reasons.append(Reason(READ_ONLY, "read-only"))
    size = size_bytes(name)
    if size == 0:
        reasons.append(Reason(EMPTY, "has no capacity (size 0)"))

    found: list[dict] = []
    if size:
        try:
            found = signatures(real)
        except IolabError as exc:
            reasons.append(Reason(UNREADABLE, exc.message))
    for sig in found:
        text = f"carries {describe_signature(sig)}"
        if not any(r.text == text for r in reasons):
            reasons.append(Reason(SIGNATURE, text))
    return Verdict(device=real, name=name, reasons=reasons, signatures=found)


def _confirmed(real: str, confirm) -> bool:
    if confirm is None:
        return False
    items = [confirm] if isinstance(confirm, (str, os.PathLike)) else list(confirm)
    return any(os.path.realpath(c) == real for c in items)


def check_writable(device: str | os.PathLike, confirm: str | os.PathLike | list | None = None) -> Verdict:
    """Raise :class:`IolabError` naming ``device`` and every reason not to write it.

    ``confirm`` (a path or a list of paths) overrides only the signature check,
    and only when one of them resolves to the same device as ``device``.
    Mounted, swap, held and root-chain devices are refused whatever the
    confirmation. Returns the :class:`Verdict` when writing is allowed.
    """
    verdict = assess(device)
    verdict.confirmed = _confirmed(verdict.device, confirm)
    if verdict.allowed():
        if verdict.reasons:
            log.warning("%s: writing although it %s (confirmed)", verdict.device, verdict.why_not)
        return verdict
    label = str(device) if os.path.realpath(device) == str(device) else f"{device} ({verdict.device})"
    hard = [r for r in verdict.reasons if not r.overridable]
    if hard:
        hint = "iolab never writes to a device that is mounted, swap, held by another device or backs /"
        if confirm is not None:
            hint += "; --confirm does not change that"
    elif confirm is not None and not verdict.confirmed:
        hint = f"the confirmation does not name this device: confirm with its exact path {verdict.device}"
    else:
        hint = f"if you really mean to overwrite it, confirm with --confirm {verdict.device}"
    raise IolabError(f"refusing to write: {verdict.why_not}", context=label, hint=hint)


class ExclusiveDevice:
    """A block device opened with ``O_EXCL``; use as a context manager or call ``close``."""

    def __init__(self, device: str, fd: int):
        self.device = device
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "ExclusiveDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_exclusive(device: str | os.PathLike, *, write: bool = True) -> ExclusiveDevice:
    """Open a block device with ``O_EXCL`` (fails while mounted, held or claimed)."""
    real, _, _ = resolve(device)
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_EXCL | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        reason = "in use (mounted, swap, held, or opened exclusively by another program)" \
            if exc.errno == 16 else exc.strerror
        raise IolabError(f"cannot open exclusively: {reason}", context=str(device)) from exc
    return ExclusiveDevice(real, fd)
