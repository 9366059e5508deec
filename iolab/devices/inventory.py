"""Block devices: inventory, the safety rules for writing, and provenance.

Safety rules (the one place they live; ``iolab devices``, ``iolab setup`` and
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
import stat
from pathlib import Path

from iolab.core import commands
from iolab.devices import loopdev
from iolab.core.errors import IolabError
from iolab.core.units import human_size

log = logging.getLogger(__name__)

SYS_BLOCK = Path("/sys/class/block")
SYS_DEV_BLOCK = Path("/sys/dev/block")

#: wipefs/libblkid type names of partition tables
PARTITION_TABLES = {"gpt", "PMBR", "dos", "bsd", "sun", "sgi", "mac", "atari", "aix",
                    "solaris", "unixware", "minix", "amiga", "ultrix"}

# Reason kinds. Only SIGNATURE can be overridden by confirmation.
MOUNTED, SWAP, HOLDERS, ROOT_CHAIN, READ_ONLY, EMPTY, UNREADABLE, NOT_BLOCK, SIGNATURE = (
    "mounted", "swap", "holders", "root-chain", "read-only", "empty", "unreadable",
    "not-a-block-device", "signature")
OVERRIDABLE = {SIGNATURE}


# ---------------------------------------------------------------- sysfs helpers

def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _devno(devno: int) -> str:
    return f"{os.major(devno)}:{os.minor(devno)}"


def _name_of_devno(devno: int) -> str | None:
    """Kernel name (``sda1``, ``dm-0``, ``loop3p1``) of a block device number."""
    link = SYS_DEV_BLOCK / _devno(devno)
    try:
        return Path(os.path.realpath(link)).name if link.exists() else None
    except OSError:
        return None


def _devno_of_name(name: str) -> int | None:
    text = _read(SYS_BLOCK / name / "dev")
    if not text or ":" not in text:
        return None
    major, minor = text.split(":", 1)
    return os.makedev(int(major), int(minor))


def resolve(device: str | os.PathLike) -> tuple[str, str, int]:
    """``(realpath, kernel name, device number)`` of a block device path.

    Symlinks (``/dev/disk/by-id/...``, ``/dev/mapper/...``) are followed; the
    kernel name comes from the device number, not from the path's spelling.
    """
    real = os.path.realpath(device)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise IolabError("no such device", context=str(device)) from None
    except OSError as exc:
        raise IolabError(f"cannot stat: {exc.strerror}", context=str(device)) from exc
    if not stat.S_ISBLK(st.st_mode):
        raise IolabError("not a block device", context=str(device))
    name = _name_of_devno(st.st_rdev) or Path(real).name
    return real, name, st.st_rdev


def is_partition(name: str) -> bool:
    return (SYS_BLOCK / name / "partition").exists()


def parent_disk(name: str) -> str:
    """Whole-disk name of a partition (``sda1`` -> ``sda``); a disk is its own parent."""
    if is_partition(name):
        return Path(os.path.realpath(SYS_BLOCK / name)).parent.name
    return name


def partitions(name: str) -> list[str]:
    """Partition names of a whole disk, in partition-number order."""
    base = Path(os.path.realpath(SYS_BLOCK / name))
    found = []
    try:
        for child in base.iterdir():
            number = _read_int(child / "partition")
            if number is not None:
                found.append((number, child.name))
    except OSError:
        return []
    return [n for _, n in sorted(found)]


def partition_number(name: str) -> int | None:
    return _read_int(SYS_BLOCK / name / "partition")


def holders(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (SYS_BLOCK / name / "holders").iterdir())
    except OSError:
        return []


def slaves(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (SYS_BLOCK / name / "slaves").iterdir())
    except OSError:
        return []


def scheduler(name: str) -> str | None:
    text = _read(SYS_BLOCK / parent_disk(name) / "queue" / "scheduler")
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text


def size_bytes(name: str) -> int | None:
    sectors = _read_int(SYS_BLOCK / name / "size")  # always 512-byte units
    return sectors * 512 if sectors is not None else None


# ------------------------------------------------------------- mounts and swap

@dataclasses.dataclass
class Mount:
    devno: int | None       # device number of the mounted file system (None: anonymous)
    target: str
    fstype: str
    source: str
    options: str


def _unescape(text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit() and len(text[i + 1:i + 4]) == 3:
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def mounts() -> list[Mount]:
    """Every mount this process can see, from ``/proc/self/mountinfo``."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        raise IolabError(f"cannot read the mount table: {exc.strerror}", context="/proc/self/mountinfo") from exc
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 6 or len(rest) < 2:
            continue
        major, minor = (int(x) for x in fields[2].split(":"))
        devno = os.makedev(major, minor) if major != 0 else None
        source = _unescape(rest[1])
        if devno is None and source.startswith("/"):
            # btrfs and friends report an anonymous device number: use the source
            try:
                st = os.stat(source)
                if stat.S_ISBLK(st.st_mode):
                    devno = st.st_rdev
            except OSError:
                pass
        options = fields[5] + ("," + rest[2] if len(rest) > 2 else "")
        found.append(Mount(devno=devno, target=_unescape(fields[4]), fstype=rest[0],
                           source=source, options=options))
    return found


