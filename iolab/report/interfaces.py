"""Interfaces and ratings: what a device's link carries (SATA per generation, PCIe per generation and lane), the vendor's
rated figures (``data/reference/rated-specs.csv``), and the throughputs that are above either: the knowledge behind
:mod:`iolab.report.reasons`' ``interface``, ``rated`` and ``striping`` reasons."""
from __future__ import annotations

import re

import pandas as pd

#: Usable MB/s of a SATA link per generation (line rate x 8/10 for the 8b/10b encoding, / 8 bits).
SATA_MB_S = {"SATA 1.5Gb/s": 150.0, "SATA 3Gb/s": 300.0, "SATA 6Gb/s": 600.0}
#: Usable MB/s of one PCIe lane per generation and direction (8b/10b for 1 and 2, 128b/130b from 3 on).
PCIE_LANE_MB_S = {1: 250.0, 2: 500.0, 3: 985.0, 4: 1969.0, 5: 3938.0}
#: Interfaces of models the articles name without saying so (the makers' specifications).
MODELS = {"Intel 330": "SATA 6Gb/s"}  # Intel SSD 330 series: SATA 6Gb/s
#: Above this share over a ceiling or a rating, a figure is called above it (the design's 10% ground truth).
NEAR = 0.10
#: Units of throughput and their MB/s (Bonnie++'s K is 1024 bytes).
TO_MB_S = {"MB/s": 1.0, "KB/s": 1.024e-3, "K/sec": 1.024e-3, "MiB/s": 1.048576, "GB/s": 1000.0}


def link_ceiling(interface: str) -> float | None:
    """Usable MB/s of an interface named like ``SATA 6Gb/s``, ``SATA`` (the fastest SATA: a figure above it is above
    any SATA link) or ``PCIe 3.0 x4`` / ``PCIe gen3 x4``; None when the name does not give it (``PCIe`` alone)."""
    text = str(interface or "").strip()
    if text in SATA_MB_S:
        return SATA_MB_S[text]
    if re.fullmatch(r"SATA( [IV]+)?", text, flags=re.I):
        return max(SATA_MB_S.values())
    m = re.search(r"PCIe\s*(?:gen\s*)?(\d)(?:\.\d)?\s*x\s*(\d+)", text, flags=re.I)
    if m and int(m.group(1)) in PCIE_LANE_MB_S:
        return PCIE_LANE_MB_S[int(m.group(1))] * int(m.group(2))
    return None


def _tokens(name: str) -> set[str]:
    generic = {"ssd", "hdd", "sata", "disk", "mlc", "slc", "tlc"}
    return {t for t in re.split(r"[\s()/,]+", name.lower()) if t and t not in generic
            and not re.fullmatch(r"\d+(gb|tb|g|t)", t) and not t.startswith("mem=")}


def rated_device(name: str, specs: pd.DataFrame) -> str | None:
    """The one device of ``rated-specs.csv`` a system or device name names (every word of the rated name but its
    capacity and kind in ``name``, or each word of ``name`` starting a word of the rated name), else None: a name
    that could be several rated devices (``ioDrive``: ioDrive, ioDrive2, ioDriveDuo) is none of them."""
    if specs is None or specs.empty:
        return None
    mine = _tokens(name)
    if not mine:
        return None
    def named(device: str) -> bool:  # "ioDrive" names ioDrive, ioDrive2 and ioDriveDuo alike: not one of them
        theirs = _tokens(device)
        return theirs <= mine or all(any(t.startswith(m) for t in theirs) for m in mine)
    found = [d for d in dict.fromkeys(specs["device"]) if named(d)]
    return found[0] if len(found) == 1 else None


def interface_of(name: str, specs: pd.DataFrame | None = None) -> tuple[str, str] | None:
    """``(interface, source)`` of a system: ``rated`` (rated-specs.csv's interface column), ``model`` (:data:`MODELS`)
    or ``name`` (the name says SATA); None when nothing says it."""
    device = rated_device(name, specs) if specs is not None else None
    if device is not None:
        interface = str(specs.loc[specs["device"] == device, "interface"].iloc[0])
        if link_ceiling(interface):
            return interface, "rated"
    for model, interface in MODELS.items():
        if model.lower() in name.lower():
            return interface, "model"
    if re.search(r"\bSATA\b", name):
        return "SATA", "name"
    return None


def _drives(name: str) -> int:
    """Drives of a RAID0 named like ``X25-V 40GB x4 RAID0`` (1 when the name says no RAID0)."""
    if not re.search(r"RAID\s*0\b", name, flags=re.I):
        return 1
    m = re.search(r"\bx\s?(\d+)\b", name)
    return int(m.group(1)) if m else 1


def _spec_for(test: str) -> str:
    low = str(test).lower()
    return "seq_write" if ("write" in low or "put" in low) else "seq_read"


