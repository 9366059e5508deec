"""A drive's own account of itself: ``smartctl --json`` (smartmontools) and ``nvme`` (nvme-cli).

:func:`read_smartctl` runs ``smartctl -x --json=c DEVICE`` and returns a
:class:`Reading`: the identity (model, firmware, serial, capacity, sector sizes,
link) and the health counters (temperature, data written, wear, media and CRC
errors, power-on hours), or the reason there are none, in the tool's own words
("smartctl not installed", "not a SMART device: /dev/loop4: Unable to detect
device type"). Nothing is guessed: a value the drive does not report is absent.

:func:`read_nvme` does the same with nvme-cli (``smart-log``, ``id-ctrl``,
``id-ns``): the namespace's formats and the controller's temperature thresholds,
which smartctl 7.3 does not put in its JSON.

smartctl's exit status is a bit mask (smartctl(8), "RETURN VALUES"): bit 0 the
command line, bit 1 the device could not be opened or identified; the higher
bits report what the drive said (a failing attribute, errors in its logs) and
leave the JSON complete.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import subprocess

from iolab.analysis.drivehealth import tool_reason
from iolab.core import commands

log = logging.getLogger(__name__)

#: An NVMe "data unit" is 1000 units of 512 bytes (NVMe base specification, SMART / Health log).
NVME_DATA_UNIT = 512 * 1000
#: smartctl exit bits that mean there is no reading at all
SMARTCTL_FATAL = 0b11
TIMEOUT_S = 30.0
#: ATA attributes iolab reads (id: what it counts)
ATA_TEMPERATURE = (194, 190)          # Temperature_Celsius, Airflow_Temperature_Cel
ATA_CRC_ERRORS = 199                  # UDMA_CRC_Error_Count
ATA_MEDIA_ERRORS = (5, 187, 198)      # Reallocated_Sector_Ct, Reported_Uncorrect, Offline_Uncorrectable
ATA_POWER_ON_HOURS = 9
ATA_LBAS_WRITTEN = 241                # Total_LBAs_Written: its unit is the vendor's, so kept raw


@dataclasses.dataclass
class Reading:
    """What one tool said about one device: ``identity`` and ``health`` (empty with a ``reason``)."""

    tool: str
    device: str
    identity: dict = dataclasses.field(default_factory=dict)
    health: dict = dataclasses.field(default_factory=dict)
    reason: str | None = None    # why there is no reading (the tool's own words)

    @property
    def ok(self) -> bool:
        return self.reason is None


def run_json(argv: list[str]) -> tuple[dict | None, str | None]:
    """Run a tool that prints JSON; ``(document, None)`` or ``(None, why not)``."""
    program = argv[0]
    if commands.find(program) is None:
        return None, tool_reason("not_installed", program=program)
    try:
        proc = commands.run(argv, check=False, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, tool_reason("timeout", program=program, seconds=f"{TIMEOUT_S:g}")
    except OSError as exc:
        return None, tool_reason("could_not_run", program=program, said=exc.strerror or exc)
    try:
        return json.loads(proc.stdout), None
    except ValueError:
        words = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return None, tool_reason("exited", program=program, code=proc.returncode,
                                 said=words[0] if words else "no output")


def read_smartctl(device: str, *, full: bool = True) -> Reading:
    """``smartctl -x --json=c DEVICE`` as a :class:`Reading` (see :func:`from_smartctl`); ``full=False``:
    ``-A``, the health counters alone (what a snapshot around each test needs)."""
    doc, why = run_json(["smartctl", "-x" if full else "-A", "--json=c", device])
    if doc is None:
        return Reading("smartctl", device, reason=why)
    return from_smartctl(doc, device)


def smartctl_failure(doc: dict) -> str | None:
    """Why smartctl's document holds no reading, in its words; None when it does."""
    status = (doc.get("smartctl") or {}).get("exit_status") or 0
    if not status & SMARTCTL_FATAL:
        return None
    words = [m.get("string", "") for m in (doc.get("smartctl") or {}).get("messages") or []
             if m.get("severity") == "error"] or ["no reason given"]
    text = "; ".join(w for w in words if w)
    if "Permission denied" in text or "Operation not permitted" in text:
        return tool_reason("smart_permission", said=text)
    if "Unable to detect device type" in text:
        return tool_reason("not_smart", said=text)
    if not status & 0b10:  # bit 0 alone: the command line
        return tool_reason("smart_usage", said=text)
    return tool_reason("smart_open", said=text)


