"""A disk's sensors in the kernel's hardware monitoring (hwmon): where its temperatures are read and the limits
the kernel reports for them.

The nvme driver registers a hwmon device under the controller (``/sys/block/nvme0n1/device/hwmonN``);
``drivetemp`` one under a SATA disk (``/sys/block/sda/device/hwmon/hwmonN``). ``temp1`` is the drive's own
temperature (NVMe's composite temperature, drivetemp's one sensor); the nvme driver adds ``temp2``-``temp9``
for the drive's temperature sensors 1-8 that it reports. Beside each ``tempN_input`` (millidegrees Celsius)
the kernel may give limits (Documentation/hwmon/sysfs-interface: ``tempN_max``, ``tempN_crit``):

* nvme: ``temp1_max`` is the composite's over-temperature threshold (the Temperature Threshold feature,
  settable; above it the drive raises its temperature warning), ``temp1_crit`` the controller's critical
  composite temperature (CCTEMP); a sensor's ``tempN_max`` its own threshold;
* drivetemp: ``temp1_max`` the drive's maximum recommended operating temperature, ``temp1_crit`` its maximum
  temperature limit (from the drive's SCT status or statistics).

:func:`sensors` lists them; :func:`limits` gives the limits as records for the manifest's drive record.
Only files are read: nothing runs.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

SYS_BLOCK = Path("/sys/block")
#: the drive's own temperature (NVMe: the composite temperature; SATA: its one sensor)
COMPOSITE = "composite"
#: hwmon's limit files, by the name iolab records them under
LIMIT_FILES = {"warning": "max", "critical": "crit"}


@dataclasses.dataclass(frozen=True)
class Sensor:
    """One temperature sensor of a disk: its name (:data:`COMPOSITE` or ``sensor N``), its ``tempN_input``,
    and the limits the kernel reports for it in degrees C (None: no such file, or unreadable)."""

    name: str
    index: int
    input: Path
    warning_c: float | None = None
    critical_c: float | None = None


def sensor_name(label: str | None, index: int) -> str:
    """A sensor's name: temp1 is the drive's own temperature (the nvme driver's composite, drivetemp's one
    sensor), the others by hwmon's ``tempN_label`` ("Sensor 2" -> ``sensor 2``), else ``tempN``."""
    if index == 1:
        return COMPOSITE
    return label.strip().lower() if label else f"temp{index}"


def text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def millidegrees(path: Path) -> float | None:
    """A hwmon temperature file in degrees C (None when it cannot be read: the sensor may not answer)."""
    try:
        return int(path.read_text().strip()) / 1000.0
    except (OSError, ValueError):
        return None


def sensors(disk: str, sys_block: Path = SYS_BLOCK) -> list[Sensor]:
    """The temperature sensors of ``disk`` (its controller's, for NVMe), the composite first; [] without hwmon."""
    base = Path(sys_block) / disk / "device"
    for hwmon in sorted(base.glob("hwmon*")) + sorted(base.glob("hwmon/hwmon*")):
        inputs = sorted((int(m.group(1)), path) for path in hwmon.glob("temp*_input")
                        if (m := re.fullmatch(r"temp(\d+)_input", path.name)))
        if inputs and inputs[0][0] == 1:
            return [Sensor(sensor_name(text(hwmon / f"temp{index}_label"), index), index, path,
                           warning_c=millidegrees(hwmon / f"temp{index}_max"),
                           critical_c=millidegrees(hwmon / f"temp{index}_crit")) for index, path in inputs]
    return []


def limits(disk: str, sys_block: Path = SYS_BLOCK) -> list[dict]:
    """The limits hwmon reports for ``disk``'s sensors, one record each: ``{"sensor", "limit"`` (``warning`` or
    ``critical``), ``"celsius", "source"`` (the file, e.g. ``hwmon temp1_max``)``}``; [] without any."""
    return [{"sensor": sensor.name, "limit": limit, "celsius": value,
             "source": f"hwmon temp{sensor.index}_{LIMIT_FILES[limit]}"}
            for sensor in sensors(disk, sys_block)
            for limit, value in (("warning", sensor.warning_c), ("critical", sensor.critical_c)) if value is not None]