def mounts_of(name: str, table: list[Mount] | None = None) -> list[Mount]:
    devno = _devno_of_name(name)
    return [m for m in (table if table is not None else mounts()) if devno is not None and m.devno == devno]


def swap_devnos() -> dict[int, str]:
    """Device numbers of active swap areas (block devices and the devices holding swap files)."""
    found = {}
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return found
    for line in lines:
        if not line.strip():
            continue
        filename = _unescape(line.split()[0])
        try:
            st = os.stat(filename)
        except OSError:
            continue
        found[st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev] = filename
    return found


def swap_files() -> set[str]:
    """Realpaths of the active swap areas (``/proc/swaps``: files and devices)."""
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {os.path.realpath(_unescape(line.split()[0])) for line in lines if line.strip()}


def loops_backed_by(path: str | os.PathLike) -> list[str]:
    """Loop devices (``/dev/loopN``) whose backing file is ``path`` (same file, by inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    found = []
    for entry in sorted(Path("/sys/block").glob("loop*")):
        backing = _read(entry / "loop" / "backing_file")
        if not backing:
            continue
        try:
            other = os.stat(backing.removesuffix(" (deleted)"))
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            found.append(f"/dev/{entry.name}")
    return found


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
            _below(_name_of_devno(devno), seen)


def root_chain() -> set[str]:
    """Kernel names of the devices the root file system lives on (and their parents)."""
    seen: set[str] = set()
    try:
        devno = os.stat("/").st_dev
    except OSError:
        return seen
    name = _name_of_devno(devno)
    if name is None:
        # overlay or another anonymous device: fall back to the mount table
        for mount in mounts():
            if mount.target == "/" and mount.devno is not None:
                name = _name_of_devno(mount.devno)
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

    The optional arguments let :func:`inventory` share one snapshot of the
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
        member_devno = _devno_of_name(member)
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
        if _devno_of_name(disk) in swaps:
            reasons.append(Reason(SWAP, f"its disk {disk} is in use as swap"))
    if name in chain:
        reasons.append(Reason(ROOT_CHAIN, "backs the root file system (/)"))
    if _read(SYS_BLOCK / name / "ro") == "1":
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


# ------------------------------------------------------------------ inventory

def _hardware_dir(name: str) -> Path:
    return SYS_BLOCK / parent_disk(name)


def _model(name: str) -> str | None:
    base = _hardware_dir(name) / "device"
    model = _read(base / "model")
    vendor = _read(base / "vendor")
    if model and vendor and vendor not in ("ATA",) and not model.startswith(vendor):
        return f"{vendor} {model}"
    if model:
        return model
    disk = parent_disk(name)
    if disk.startswith("loop"):
        return "loop device"
    if disk.startswith("md"):
        return f"md {(_read(SYS_BLOCK / disk / 'md' / 'level') or '').strip()}".strip()
    if disk.startswith("dm-"):
        return f"device-mapper {_read(SYS_BLOCK / disk / 'dm' / 'name') or ''}".strip()
    if disk.startswith("zram"):
        return "zram (compressed RAM)"
    if disk.startswith("vd"):
        return "virtio disk"
    return vendor


def _serial(name: str) -> str | None:
    base = _hardware_dir(name)
    for path in (base / "serial", base / "device" / "serial", base / "device" / "wwid"):
        text = _read(path)
        if text:
            return text
    try:  # SCSI/SATA: VPD page 0x80 (unit serial number): 4-byte header, then ASCII
        raw = (base / "device" / "vpd_pg80").read_bytes()
        text = raw[4:4 + raw[3]].decode("ascii", "replace").strip()
        return text or None
    except (OSError, IndexError):
        return None


def _firmware(name: str) -> str | None:
    base = _hardware_dir(name) / "device"
    for leaf in ("firmware_rev", "rev", "fw_rev"):
        text = _read(base / leaf)
        if text:
            return text
    return None


def _queue(name: str) -> dict:
    queue = _hardware_dir(name) / "queue"
    return {key: _read_int(queue / key) for key in (
        "nr_requests", "read_ahead_kb", "max_sectors_kb", "logical_block_size", "physical_block_size")}


def _rotational(name: str) -> bool | None:
    value = _read(_hardware_dir(name) / "queue" / "rotational")
    return None if value is None else value == "1"


def _listed_names() -> list[str]:
    """Disks and their partitions, skipping unattached loop devices."""
    names = []
    try:
        disks = sorted(p.name for p in Path("/sys/block").iterdir())
    except OSError:
        return names
    for disk in disks:
        if disk.startswith("loop") and loopdev.backing_file(f"/dev/{disk}") is None:
            continue
        names.append(disk)
        names.extend(partitions(disk))
    return names


INVENTORY_COLUMNS = [
    "device", "name", "type", "parent", "size_bytes", "size", "model", "serial", "firmware",
    "rotational", "logical_sector", "physical_sector", "scheduler", "mountpoints", "holders",
    "swap", "root_chain", "signatures", "writable", "why_not", "confirmable",
]


def inventory() -> "pandas.DataFrame":  # noqa: F821 - imported lazily
    """One row per block device (disks, partitions, attached loop devices).

    ``writable`` is iolab's verdict without confirmation; ``why_not`` lists the
    reasons; ``confirmable`` says whether ``--confirm DEVICE`` would allow a
    write (only signatures stand in the way). Columns: :data:`INVENTORY_COLUMNS`.
    """
    import pandas as pd

    return pd.DataFrame(inventory_records(), columns=INVENTORY_COLUMNS)


def inventory_records() -> list[dict]:
    """:func:`inventory` as plain dicts (JSON-ready)."""
    table, swaps, chain = mounts(), swap_devnos(), root_chain()
    rows = []
    for name in _listed_names():
        path = f"/dev/{name}"
        if not Path(path).exists():
            continue
        try:
            verdict = assess(path, mount_table=table, swaps=swaps, chain=chain)
        except IolabError as exc:
            verdict = Verdict(path, name, [Reason(UNREADABLE, exc.message)], [])
        family = [name] + (partitions(name) if not is_partition(name) else [])
        mountpoints = []
        for member in family:
            for mount in mounts_of(member, table):
                mountpoints.append(mount.target if member == name else f"{member}:{mount.target}")
        queue = _queue(name)
        size = size_bytes(name)
        rows.append({
            "device": path, "name": name,
            "type": "part" if is_partition(name) else ("loop" if name.startswith("loop") else "disk"),
            "parent": parent_disk(name) if is_partition(name) else None,
            "size_bytes": size, "size": human_size(size) if size is not None else None,
            "model": _model(name), "serial": _serial(name), "firmware": _firmware(name),
            "rotational": _rotational(name),
            "logical_sector": queue["logical_block_size"], "physical_sector": queue["physical_block_size"],
            "scheduler": scheduler(name), "mountpoints": mountpoints,
            "holders": sorted({h for m in family for h in holders(m)}),
            "swap": any(_devno_of_name(m) in swaps for m in family),
            "root_chain": name in chain,
            "signatures": list(dict.fromkeys(s["type"] for s in verdict.signatures)),
            "writable": verdict.writable, "why_not": verdict.why_not,
            "confirmable": bool(verdict.reasons) and verdict.allowed(True),
        })
    return rows


# ----------------------------------------------------------------- provenance

def _serving_device(path: str) -> tuple[str | None, list[Mount]]:
    """Kernel name of the block device serving ``path`` and the mount(s) involved."""
    st = os.stat(path)
    table = mounts()
    if stat.S_ISBLK(st.st_mode):
        name = _name_of_devno(st.st_rdev)
        return name, (mounts_of(name, table) if name else [])
    name = _name_of_devno(st.st_dev)
    mount = _mount_for(path, table)
    if name is None and mount is not None and mount.devno is not None:
        name = _name_of_devno(mount.devno)
    return name, ([mount] if mount else [])


def _mount_for(path: str, table: list[Mount]) -> Mount | None:
    """The mount containing ``path`` (the longest matching target; last one wins)."""
    real = os.path.realpath(path)
    best = None
    for mount in table:
        target = mount.target.rstrip("/") or "/"
        if real == target or real.startswith(target + "/") or target == "/":
            if best is None or len(target) >= len(best.target.rstrip("/") or "/"):
                best = mount
    return best


def _findmnt(path: str) -> dict | None:
    try:
        proc = commands.run(["findmnt", "--json", "--target", path,
                             "--output", "TARGET,SOURCE,FSTYPE,OPTIONS"], check=False)
    except IolabError:
        return None
    if proc.returncode != 0:
        return None
    try:
        found = json.loads(proc.stdout).get("filesystems") or []
    except ValueError:
        return None
    return found[0] if found else None


def _hardware(name: str) -> dict:
    disk = parent_disk(name)
    return {
        "model": _model(name), "serial": _serial(name), "firmware": _firmware(name),
        "rotational": _rotational(name), "scheduler": scheduler(name),
        "queue": _queue(name), "disk": disk, "disk_size_bytes": size_bytes(disk),
    }


def _raid(name: str) -> dict | None:
    disk = parent_disk(name)
    md = SYS_BLOCK / disk / "md"
    if not md.is_dir():
        return None
    members = []
    for slave in slaves(disk):
        members.append({"device": f"/dev/{slave}", **_hardware(slave)})
    chunk = _read_int(md / "chunk_size")
    return {"device": f"/dev/{disk}", "level": _read(md / "level"), "chunk_bytes": chunk,
            "raid_disks": _read_int(md / "raid_disks"), "metadata": _read(md / "metadata_version"),
            "members": members}


def device_provenance(path: str | os.PathLike, *, _depth: int = 0) -> dict:
    """What serves ``path`` (a file, directory or block device), for a run manifest.

    Returns the serving block device with model, serial (where readable),
    firmware, rotational flag, scheduler and queue settings, the file system
    and its mount options, the md RAID layout (level, chunk, members) when on
    md, and the backing file with its direct-I/O flag (and the backing file's
    own provenance) when on a loop device. Values the system does not expose
    are ``None``.
    """
    path = str(path)
    if not os.path.exists(path):
        raise IolabError("no such file, directory or device", context=path)
    name, found_mounts = _serving_device(path)
    info: dict = {"path": os.path.realpath(path), "device": f"/dev/{name}" if name else None,
                  "kname": name}
    mount = found_mounts[0] if found_mounts else None
    if stat.S_ISBLK(os.stat(path).st_mode):
        info["filesystem"] = ({"target": mount.target, "source": mount.source,
                               "fstype": mount.fstype, "options": mount.options} if mount else None)
    else:
        fm = _findmnt(path)
        if fm:
            info["filesystem"] = {"target": fm.get("target"), "source": fm.get("source"),
                                  "fstype": fm.get("fstype"), "options": fm.get("options")}
        elif mount:
            info["filesystem"] = {"target": mount.target, "source": mount.source,
                                  "fstype": mount.fstype, "options": mount.options}
        else:
            info["filesystem"] = None
    if name is None:
        info["note"] = "not served by a block device (e.g. tmpfs, overlay or a network file system)"
        return info
    info["size_bytes"] = size_bytes(name)
    info["partition"] = partition_number(name)
    info.update(_hardware(name))
    info["raid"] = _raid(name)
    disk = parent_disk(name)
    if (SYS_BLOCK / disk / "loop").exists():
        backing = loopdev.backing_file(f"/dev/{disk}")
        loop = {"backing_file": backing, "direct_io": loopdev.dio_enabled(f"/dev/{disk}")}
        if backing and _depth < 3 and os.path.exists(backing):
            try:
                loop["backing"] = device_provenance(backing, _depth=_depth + 1)
            except (IolabError, OSError) as exc:
                loop["backing"] = {"error": str(exc)}
        info["loop"] = loop
    else:
        info["loop"] = None
    if disk.startswith("dm-") or (slaves(disk) and info["raid"] is None):
        info["slaves"] = [f"/dev/{s}" for s in slaves(disk)]
    return info
