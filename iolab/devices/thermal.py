"""A drive's temperature while a test runs: sampled each second in a background thread.

:func:`sources` finds, for each disk, where its temperature can be read: the
kernel's hwmon sensors (the nvme driver's composite temperature and, where the
drive reports them, its temperature sensors 1-8; ``drivetemp`` for SATA: file
reads, no process), else ``smartctl -A`` (the NVMe composite, ATA attribute
194/190), else nothing (a loop or virtio device: no sampler runs, no series is
written). :class:`Sampler` writes each sample as it is taken to a CSV
(``elapsed_s,utc,device,sensor,temperature_c``) so an interrupted test keeps
its series; the drive's own temperature is the ``composite`` sensor (NVMe's
definition; the only one of a SATA drive), and the test's maximum is that
sensor's. :func:`verdict` says whether a test ran hot: the drive passed its
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

from iolab.devices import health as health_mod, hwmon, smart

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
SYS_BLOCK = hwmon.SYS_BLOCK
#: the drive's own temperature (NVMe: the composite temperature; SATA: its one sensor)
COMPOSITE = hwmon.COMPOSITE
#: NVMe critical warning bit 1: a temperature is above its over-temperature or below its under-temperature threshold
NVME_CRITICAL_WARNING_TEMPERATURE = 0x02
#: health counters that grow while a drive throttles or runs too hot
THERMAL_COUNTERS = ("thermal_transitions", "warning_temp_minutes", "critical_temp_minutes")


@dataclasses.dataclass
class Source:
    """Where one sensor of one disk is read: ``how`` is ``hwmon`` (a sysfs file) or ``smartctl``;
    ``sensor`` is :data:`COMPOSITE` (the drive's own temperature) or ``sensor N`` (NVMe's sensors 1-8)."""

    device: str
    how: str
    read: Callable[[], float | None]
    warning_c: float | None = None   # the composite's upper threshold (hwmon temp1_max), if any
    sensor: str = COMPOSITE


def _smartctl_temperature(device: str) -> float | None:
    doc, why = smart.run_json(["smartctl", "-A", "--json=c", device])
    if doc is None or smart.smartctl_failure(doc):
        return None
    return smart.smartctl_health(doc).get("temperature_c")


def sources(disks: list[str], *, sys_block: Path = SYS_BLOCK) -> tuple[list[Source], dict]:
    """The temperature sources of each disk that has them (every hwmon sensor of it, else smartctl's
    composite), and for the others why not."""
    found, missing = [], {}
    for disk in disks:
        device = f"/dev/{disk}"
        listed = hwmon.sensors(disk, sys_block)
        if listed:  # the composite's warning is its temp1_max: a sensor's own threshold is not the drive's
            found += [Source(device, "hwmon", lambda s=sensor.input: hwmon.millidegrees(s), sensor=sensor.name,
                             warning_c=sensor.warning_c if sensor.name == COMPOSITE else None)
                      for sensor in listed]
            continue
        if _smartctl_temperature(device) is not None:
            found.append(Source(device, "smartctl", lambda d=device: _smartctl_temperature(d)))
            continue
        missing[device] = "no temperature sensor (no hwmon sensor, smartctl reports none)"
    return found, missing


class Sampler:
    """``with Sampler(sources, csv_path) as s: ...``: a sample of every source each ``interval`` seconds.

    The first sample is taken on entry, the last on exit; ``s.maximum`` is the highest
    temperature of a drive (its composite sensor) seen (None without samples), ``s.samples``
    the rows, every sensor's.
    """

    COLUMNS = ("elapsed_s", "utc", "device", "sensor", "temperature_c")

    def __init__(self, sources_: list[Source], csv_path: Path, *, interval: float = INTERVAL_S):
        self.sources, self.csv_path, self.interval = sources_, Path(csv_path), interval
        self.samples: list[tuple[float, str, str, str, float]] = []
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
        self._writer.writerow(self.COLUMNS)
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
                log.debug("temperature of %s (%s) not read: %s", source.device, source.sensor, exc)
                value = None
            if value is None:
                continue
            row = (elapsed, utc, source.device, source.sensor, float(value))
            self.samples.append(row)
            self._writer.writerow(row)
        self._file.flush()

    @property
    def maximum(self) -> float | None:
        """The hottest a drive was (its composite sensor; a sensor inside it may run hotter)."""
        return max((row[4] for row in self.samples if row[3] == COMPOSITE), default=None)

    def maximum_of(self, device: str, sensor: str = COMPOSITE) -> float | None:
        return max((row[4] for row in self.samples if row[2] == device and row[3] == sensor), default=None)


def verdict(sampler: Sampler, before: dict, after: dict) -> str | None:
    """Why a test counts as ``thermal`` (None: it does not). ``before``/``after`` map a device to its
    health snapshot (:func:`iolab.devices.health.snapshot`) around the test."""
    for source in sampler.sources:
        if source.sensor != COMPOSITE:  # the warning threshold is the composite temperature's
            continue
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