def above(rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> list[dict]:
    """Throughputs above the link (``interface``), above the rated figure (``rated``), or a RAID0 above one drive's
    rating (``striping``). ``rows``: ``system, test, direction`` and ``mbps`` (isolated figures only). Each dict:
    ``rule, system, test, direction, value`` (MB/s), ``against`` the ceiling or rating, ``ratio`` value / against,
    ``detail`` the interface or rated device, ``extra`` the drives of a RAID0."""
    out = []
    for _, row in rows.iterrows():
        name = " ".join(str(row[c]) for c in ("system", "device") if c in row.index and pd.notna(row[c]))
        base = {"system": row["system"], "test": row["test"], "direction": row.get("direction", "") or "",
                "value": row["mbps"], "unit": "MB/s"}
        drives = _drives(name)
        link = interface_of(name, specs)
        ceiling = link_ceiling(link[0]) if link else None
        if ceiling and row["mbps"] > ceiling * drives * (1 + NEAR):
            out.append({**base, "rule": "interface", "against": ceiling * drives, "ratio": row["mbps"] / ceiling,
                        "detail": link[0], "extra": drives})
            continue
        device = rated_device(name, specs) if specs is not None else None
        if device is None:
            continue
        rated = specs[(specs["device"] == device) & (specs["spec"] == _spec_for(row["test"]))
                      & (specs["unit"] == "MB/s")]
        if rated.empty:
            continue
        value = float(rated["value"].iloc[0])
        if drives > 1 and row["mbps"] >= 1.5 * value:
            out.append({**base, "rule": "striping", "against": value, "ratio": row["mbps"] / value,
                        "detail": device, "extra": drives})
        elif drives == 1 and row["mbps"] > value * (1 + NEAR):
            out.append({**base, "rule": "rated", "against": value, "ratio": row["mbps"] / value, "detail": device})
    return out


def drive_link(drive: dict) -> str | None:
    """The interface of one drive as the run recorded it (``targets[].drives[]``, :func:`iolab.devices.health.identity`):
    ``SATA 6Gb/s`` from the SATA link's speed, ``PCIe 3.0 x4`` from an NVMe drive's own PCIe port; None otherwise
    (a loop or virtio device, a link the kernel did not report)."""
    if not isinstance(drive, dict):
        return None
    link = drive.get("link") if isinstance(drive.get("link"), dict) else {}
    if drive.get("transport") == "sata":
        m = re.match(r"([\d.]+)\s*Gbps", str(link.get("sata_speed") or ""))
        return f"SATA {float(m.group(1)):g}Gb/s" if m else None
    pcie = link.get("pcie") if isinstance(link.get("pcie"), dict) else {}
    if drive.get("transport") == "nvme" and pcie.get("generation") and pcie.get("width"):
        return f"PCIe {int(pcie['generation'])}.0 x{int(pcie['width'])}"
    return None


def target_links(manifests: pd.DataFrame) -> dict:
    """``(run_id, target name) -> (interface, drives)`` for the targets whose every drive has a known link (a RAID0 of
    four SATA drives: four links)."""
    found = {}
    for record in manifests.to_dict("records") if not manifests.empty else []:
        for target in record.get("targets") or []:
            if not isinstance(target, dict) or target.get("emulated"):
                continue  # an emulated device's limits are iolab.report.ceilings' business
            links = [drive_link(d) for d in target.get("drives") or []]
            if links and all(links) and len(set(links)) == 1:
                found[(record.get("run_id"), target.get("name"))] = (links[0], len(links))
    return found


def above_measured(results: pd.DataFrame, manifests: pd.DataFrame, *, statistic: str = "mean") -> list[dict]:
    """Measured throughputs above the link the run recorded for the target's drives (``targets[].drives[].link``,
    :func:`target_links`): one ``interface`` row (:data:`iolab.report.reasons.COLUMNS`) per system, test and
    direction."""
    if results.empty or "target" not in results.columns or "bw_mbps" not in results.columns:
        return []
    links = target_links(manifests)
    rows = results[results["valid"].fillna(True).astype(bool)] if "valid" in results.columns else results
    if "isolation" in rows.columns:
        rows = rows[rows["isolation"].astype(str) != "none"]  # the page cache's figures: the cache commentary's
    system = rows["system"] if "system" in rows.columns else rows["label"]
    out = []
    for (name, run_id, target, test, direction), part in rows.groupby(
            [system, "run_id", "target", "test", "direction"], sort=False, dropna=False):
        link = links.get((run_id, target))
        ceiling = link_ceiling(link[0]) * link[1] if link else None
        mbps = pd.to_numeric(part["bw_mbps"], errors="coerce")
        value = mbps.median() if statistic == "median" else mbps.max() if statistic == "best" else mbps.mean()
        if ceiling and value > ceiling * (1 + NEAR):
            out.append({"rule": "interface", "system": name, "test": test, "direction": direction, "value": value,
                        "unit": "MB/s", "against": ceiling, "ratio": value / ceiling, "detail": link[0],
                        "extra": link[1]})
    return out
