"""Which drives serve a target, what they are, and how healthy they are, for a run's manifest.

:func:`disks_of` finds the disks at the bottom of a path's device stack (through
:mod:`iolab.isolation.blockstat`: an emulated device's loop device, an md
array's members). For each, :func:`identity` combines sysfs (model, firmware,
capacity, sector sizes, rotational, the PCIe port's generation and width, the
SATA link's speed, the controller behind it) with what the drive says of itself
through ``smartctl`` and ``nvme`` (:mod:`iolab.devices.smart`), and
:func:`snapshot` reads its health counters. Whatever a tool could not tell is
said in ``sources`` ("smartctl not installed", "not a SMART device: ..."), never
filled in. Serial numbers are hashed (:func:`hidden_serial`) unless the caller
keeps them.
"""
from __future__ import annotations

import datetime
import hashlib
import logging
import os
import re
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.devices import blockdev, hwmon, smart
from iolab.isolation import blockstat

log = logging.getLogger(__name__)

SYS_BLOCK = Path("/sys/block")
SYS_ATA_LINK = Path("/sys/class/ata_link")
#: PCIe generation by the link's transfer rate (GT/s), as sysfs writes it ("8.0 GT/s PCIe")
PCIE_GENERATIONS = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
#: PCI class codes of storage controllers (class/subclass/prog-if)
PCI_STORAGE_CLASSES = {"0x010400": "RAID controller", "0x010601": "SATA AHCI controller",
                       "0x010700": "SAS controller", "0x010802": "NVMe controller",
                       "0x010000": "SCSI controller", "0x018000": "storage controller"}


def hidden_serial(serial: str | None) -> str | None:
    """A serial number as a short SHA-256 digest: the same drive is recognisable across runs, not named."""
    if not serial:
        return serial
    return "sha256:" + hashlib.sha256(serial.strip().encode()).hexdigest()[:16]


def hide_serials(value, *, keep: bool = False):
    """``value`` (a manifest entry) with every ``serial`` field hashed, unless ``keep``."""
    if keep:
        return value
    if isinstance(value, dict):
        return {k: hidden_serial(v) if k == "serial" and isinstance(v, str) and not v.startswith("sha256:")
                else hide_serials(v) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_serials(v) for v in value]
    return value


def disks_of(path: str | os.PathLike) -> list[str]:
    """Kernel names of the disks at the bottom of the stack serving ``path`` ([] when none does)."""
    try:
        device = blockstat.device_for(path)
    except IolabError as exc:
        log.info("no disk under %s: %s", path, exc)
        return []
    return [disk.name for disk in device.flush_disks()]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


#: a transport by what the disk's sysfs path contains, first match wins (each name one of
#: iolab.analysis.drivehealth's HARDWARE_TRANSPORTS or VIRTUAL_TRANSPORTS)
SYSFS_TRANSPORTS = (("loop", r"/loop\d+$"), ("sata", r"/ata\d+/"), ("virtio", r"/virtio\d+/"), ("usb", r"/usb\d+/"),
                    ("md", r"/md\d+$"), ("device-mapper", r"/dm-\d+$"))


def transport(disk: str) -> str:
    """How the disk is attached, from its name and sysfs path: nvme, sata, scsi, virtio, loop, md, ... (one of
    iolab.analysis.drivehealth's HARDWARE_TRANSPORTS or VIRTUAL_TRANSPORTS)."""
    real = os.path.realpath(SYS_BLOCK / disk)
    if disk.startswith("nvme"):
        return "nvme"
    for name, pattern in SYSFS_TRANSPORTS:
        if re.search(pattern, real):
            return name
    if "/host" in real and "/target" in real:
        return "scsi"
    return "virtual" if "/virtual/" in real else "unknown"


def nvme_controller(disk: str) -> str | None:
    """``nvme0`` for ``nvme0n1`` (the controller the namespace belongs to)."""
    real = os.path.realpath(SYS_BLOCK / disk / "device")
    name = os.path.basename(real)
    return name if re.fullmatch(r"nvme\d+", name) else None


def link(disk: str) -> dict:
    """The disk's link: the SATA link's speed, and the PCIe port nearest to it (the drive's own for NVMe,
    the host adapter's for SATA/SAS) with its generation and width, as sysfs reports them, and ``slot``: what the
    port above that link offers, where it says."""
    found: dict = {}
    real = os.path.realpath(SYS_BLOCK / disk)
    ata = re.search(r"/ata(\d+)/", real)
    if ata:
        spd = _read(SYS_ATA_LINK / f"link{ata.group(1)}" / "sata_spd")
        found["sata_speed"] = spd or "not reported by the kernel"
    pci = _pci_port(Path(real))
    if pci is not None:
        found["pcie"] = pci
    return found


def _pci_port(path: Path) -> dict | None:
    for parent in path.parents:
        if (parent / "current_link_speed").exists() or (parent / "class").exists() and (parent / "vendor").exists():
            speed = _read(parent / "current_link_speed")
            width = _read(parent / "current_link_width")
            driver = os.path.basename(os.path.realpath(parent / "driver")) if (parent / "driver").exists() else None
            port = {"address": parent.name, "driver": driver,
                    "controller": PCI_STORAGE_CLASSES.get((_read(parent / "class") or "")[:8]),
                    "speed": speed, "width": int(width) if width and width.isdigit() else None,
                    "max_speed": _read(parent / "max_link_speed"), "max_width": _read(parent / "max_link_width"),
                    "generation": _generation(speed)}
            if port["generation"] is None:
                port["note"] = "the port reports no PCIe link (a conventional PCI bus, e.g. a virtual machine's)"
            slot = _slot(parent.parent)
            if slot:
                port["slot"] = slot
            return port
    return None


