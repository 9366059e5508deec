"""Which drives a run measured, as rows of the report's environment table.

A run records, per target, the identity of each drive under it (``targets[].drives`` in the
manifest, :func:`iolab.devices.health.identity`): model, firmware, serial (hashed unless the run
kept serials), capacity, sector sizes, the NVMe namespace's LBA format, the link (a SATA link's
speed; the PCIe generation and width of the port) and the controller behind it, and in
``sources`` what each tool answered ("ok", "smartctl not installed", "not a SMART device: ...").
:func:`identity_fields` turns that record into ``{field: text}``: a value the run recorded as it
was recorded, a value it could not collect as unknown with the tools' reasons, never a guess; a
field that does not apply to the drive (a namespace format on a SATA drive, a link on a loop
device) as None. Runs from before drives were recorded give no identity rows at all.
"""
from __future__ import annotations

from iolab.analysis.drivehealth import HARDWARE_TRANSPORTS, VIRTUAL_TRANSPORTS, reason_of, stated_limit, unread_pairs
from iolab.core.units import human_size
from iolab.report import i18n

_t = i18n.scoped("drives")

#: the environment table's identity rows, in order (each a key of ``drives.labels``)
FIELDS = ("firmware", "capacity", "sectors", "nvme_format", "link", "controller", "temperature_limits", "serial",
          "not_read")


def drives_of(manifest: dict) -> list[dict]:
    """The drive records of a run's first target ([] for runs from before they were recorded)."""
    target = (manifest.get("targets") or [{}])[0] or {}
    drives = target.get("drives") if isinstance(target, dict) else None
    return [d for d in drives or [] if isinstance(d, dict)]


def reasons(drive: dict, lang: str = "en") -> str:
    """What the tools that could not read ``drive`` said ("smartctl: not a SMART device: ..."), or ""."""
    return say_reasons(unread_pairs(drive), lang)


def say_reasons(pairs, lang: str) -> str:
    """The tools' ``(tool, reason)`` pairs (tool None for a line naming none) in ``lang``: iolab's own words
    (:data:`iolab.analysis.drivehealth.TOOL_REASONS`) from the locale's ``drives.reasons``, a tool's own words
    as it said them."""
    lines = []
    for tool, why in pairs:
        known = reason_of(why)
        said = _t(f"reasons.{known[0]}", lang, **known[1]) if known else (f"「{why}」" if lang == "ja" else why)
        lines.append(f"{tool}{i18n.colon(lang)}{said}" if tool else said)
    return _t("reasons.joiner", lang).join(lines)


def _unknown(drive: dict, lang: str) -> str:
    why = reasons(drive, lang)
    return _t("unknown_because", lang, reason=why) if why else _t("unknown", lang)


def _bytes(value, lang: str) -> str:
    return _t("bytes", lang, value=i18n.number(int(value), digits=0))


def _capacity(drive: dict, lang: str) -> str | None:
    size = drive.get("capacity_bytes")
    if not isinstance(size, (int, float)) or isinstance(size, bool):
        return None
    return _t("capacity", lang, size=human_size(size), exact=i18n.number(int(size), digits=0))


def _sectors(drive: dict, lang: str) -> str | None:
    logical, physical = drive.get("logical_block_size"), drive.get("physical_block_size")
    if logical is None and physical is None:
        return None
    unknown = _t("unknown", lang)
    return _t("sectors", lang, logical=_bytes(logical, lang) if logical else unknown,
              physical=_bytes(physical, lang) if physical else unknown)


def _nvme_format(drive: dict, lang: str) -> str | None:
    namespace = drive.get("nvme_namespace") or {}
    if namespace.get("data_bytes"):
        return _t("nvme_format", lang, index=namespace.get("lba_format", "?"),
                  data=_bytes(namespace["data_bytes"], lang), metadata=_bytes(namespace.get("metadata_bytes") or 0, lang),
                  formats=len(namespace.get("formats") or []))
    if drive.get("nvme_formatted_lba_size"):  # smartctl's view when nvme-cli gave none
        return _t("nvme_lba_size", lang, data=_bytes(drive["nvme_formatted_lba_size"], lang))
    return _unknown(drive, lang) if drive.get("transport") == "nvme" else None


