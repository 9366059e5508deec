"""What a run did to its drives, from what the run recorded: health counters before and after, and the
temperature over time.

Every run keeps, per target, a snapshot of each drive's health counters before and after it
(``targets[].health_before`` / ``health_after`` in the manifest, :func:`iolab.devices.health.snapshot`)
and, while each test ran, the temperature once a second (``raw/[<target>/]<test>-<rep>.temp.csv``,
:mod:`iolab.devices.thermal`). :func:`health_deltas` turns the snapshots into one tidy row per system,
drive and counter (before, after, the change), so a report can put systems side by side: how much
each drive counted as written, its wear, errors that appeared, how hot it got. A drive no tool could
read gets one row saying why (the tools' own words), never a guessed zero. :func:`temperature_series`
reads a run's temperature files into one tidy frame for a chart over time, :func:`run_timeline` places
its samples on the run's clock and :func:`warning_thresholds` gives each drive's warning temperature.

Computation only: no device is read here, nothing is drawn.
"""
from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Sequence

import pandas as pd

from iolab.core import recorded
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: the counters compared, in the order a table shows them, with what their change means:
#: ``count`` grows with use (its change is what the run added), ``level`` is a state (its change a shift)
COUNTERS = {
    "data_written_bytes": "count", "data_read_bytes": "count", "host_write_commands": "count",
    "percentage_used": "count", "available_spare_pct": "level", "media_errors": "count", "crc_errors": "count",
    "error_log_entries": "count", "unsafe_shutdowns": "count", "power_on_hours": "count",
    "temperature_c": "level", "warning_temp_minutes": "count", "critical_temp_minutes": "count",
    "thermal_transitions": "count",
}
#: the columns of :func:`health_deltas`
DELTA_COLUMNS = ("system", "run_id", "target", "device", "counter", "kind", "before", "after", "delta", "unread",
                 "virtual")
#: how a block device is attached when it is no drive but the kernel's own (iolab.devices.health.transport): a loop
#: device (a file), md, device-mapper, zram...: it has no health counters of its own, the drives beneath it do
VIRTUAL_TRANSPORTS = frozenset({"loop", "md", "device-mapper", "virtual"})
#: the transports of a drive with a firmware, a serial and a link of its own ("unknown": sysfs did not say, so the
#: drive may well have them); with VIRTUAL_TRANSPORTS every answer iolab.devices.health.transport gives
HARDWARE_TRANSPORTS = frozenset({"nvme", "sata", "scsi", "usb", "virtio", "unknown"})
#: the columns of :func:`temperature_series`
SERIES_COLUMNS = ("run_id", "target", "step", "rep", "device", "sensor", "elapsed_s", "temperature_c", "utc")
_SERIES_FILE = re.compile(r"^(?P<step>.+)-(?P<rep>\d+)\.temp\.csv$")


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


#: what iolab records when a tool could not read a drive, by key (iolab.devices.smart writes them with
#: :func:`tool_reason`, a report reads them back with :func:`reason_of` to say them in its language: the locales'
#: ``drives.reasons``); ``{said}`` is the tool's own words, kept as it said them
TOOL_REASONS = {
    "not_installed": "{program} not installed",
    "timeout": "{program} did not answer within {seconds} s",
    "could_not_run": "{program} could not run: {said}",
    "exited": "{program} exited with {code}: {said}",
    "smart_permission": "no permission to read SMART data (root needed): {said}",
    "not_smart": "not a SMART device: {said}",
    "smart_usage": "smartctl refused its command line: {said}",
    "smart_open": "smartctl could not open the device: {said}",
    "nvme_permission": "no permission to read the NVMe log (root needed): {said}",
    "nvme_silent": "nvme gave no answer",
    "no_tool": "no tool read this drive",
}
#: the tools whose answers a drive's ``sources`` record (a reason line is ``TOOL: REASON``)
TOOLS = ("smartctl", "nvme")


def tool_reason(key: str, **fields) -> str:
    """The recorded reason ``key`` of :data:`TOOL_REASONS` with its fields (``program``, ``said``...)."""
    return recorded.write(TOOL_REASONS, key, **fields)


def reason_of(text: str) -> tuple[str, dict] | None:
    """``(key, fields)`` of a recorded reason (:data:`TOOL_REASONS`), or None for words iolab did not write."""
    return recorded.read(text, TOOL_REASONS, free=("said",))