def _slot(upstream: Path) -> dict | None:
    """What the PCIe port above a device's link offers (a root or switch port: the slot), where it says so: a drive
    that trained below it (a Gen3 drive in a Gen4 slot, or x2 in an x4 slot) shows against it."""
    speed = _read(upstream / "max_link_speed")
    if not speed:
        return None
    width = _read(upstream / "max_link_width")
    return {"address": upstream.name, "max_speed": speed, "max_width": int(width) if width and width.isdigit() else None,
            "generation": _generation(speed)}


def _generation(speed: str | None) -> int | None:
    match = re.match(r"([\d.]+) GT/s", speed or "")
    return PCIE_GENERATIONS.get(match.group(1)) if match else None


def _sysfs_identity(disk: str) -> dict:
    queue = blockdev.queue(disk)
    size = blockdev.size_bytes(disk)
    return {"device": f"/dev/{disk}", "transport": transport(disk), "model": blockdev.model(disk),
            "firmware": blockdev.firmware(disk), "serial": blockdev.serial(disk), "capacity_bytes": size,
            "logical_block_size": queue.get("logical_block_size"),
            "physical_block_size": queue.get("physical_block_size"),
            "rotational": blockdev.rotational(disk), "link": link(disk)}


def _readings(disk: str, *, full: bool = True) -> list[smart.Reading]:
    """What smartctl and (for NVMe) nvme-cli say of ``disk``, each a reading or its reason."""
    readings = [smart.read_smartctl(f"/dev/{disk}", full=full)]
    controller = nvme_controller(disk)
    if controller:
        readings.append(smart.read_nvme(f"/dev/{controller}", f"/dev/{disk}", full=full))
    return readings


#: where a tool's temperature limits come from (the tool's reading holds them as ``warning_temp_c``/``critical_temp_c``)
LIMIT_SOURCES = {"nvme": {"warning": "nvme id-ctrl wctemp", "critical": "nvme id-ctrl cctemp"},
                 "smartctl": {"warning": "smartctl temperature.op_limit_max",
                              "critical": "smartctl temperature.limit_max or critical_limit_max"}}


def temperature_limits(disk: str, readings: list, *, sys_block: Path | None = None) -> list[dict]:
    """The disk's temperature limits as each source states them, one record each (``sensor``, ``limit``:
    warning or critical, ``celsius``, ``source``): hwmon's files (:func:`iolab.devices.hwmon.limits`), then the
    composite's warning and critical temperature the drive declares through nvme-cli (WCTEMP, CCTEMP) or
    smartctl (an ATA drive's SCT limits; NVMe's WCTEMP/CCTEMP from smartctl 7.4). Sources may differ (hwmon's
    threshold is settable; the nvme driver converts Kelvin exactly, nvme-cli by 273): each is kept as said."""
    found = hwmon.limits(disk, SYS_BLOCK if sys_block is None else sys_block)
    for reading in readings:
        for limit, key in (("warning", "warning_temp_c"), ("critical", "critical_temp_c")):
            if reading.ok and reading.health.get(key) is not None and reading.tool in LIMIT_SOURCES:
                found.append({"sensor": hwmon.COMPOSITE, "limit": limit, "celsius": float(reading.health[key]),
                              "source": LIMIT_SOURCES[reading.tool][limit]})
    return found


def identity(disk: str, *, keep_serials: bool = False, readings: list | None = None) -> dict:
    """What the disk is: sysfs first, completed by the drive's own answers; ``sources`` says who answered;
    ``temperature_limits`` the warning and critical temperatures each source states (absent: none did)."""
    info = _sysfs_identity(disk)
    sources = {}
    readings = readings if readings is not None else _readings(disk)
    for reading in readings:
        sources[reading.tool] = "ok" if reading.ok else reading.reason
        for key, value in reading.identity.items():
            if info.get(key) in (None, "", {}):
                info[key] = value
    info["temperature_limits"] = temperature_limits(disk, readings) or None
    info["sources"] = sources
    if not keep_serials:
        info["serial"] = hidden_serial(info.get("serial"))
    return {k: v for k, v in info.items() if v is not None}


def snapshot(disk: str, *, readings: list | None = None, full: bool = True) -> dict:
    """The disk's health counters now (empty but for ``sources`` when no tool could read them);
    ``full=False``: the counters alone, without thresholds and logs (a snapshot around each test)."""
    health: dict = {"device": f"/dev/{disk}",
                    "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    sources = {}
    for reading in readings if readings is not None else _readings(disk, full=full):
        sources[reading.tool] = "ok" if reading.ok else reading.reason
        for key, value in reading.health.items():
            health.setdefault(key, value)
    health["sources"] = sources
    return health


def describe(path: str | os.PathLike, *, keep_serials: bool = False) -> list[dict]:
    """The identity of every disk serving ``path`` (see :func:`identity`)."""
    return [identity(disk, keep_serials=keep_serials) for disk in disks_of(path)]