def _pcie(port: dict, lang: str) -> str | None:
    if port.get("generation"):
        text = _t("pcie", lang, generation=port["generation"], width=port.get("width") or "?",
                  speed=port.get("speed") or "?")
        if port.get("max_speed") and (port.get("max_speed") != port.get("speed")
                                      or str(port.get("max_width")) != str(port.get("width"))):
            text += i18n.paren(_t("pcie_max", lang, speed=port["max_speed"], width=port.get("max_width") or "?"), lang)
        slot = port.get("slot") or {}
        if slot.get("generation") and (slot.get("max_speed") != port.get("max_speed")
                                       or str(slot.get("max_width")) != str(port.get("max_width"))):
            text += i18n.paren(_t("pcie_slot", lang, speed=slot["max_speed"], width=slot.get("max_width") or "?"), lang)
        return text
    if port.get("note"):
        return _t("no_pcie_link", lang)
    return None


def _link(drive: dict, lang: str) -> str | None:
    link, parts = drive.get("link") or {}, []
    sata = drive.get("sata_link") or {}
    if sata.get("current"):  # the drive's own account: negotiated and maximum speed
        parts.append(_t("sata", lang, speed=sata["current"]) + (
            i18n.paren(_t("sata_max", lang, speed=sata["max"]), lang) if sata.get("max") else ""))
    elif link.get("sata_speed"):
        parts.append(_t("sata", lang, speed=link["sata_speed"]))
    port = link.get("pcie") or {}
    pcie = _pcie(port, lang) if port else None
    if pcie:
        # a SATA or SAS disk's nearest PCIe port is its controller's, not its own
        parts.append(pcie if drive.get("transport") == "nvme" else _t("via_controller", lang, link=pcie))
    if parts:
        return i18n.join(parts, lang) if lang == "en" else "、".join(parts)
    return _unknown(drive, lang) if drive.get("transport") in HARDWARE_TRANSPORTS else None


def _controller(drive: dict, lang: str) -> str | None:
    port = (drive.get("link") or {}).get("pcie") or {}
    if port.get("controller") or port.get("driver"):
        name = i18n.label(port.get("controller") or "", lang, section="drive_controllers") if port.get("controller") \
            else _t("controller_unnamed", lang)
        details = i18n.comma_list([v for v in (port.get("driver"), port.get("address")) if v], lang)
        return name + (i18n.paren(details, lang) if details else "")
    return _unknown(drive, lang) if drive.get("transport") in HARDWARE_TRANSPORTS else None


def _temperature_limits(drive: dict, lang: str) -> str | None:
    """The composite temperature's warning and critical limits the drive stated (its ``temperature_limits``, the
    source the thermal verdict and the temperature chart use: :func:`iolab.analysis.drivehealth.stated_limit`);
    None when it stated neither (many drives state none: that is no failure to read)."""
    limits = [(name, stated_limit(drive.get("temperature_limits"), name)) for name in ("warning", "critical")]
    parts = [_t(f"temperature_{name}", lang, degrees=i18n.number(value, digits=0)) for name, value in limits
             if value is not None]
    return i18n.comma_list(parts, lang) or None


def _plain(drive: dict, key: str, lang: str) -> str | None:
    value = drive.get(key)
    if value not in (None, ""):
        return str(value)
    return _unknown(drive, lang) if drive.get("transport") in HARDWARE_TRANSPORTS else None


def _drive_fields(drive: dict, lang: str) -> dict:
    return {"firmware": _plain(drive, "firmware", lang), "capacity": _capacity(drive, lang),
            "sectors": _sectors(drive, lang), "nvme_format": _nvme_format(drive, lang),
            "link": _link(drive, lang), "controller": _controller(drive, lang),
            "temperature_limits": _temperature_limits(drive, lang),
            "serial": _plain(drive, "serial", lang),
            # a loop, md or device-mapper device is no drive: no tool was expected to read it (the health line says so)
            "not_read": None if drive.get("transport") in VIRTUAL_TRANSPORTS else reasons(drive, lang) or None}


def identity_fields(manifest: dict, *, lang: str = "en") -> dict:
    """``{field: text or None}`` for :data:`FIELDS` (every value None for a run that recorded no drives); a target
    on several drives (an md array's members) gives each drive's value after its name."""
    drives = drives_of(manifest)
    per_drive = [(d.get("device") or "?", _drive_fields(d, lang)) for d in drives]
    fields = {}
    for key in FIELDS:
        values = [(device, found[key]) for device, found in per_drive if found[key] is not None]
        if len(drives) == 1 or len({v for _, v in values}) <= 1:
            fields[key] = values[0][1] if values else None
        else:
            fields[key] = "; ".join(f"{device}{i18n.colon(lang)}{value}" for device, value in values)
    return fields


def model_of(manifest: dict) -> str | None:
    """The drive's model as the drive reports it, for runs whose block device recorded none."""
    models = list(dict.fromkeys(str(d["model"]) for d in drives_of(manifest) if d.get("model")))
    return ", ".join(models) or None