def tool_lines(text: str) -> list[tuple[str | None, str]]:
    """A reasons text (``smartctl: ...; nvme: ...``, as :func:`health_deltas`' ``unread`` holds it) split back into
    ``(tool, reason)`` pairs (tool None for a line that names none)."""
    tools = "|".join(TOOLS)
    lines = re.split(rf"; (?=(?:{tools}): )", str(text))
    return [(m.group(1), m.group(2)) if (m := re.match(rf"({tools}): (.*)", line, re.S)) else (None, line)
            for line in lines]


def unread_pairs(record: dict) -> list[tuple[str, str]]:
    """``(tool, reason)`` for each tool that could not read a drive record or health snapshot (its ``sources``)."""
    return [(tool, why) for tool, why in (record.get("sources") or {}).items() if why != "ok"]


def _unread(snapshot: dict) -> str | None:
    """The tools' reasons for a snapshot without counters ("smartctl: not a SMART device: ...": one text in a
    tidy column, :func:`tool_lines` splits it back)."""
    return "; ".join(f"{tool}: {why}" for tool, why in unread_pairs(snapshot)) or tool_reason("no_tool")


def _by_device(snapshots) -> dict:
    return {s["device"]: s for s in snapshots or [] if isinstance(s, dict) and s.get("device")}


def _target_rows(system: str, run_id, target: dict) -> list[dict]:
    rows = []
    before, after = _by_device(target.get("health_before")), _by_device(target.get("health_after"))
    transports = {d.get("device"): d.get("transport") for d in target.get("drives") or [] if isinstance(d, dict)}
    for device in list(dict.fromkeys([*before, *after])):
        then, now = before.get(device, {}), after.get(device, {})
        base = {"system": system, "run_id": run_id, "target": target.get("name"), "device": device,
                "virtual": transports.get(device) in VIRTUAL_TRANSPORTS}
        counters = [c for c in COUNTERS if _number(then.get(c)) is not None or _number(now.get(c)) is not None]
        if not counters:
            rows.append({**base, "counter": None, "kind": None, "before": None, "after": None, "delta": None,
                         "unread": _unread(now or then)})
            continue
        for counter in counters:
            old, new = _number(then.get(counter)), _number(now.get(counter))
            rows.append({**base, "counter": counter, "kind": COUNTERS[counter], "before": old, "after": new,
                         "delta": None if old is None or new is None else new - old, "unread": None})
    return rows