def from_smartctl(doc: dict, device: str) -> Reading:
    """A :class:`Reading` from smartctl's JSON (NVMe or ATA; SCSI identity only)."""
    failure = smartctl_failure(doc)
    if failure:
        return Reading("smartctl", device, reason=failure)
    return Reading("smartctl", device, identity=smartctl_identity(doc), health=smartctl_health(doc))


def smartctl_identity(doc: dict) -> dict:
    device = doc.get("device") or {}
    identity = {
        "protocol": device.get("protocol"), "type": device.get("type"),
        "model": doc.get("model_name") or doc.get("scsi_model_name"),
        "firmware": doc.get("firmware_version") or doc.get("scsi_revision"),
        "serial": doc.get("serial_number"),
        "capacity_bytes": (doc.get("user_capacity") or {}).get("bytes") or doc.get("nvme_total_capacity"),
        "logical_block_size": doc.get("logical_block_size"),
        "physical_block_size": doc.get("physical_block_size"),
        "rotation_rate_rpm": doc.get("rotation_rate"),
        "form_factor": (doc.get("form_factor") or {}).get("name"),
        "interface": (doc.get("sata_version") or {}).get("string") or (doc.get("nvme_version") or {}).get("string"),
    }
    speed = doc.get("interface_speed") or {}
    if speed:  # SATA: the link's negotiated and maximum speed
        identity["sata_link"] = {"current": (speed.get("current") or {}).get("string"),
                                 "max": (speed.get("max") or {}).get("string")}
    namespaces = doc.get("nvme_namespaces") or []
    if namespaces:
        identity["nvme_formatted_lba_size"] = namespaces[0].get("formatted_lba_size")
    return {k: v for k, v in identity.items() if v is not None}


def smartctl_health(doc: dict) -> dict:
    """Health counters; ``nvme_smart_health_information_log`` or the ATA attribute table."""
    health = {"temperature_c": (doc.get("temperature") or {}).get("current"),
              "power_on_hours": (doc.get("power_on_time") or {}).get("hours"),
              "smart_passed": (doc.get("smart_status") or {}).get("passed")}
    log_ = doc.get("nvme_smart_health_information_log")
    if log_ is not None:
        health.update(nvme_log_health(log_))
    table = (doc.get("ata_smart_attributes") or {}).get("table")
    if table:
        health.update(ata_health(table))
    statistics = _ata_statistics(doc)  # ACS device statistics: units the standard defines
    if "Percentage Used Endurance Indicator" in statistics:
        health["percentage_used"] = statistics["Percentage Used Endurance Indicator"]
    if "Logical Sectors Written" in statistics and doc.get("logical_block_size"):
        health["data_written_bytes"] = statistics["Logical Sectors Written"] * doc["logical_block_size"]
    limits = doc.get("temperature") or {}
    # ATA: the SCT status's recommended maximum and limit; NVMe (smartctl 7.4 on): WCTEMP and CCTEMP
    if limits.get("op_limit_max") is not None:
        health["warning_temp_c"] = limits["op_limit_max"]
    for key in ("limit_max", "critical_limit_max"):
        if limits.get(key) is not None:
            health["critical_temp_c"] = limits[key]
    return {k: v for k, v in health.items() if v is not None}


def nvme_log_health(log_: dict) -> dict:
    """The NVMe SMART / Health log (smartctl's or nvme-cli's names) in iolab's terms."""
    def pick(*names):
        for name in names:
            if log_.get(name) is not None:
                return _integer(log_[name])
        return None

    temperature = pick("temperature")
    if temperature is not None and temperature > 200:  # nvme-cli reports Kelvin
        temperature -= 273
    written, read = pick("data_units_written"), pick("data_units_read")
    return {k: v for k, v in {
        "temperature_c": temperature,
        "critical_warning": pick("critical_warning"),
        "available_spare_pct": pick("available_spare", "avail_spare"),
        "percentage_used": pick("percentage_used", "percent_used"),
        "data_written_bytes": written * NVME_DATA_UNIT if written is not None else None,
        "data_read_bytes": read * NVME_DATA_UNIT if read is not None else None,
        "host_write_commands": pick("host_writes", "host_write_commands"),
        "power_on_hours": pick("power_on_hours"),
        "unsafe_shutdowns": pick("unsafe_shutdowns"),
        "media_errors": pick("media_errors"),
        "error_log_entries": pick("num_err_log_entries"),
        "warning_temp_minutes": pick("warning_temp_time"),
        "critical_temp_minutes": pick("critical_comp_time"),
        "thermal_transitions": _thermal_transitions(log_),
    }.items() if v is not None}


