"""The kernel's iSCSI target (LIO), driven through configfs: export one block device, then remove it.

No targetcli: an export is a handful of directories, one symlink and a few
attribute files under ``/sys/kernel/config/target`` (see the kernel's
Documentation/target/)::

    core/iblock_<N>/<name>/               backstore over the block device (control: udev_path=, enable)
    iscsi/<iqn>/tpgt_1/lun/lun_0/<link>   -> the backstore: LUN 0 of the target
    iscsi/<iqn>/tpgt_1/np/<ip>:<port>     the network portal (TCP)
    iscsi/<iqn>/tpgt_1/attrib/            demo mode: any initiator, no CHAP, read-write
    iscsi/<iqn>/tpgt_1/enable             1 = the portal accepts logins

Demo mode is only safe because the portal listens on 127.0.0.1: iolab's
exports are for a lab on one machine. Removal walks the same tree
backwards and tolerates parts that are already gone, so it undoes a half-made
export as well as a whole one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
from pathlib import Path

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

CONFIGFS = Path("/sys/kernel/config")
#: kernel modules of an iSCSI export over a block device (target core, its iblock backstore, the iSCSI fabric)
MODULES = ("target_core_mod", "target_core_iblock", "iscsi_target_mod")
TPG = "tpgt_1"
LUN = "lun_0"
#: demo mode (generated ACLs), no authentication, writable: what targetcli calls "demo mode"
DEMO_ATTRIBUTES = {"generate_node_acls": "1", "cache_dynamic_acls": "1", "authentication": "0",
                   "demo_mode_write_protect": "0"}


def target_root() -> Path:
    return CONFIGFS / "target"


@dataclasses.dataclass(frozen=True)
class Export:
    """One exported device: where its parts live in configfs."""

    iqn: str
    name: str          # the backstore's name (also the LUN link's)
    device: str
    portal: str        # "127.0.0.1:3260"
    hba: str           # "iblock_<N>"

    @property
    def backstore(self) -> Path:
        return target_root() / "core" / self.hba / self.name

    @property
    def tpg(self) -> Path:
        return target_root() / "iscsi" / self.iqn / TPG

    def details(self) -> dict:
        return {"name": self.name, "device": self.device, "portal": self.portal, "hba": self.hba}

    @classmethod
    def from_details(cls, iqn: str, details: dict) -> "Export":
        return cls(iqn, str(details.get("name", "")), str(details.get("device", "")),
                   str(details.get("portal", "")), str(details.get("hba", "")))


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise IolabError(f"cannot write {value!r}: {exc.strerror or exc}", context=str(path),
                         hint="see dmesg for the target's reason") from None


def _mkdir(path: Path) -> None:
    try:
        path.mkdir()
    except OSError as exc:
        raise IolabError(f"cannot create: {exc.strerror or exc}", context=str(path)) from None


def _modprobe(module: str) -> None:
    if Path("/sys/module", module).exists():
        return
    if shutil.which("modprobe") is None:
        raise IolabError(f"kernel module {module} is not loaded and there is no modprobe",
                         hint="install kmod, or load the module")
    proc = subprocess.run(["modprobe", module], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise IolabError(f"cannot load kernel module {module}: {reason}", context="modprobe",
                         hint="the kernel needs the LIO target (CONFIG_TARGET_CORE, CONFIG_ISCSI_TARGET)")


def ready() -> Path:
    """Load the target modules and mount configfs where needed; the ``target`` directory, or an error
    naming the part that is missing (the module, configfs, the iscsi fabric)."""
    for module in MODULES:
        _modprobe(module)
    if not CONFIGFS.is_dir():
        raise IolabError("no configfs in this kernel", context=str(CONFIGFS))
    if not os.path.ismount(CONFIGFS):
        proc = subprocess.run(["mount", "-t", "configfs", "configfs", str(CONFIGFS)], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise IolabError(f"cannot mount configfs: {proc.stderr.strip() or proc.returncode}",
                             context=str(CONFIGFS))
    iscsi = target_root() / "iscsi"
    if not iscsi.is_dir():
        _mkdir(iscsi)  # the iSCSI fabric appears when its directory is made (loads iscsi_target_mod)
    return target_root()


def _free_hba() -> str:
    """An iblock HBA directory name not used yet (each export gets its own: removal is then one rmdir)."""
    core = target_root() / "core"
    used = {p.name for p in core.iterdir()} if core.is_dir() else set()
    n = 0
    while f"iblock_{n}" in used:
        n += 1
    return f"iblock_{n}"


def check_portal(portal: str) -> tuple[str, int]:
    host, sep, port = portal.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise IolabError("a portal is IPv4:PORT", context=f"portal {portal!r}")
    if host != "127.0.0.1":
        raise IolabError("iolab exports only on 127.0.0.1 (demo mode: no CHAP, any initiator may write)",
                         context=f"portal {portal!r}")
    return host, int(port)


def plan(device: str, iqn: str, name: str, *, portal: str = "127.0.0.1:3260") -> Export:
    """Check ``device`` and ``portal``, make LIO ready, choose the parts' names: the export to make
    (so that it can be recorded before anything exists)."""
    check_portal(portal)
    if not (Path(device).exists() and Path(device).is_block_device()):
        raise IolabError("not a block device", context=device)
    ready()
    if (target_root() / "iscsi" / iqn).exists():
        raise IolabError("a target of this name exists already", context=str(target_root() / "iscsi" / iqn))
    return Export(iqn, name, os.path.realpath(device), portal, _free_hba())


def export(device: str, iqn: str, name: str, *, portal: str = "127.0.0.1:3260", made: Export | None = None) -> Export:
    """Export block device ``device`` as LUN 0 of target ``iqn`` on ``portal``; undone by :func:`remove`.

    ``made``: the result of :func:`plan` (else planned here). A failure part-way removes what was
    made before raising.
    """
    made = made or plan(device, iqn, name, portal=portal)
    try:
        _build(made)
    except BaseException:
        remove(made)
        raise
    log.info("exported %s as %s on %s", device, iqn, portal)
    return made


def _build(made: Export) -> None:
    backstore = made.backstore
    backstore.parent.mkdir(exist_ok=True)
    _mkdir(backstore)
    _write(backstore / "control", f"udev_path={made.device}")
    _write(backstore / "enable", "1")
    tpg = made.tpg
    tpg.parent.mkdir(exist_ok=True)
    _mkdir(tpg)
    lun = tpg / "lun" / LUN
    _mkdir(lun)
    try:
        os.symlink(backstore, lun / made.name)
    except OSError as exc:
        raise IolabError(f"cannot map the backstore as {LUN}: {exc.strerror}", context=str(lun)) from None
    _mkdir(tpg / "np" / made.portal)
    for attribute, value in DEMO_ATTRIBUTES.items():
        _write(tpg / "attrib" / attribute, value)
    _write(tpg / "enable", "1")


def remove(made: Export) -> list[str]:
    """Remove the export (whatever of it exists), deepest part first; what was removed, in order."""
    done = []
    tpg, target = made.tpg, made.tpg.parent
    steps = [(lambda p: p.write_text("0"), tpg / "enable", "disabled"),
             (os.unlink, tpg / "lun" / LUN / made.name, "unmapped"),
             (os.rmdir, tpg / "lun" / LUN, "removed"),
             (os.rmdir, tpg / "np" / made.portal, "removed"),
             (os.rmdir, tpg, "removed"),
             (os.rmdir, target, "removed"),
             (os.rmdir, made.backstore, "removed"),
             (os.rmdir, made.backstore.parent, "removed")][: 8 if made.hba and made.name else 6]
    for action, path, word in steps:
        if not os.path.lexists(path) or (path.name == made.hba and any(p.is_dir() for p in path.iterdir())):
            continue
        if path.name == "enable" and path.read_text().strip() == "0":
            continue
        try:
            action(path)
        except OSError as exc:
            raise IolabError(f"cannot remove this part of the iSCSI export: {exc.strerror or exc}",
                             context=str(path)) from None
        done.append(f"{word} {path}")
    log.info("removed iSCSI export %s", made.iqn)
    return done


def targets() -> list[str]:
    """IQNs of every iSCSI target configured in LIO (empty when LIO is not loaded)."""
    with contextlib.suppress(OSError):
        return sorted(p.name for p in (target_root() / "iscsi").iterdir() if p.is_dir() and p.name.startswith("iqn."))
    return []


def backstores() -> list[str]:
    """``iblock_N/name`` (and other HBAs') of every backstore configured in LIO."""
    found = []
    with contextlib.suppress(OSError):
        for hba in sorted((target_root() / "core").iterdir()):
            if hba.is_dir() and "_" in hba.name and hba.name != "alua":
                found += [f"{hba.name}/{s.name}" for s in sorted(hba.iterdir()) if s.is_dir() and s.name != "hba_info"]
    return found