def health_deltas(manifests: pd.DataFrame | Sequence[dict], *, names: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per system, drive and counter: ``before``, ``after`` and ``delta`` (after - before; None
    when a snapshot lacks the counter), ``kind`` (:data:`COUNTERS`); a drive without any counter gets one
    row with ``counter`` None and ``unread`` the tools' reasons; ``virtual``: the device is the kernel's own
    (:data:`VIRTUAL_TRANSPORTS`), no drive, so nothing had counters to read. ``names`` name the systems (default the
    manifests' ``system_name``, ``label`` or ``host``). Runs from before health was recorded add no rows."""
    records = manifests.to_dict("records") if isinstance(manifests, pd.DataFrame) else list(manifests)
    if names is not None and len(names) != len(records):
        raise IolabError(f"{len(names)} names for {len(records)} runs", context="health deltas")
    rows = []
    for index, manifest in enumerate(records):
        system = names[index] if names is not None else (
            manifest.get("system_name") or manifest.get("label") or manifest.get("host") or "?")
        for target in manifest.get("targets") or []:
            if isinstance(target, dict):
                rows += _target_rows(str(system), manifest.get("run_id"), target)
    frame = pd.DataFrame(rows, columns=list(DELTA_COLUMNS))
    return frame.astype({"before": float, "after": float, "delta": float})


def temperature_series(run_dir: str | Path) -> pd.DataFrame:
    """Every temperature file of a run (``raw/[<target>/]<step>-<rep>.temp.csv``) as one tidy frame
    (:data:`SERIES_COLUMNS`; ``target`` None for a run of one target, ``sensor`` ``composite`` in files
    written before sensors were told apart, ``utc`` the sample's time as the sampler wrote it). Empty when
    the run's drives had no sensor."""
    run_dir = Path(run_dir)
    raw = run_dir / "raw"
    frames = []
    for path in sorted(raw.rglob("*.temp.csv")) if raw.is_dir() else []:
        named = _SERIES_FILE.match(path.name)
        if named is None:
            log.info("not a temperature series name: %s", path)
            continue
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError) as exc:
            raise IolabError(f"unreadable temperature series: {exc}", context=str(path)) from None
        missing = {"elapsed_s", "device", "temperature_c"} - set(frame.columns)
        if missing:
            raise IolabError(f"no column(s) {', '.join(sorted(missing))}", context=str(path))
        if "sensor" not in frame.columns:
            frame["sensor"] = "composite"
        if "utc" not in frame.columns:
            frame["utc"] = None
        frame["step"], frame["rep"] = named.group("step"), int(named.group("rep"))
        frame["target"] = path.parent.name if path.parent != raw else None
        frame["run_id"] = run_dir.name
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(SERIES_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(SERIES_COLUMNS)]


def run_timeline(series: pd.DataFrame) -> pd.DataFrame:
    """``series`` (:func:`temperature_series`) with ``run_s``, each sample's seconds since the run's first, for a
    chart of the whole run (each test's ``elapsed_s`` starts at 0): from the samples' ``utc``; a file without it
    (none written so far) is placed after the tests before it in the files' order, a second apart. Sorted by
    ``run_s``."""
    frame = series.copy().reset_index(drop=True)
    if frame.empty:
        return frame.assign(run_s=pd.Series(dtype=float))
    stamps = pd.to_datetime(frame["utc"], utc=True, errors="coerce", format="ISO8601")
    start = stamps.min()
    frame["run_s"] = [(t - start).total_seconds() if pd.notna(t) else math.nan for t in stamps]
    tests = pd.Series(["|".join(map(str, key)) for key in zip(frame["run_id"], frame["target"], frame["step"],
                                                              frame["rep"])], index=frame.index)
    clock = 0.0
    for test in dict.fromkeys(tests):
        rows = tests.eq(test)
        if frame.loc[rows, "run_s"].isna().any():
            frame.loc[rows, "run_s"] = clock + frame.loc[rows, "elapsed_s"].astype(float)
        clock = max(clock, float(frame.loc[rows, "run_s"].max()) + 1.0)
    return frame.sort_values("run_s", kind="stable").reset_index(drop=True)


#: whose stated limit counts, first found: the drive's own (nvme-cli's WCTEMP/CCTEMP, smartctl's), as the engine's
#: thermal verdict judges by it, then the kernel's hwmon threshold (``temperature_limits[].source``)
LIMIT_SOURCES = ("nvme", "smartctl", "hwmon")


def stated_limit(records, limit: str = "warning") -> float | None:
    """The composite temperature's ``limit`` (warning or critical) among a drive record's ``temperature_limits``,
    by :data:`LIMIT_SOURCES`; None when no source stated it."""
    found = [r for r in records or [] if isinstance(r, dict) and r.get("sensor") == "composite"
             and r.get("limit") == limit and _number(r.get("celsius")) is not None]
    for prefix in LIMIT_SOURCES:
        for record in found:
            if str(record.get("source") or "").startswith(prefix):
                return float(record["celsius"])
    return None


def warning_thresholds(manifest: dict, limit: str = "warning") -> dict:
    """``{device: degrees C}``: the warning (or ``limit="critical"``: critical) temperature of each drive as the
    run stored it: its drive record's ``temperature_limits`` (``targets[].drives[]``, :func:`stated_limit`), else,
    for a run recorded before the limits were, the health snapshot before the run
    (``targets[].health_before[].warning_temp_c``: NVMe's WCTEMP, an ATA drive's SCT limit); drives that stated
    none are absent."""
    key = {"warning": "warning_temp_c", "critical": "critical_temp_c"}[limit]
    found = {}
    for target in manifest.get("targets") or []:
        if not isinstance(target, dict):
            continue
        for snapshot in target.get("health_before") or []:
            if isinstance(snapshot, dict) and _number(snapshot.get(key)) is not None:
                found[snapshot.get("device")] = float(snapshot[key])
        for drive in target.get("drives") or []:
            stated = stated_limit(drive.get("temperature_limits"), limit) if isinstance(drive, dict) else None
            if stated is not None:
                found[drive.get("device")] = stated
    return found