def _integer(value):
    """nvme-cli writes its 128-bit counters as strings ("52")."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


def _thermal_transitions(log_: dict) -> int | None:
    """Times the controller entered its thermal management (throttling) states, summed."""
    counts = [log_.get(f"{prefix}{n}{suffix}") for n in (1, 2)
              for prefix, suffix in (("thermal_temp", "_transition_count"), ("thm_temp", "_trans_count"))]
    counts = [_integer(c) for c in counts if c is not None]
    return sum(counts) if counts else None


def ata_health(table: list) -> dict:
    raw = {row.get("id"): (row.get("raw") or {}).get("value") for row in table}
    health = {}
    for attribute in ATA_TEMPERATURE:
        if raw.get(attribute) is not None:
            health["temperature_c"] = raw[attribute] & 0xFF  # the low byte; others hold min/max
            break
    if raw.get(ATA_CRC_ERRORS) is not None:
        health["crc_errors"] = raw[ATA_CRC_ERRORS]
    media = [raw[a] for a in ATA_MEDIA_ERRORS if raw.get(a) is not None]
    if media:
        health["media_errors"] = sum(media)
    if raw.get(ATA_POWER_ON_HOURS) is not None:
        health["power_on_hours"] = raw[ATA_POWER_ON_HOURS] & 0xFFFFFFFF
    if raw.get(ATA_LBAS_WRITTEN) is not None:
        health["attribute_241_raw"] = raw[ATA_LBAS_WRITTEN]
    return health


def _ata_statistics(doc: dict) -> dict:
    """``ata_device_statistics`` (smartctl -x): name -> value."""
    found = {}
    for page in (doc.get("ata_device_statistics") or {}).get("pages") or []:
        for row in page.get("table") or []:
            if row.get("name") and row.get("value") is not None:
                found[row["name"]] = row["value"]
    return found


def read_nvme(controller: str, namespace: str | None, *, full: bool = True) -> Reading:
    """nvme-cli's view of an NVMe controller (``/dev/nvme0``) and its namespace (``/dev/nvme0n1``);
    ``full=False``: the SMART / Health log alone."""
    doc, why = run_json(["nvme", "smart-log", controller, "--output-format=json"])
    if doc is None:
        return Reading("nvme", controller, reason=_nvme_reason(why))
    health = nvme_log_health(doc)
    if not full:
        return Reading("nvme", controller, health=health)
    ctrl, _ = run_json(["nvme", "id-ctrl", controller, "--output-format=json"])
    health.update(nvme_thresholds(ctrl or {}))
    identity = {}
    if namespace:
        ns, _ = run_json(["nvme", "id-ns", namespace, "--output-format=json"])
        if ns:
            identity["nvme_namespace"] = namespace_format(ns)
    return Reading("nvme", controller, identity=identity, health=health)


def _nvme_reason(why: str | None) -> str:
    if why and "Permission denied" in why:
        return tool_reason("nvme_permission", said=why)
    return why or tool_reason("nvme_silent")


def nvme_thresholds(id_ctrl: dict) -> dict:
    """The controller's warning and critical composite temperature (``wctemp``/``cctemp``, Kelvin; 0: none)."""
    found = {}
    for key, name in (("wctemp", "warning_temp_c"), ("cctemp", "critical_temp_c")):
        if id_ctrl.get(key):
            found[name] = int(id_ctrl[key]) - 273
    return found


def namespace_format(id_ns: dict) -> dict:
    """The namespace's LBA format in use and the formats it offers (``id-ns``: ``flbas``, ``lbafs``)."""
    formats = []
    for index, entry in enumerate(id_ns.get("lbafs") or []):
        formats.append({"index": index, "data_bytes": 2 ** int(entry.get("ds", 9)),
                        "metadata_bytes": int(entry.get("ms", 0)), "relative_performance": entry.get("rp")})
    in_use = int(id_ns.get("flbas", 0)) & 0xF
    current = formats[in_use] if in_use < len(formats) else None
    return {"lba_format": in_use, "data_bytes": current and current["data_bytes"],
            "metadata_bytes": current and current["metadata_bytes"],
            "size_blocks": id_ns.get("nsze"), "formats": formats}
