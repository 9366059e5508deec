"""A drive's temperature while a test runs: sampled each second in a background thread.

:func:`sources` finds, for each disk, where its temperature can be read: the
kernel's hwmon sensor (the nvme driver's composite temperature, ``drivetemp``
for SATA: a file read, no process), else ``smartctl -A`` (NVMe composite, ATA
attribute 194/190), else nothing (a loop or virtio device: no sampler runs, no
series is written). :class:`Sampler` writes each sample as it is taken to a CSV
(``elapsed_s,utc,device,temperature_c``) so an interrupted test keeps its
series, and :func:`verdict` says whether a test ran hot: the drive passed its
warning threshold, or reported thermal throttling (NVMe thermal management
transitions, minutes above the warning or critical temperature, the critical
warning's temperature bit) between the health snapshots around the test.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime
import logging
import threading
import time
from pathlib import Path
from typing import Callable

from iolab.devices import health as health_mod, smart

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
#: NVMe critical warning bit 1: a temperature is above its over-temperature or below its under-temperature threshold
NVME_CRITICAL_WARNING_TEMPERATURE = 0x02
#: health counters that grow while a drive throttles or runs too hot
THERMAL_COUNTERS = ("thermal_transitions", "warning_temp_minutes", "critical_temp_minutes")


@dataclasses.dataclass
class Source:
    """Where one disk's temperature is read: ``how`` is ``hwmon`` (a sysfs file) or ``smartctl``."""

    device: str
    how: str
    read: Callable[[], float | None]
    warning_c: float | None = None   # the sensor's own upper threshold (hwmon temp1_max), if any


def _hwmon_input(disk: str) -> tuple[Path, float | None] | None:
    """The hwmon ``temp1_input`` of ``disk`` (its controller's for NVMe) and ``temp1_max`` in degrees C."""
    base = Path("/sys/block") / disk / "device"
    for sensor in sorted(base.glob("hwmon*/temp1_input")) + sorted(base.glob("hwmon/hwmon*/temp1_input")):
        limit = _millidegrees(sensor.parent / "temp1_max")
        return sensor, limit
    return None


def _millidegrees(path: Path) -> float | None:
    try:
        return int(path.read_text().strip()) / 1000.0
    except (OSError, ValueError):
        return None


def _smartctl_temperature(device: str) -> float | None:
    doc, why = smart.run_json(["smartctl", "-A", "--json=c", device])
    if doc is None or smart.smartctl_failure(doc):
        return None
    return smart.smartctl_health(doc).get("temperature_c")


def sources(disks: list[str]) -> tuple[list[Source], dict]:
    """The temperature source of each disk that has one, and for the others why not."""
    found, missing = [], {}
    for disk in disks:
        device = f"/dev/{disk}"
        hwmon = _hwmon_input(disk)
        if hwmon is not None:
            sensor, limit = hwmon
            found.append(Source(device, "hwmon", lambda s=sensor: _millidegrees(s), warning_c=limit))
            continue
        if _smartctl_temperature(device) is not None:
            found.append(Source(device, "smartctl", lambda d=device: _smartctl_temperature(d)))
            continue
        missing[device] = "no temperature sensor (no hwmon sensor, smartctl reports none)"
    return found, missing


class Sampler:
    """``with Sampler(sources, csv_path) as s: ...``: a sample of every source each ``interval`` seconds.

    The first sample is taken on entry, the last on exit; ``s.maximum`` is the
    highest temperature seen (None without samples), ``s.samples`` the rows.
    """

    def __init__(self, sources_: list[Source], csv_path: Path, *, interval: float = INTERVAL_S):
        self.sources, self.csv_path, self.interval = sources_, Path(csv_path), interval
        self.samples: list[tuple[float, str, str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file = None
        self._writer = None
        self._started = 0.0

    def __enter__(self) -> "Sampler":
        if not self.sources:
            return self
        self._file = open(self.csv_path, "w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self._writer.writerow(["elapsed_s", "utc", "device", "temperature_c"])
        self._started = time.monotonic()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="iolab-temperature", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        self._file.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        elapsed = round(time.monotonic() - self._started, 3)
        utc = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        for source in self.sources:
            try:
                value = source.read()
            except Exception as exc:  # a sensor that fails once must not end the test
                log.debug("temperature of %s not read: %s", source.device, exc)
                value = None
            if value is None:
                continue
            row = (elapsed, utc, source.device, float(value))
            self.samples.append(row)
            self._writer.writerow(row)
        self._file.flush()

    @property
    def maximum(self) -> float | None:
        return max((row[3] for row in self.samples), default=None)

    def maximum_of(self, device: str) -> float | None:
        return max((row[3] for row in self.samples if row[2] == device), default=None)


def verdict(sampler: Sampler, before: dict, after: dict) -> str | None:
    """Why a test counts as ``thermal`` (None: it does not). ``before``/``after`` map a device to its
    health snapshot (:func:`iolab.devices.health.snapshot`) around the test."""
    for source in sampler.sources:
        warning = (before.get(source.device) or {}).get("warning_temp_c") or source.warning_c
        hottest = sampler.maximum_of(source.device)
        if warning is not None and hottest is not None and hottest >= warning:
            return f"{source.device} reached {hottest:g} C, at or above its warning threshold of {warning:g} C"
    for device, now in after.items():
        then = before.get(device) or {}
        for counter in THERMAL_COUNTERS:
            if now.get(counter) is not None and then.get(counter) is not None and now[counter] > then[counter]:
                return f"{device} reported thermal throttling ({counter} {then[counter]} -> {now[counter]})"
        if (now.get("critical_warning") or 0) & NVME_CRITICAL_WARNING_TEMPERATURE:
            return f"{device} raised its temperature warning (critical_warning {now['critical_warning']:#x})"
    return None


def snapshots(devices: list[str]) -> dict:
    """Health snapshots of ``devices`` (``/dev/X``) keyed by device."""
    return {device: health_mod.snapshot(device.removeprefix("/dev/"), full=False) for device in devices}
