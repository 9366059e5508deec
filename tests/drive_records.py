"""A drive's records as a run writes them, from real captures, for report tests that need no device.

The captures are the lab VM's qemu NVMe drive (tests/fixtures/health: ``smartctl -x --json=c`` before and after
64 MiB were written, ``nvme id-ctrl/id-ns/smart-log -o json``), read by iolab's own parsers
(:mod:`iolab.devices.smart`, :func:`iolab.devices.health.snapshot`); the PCIe link is what
:func:`iolab.devices.health.link` reads from a sysfs tree laid out as the kernel lays out an NVMe drive in a
PCIe 3.0 x4 slot. :func:`nvme_run` puts them into a copy of a stored real run (tests/fixtures/flash) in place of
its loop device's records, as ``targets[].drives``, ``health_before`` and ``health_after``;
:func:`write_series` writes a temperature series in the sampler's format, and the test's maximum and
``thermal`` flag as the engine's device watch sets them (:func:`iolab.devices.thermal.verdict`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from iolab.devices import health, smart, thermal
from iolab.engine import devicewatch

TESTS = Path(__file__).resolve().parent
HEALTH = TESTS / "fixtures" / "health"
FLASH = TESTS / "fixtures" / "flash"
SERIAL = "IOLABSERIAL42"  # the serial qemu was started with (tests/fixtures/health)
#: the stored consumer-ssd sustained-write run the qemu NVMe's records are given to, and the sata-ssd's as it is
STORED = FLASH / "consumer-ssd" / "20261127T005944Z-sustained-write-2c3c"
LOOP = FLASH / "sata-ssd" / "20261127T010010Z-sustained-write-c366"
#: one sample a second: the sustained write heats the drive 3 °C a second from 50 °C (its sensor 1 runs 8 °C hotter)
SUSTAINED = [{"composite": 50 + 3 * s, "sensor 1": 58 + 3 * s} for s in range(9)]


def capture(name: str) -> dict:
    return json.loads((HEALTH / name).read_text())


def nvme_readings(smartctl: str = "smartctl-x-qemu-nvme.json") -> list[smart.Reading]:
    """What smartctl and nvme-cli said of the qemu drive (nvme-cli: its namespace and temperature thresholds)."""
    namespace = smart.namespace_format(capture("nvme-id-ns-qemu.json"))
    nvme = smart.Reading("nvme", "/dev/nvme0", identity={"nvme_namespace": namespace},
                         health={**smart.nvme_log_health(capture("nvme-smart-log-qemu.json")),
                                 **smart.nvme_thresholds(capture("nvme-id-ctrl-qemu.json"))})
    return [smart.from_smartctl(capture(smartctl), "/dev/nvme0"), nvme]


def pcie_link(sys: Path, monkeypatch) -> dict:
    """health.link of nvme0n1 on a sysfs tree: the drive's own PCIe function (class NVMe, driver nvme) at 8 GT/s x4."""
    function = sys / "devices" / "pci0000:00" / "0000:00:1d.0" / "0000:3d:00.0"
    block = function / "nvme" / "nvme0" / "nvme0n1"
    block.mkdir(parents=True)
    for name, value in (("class", "0x010802"), ("vendor", "0x1b36"), ("current_link_speed", "8.0 GT/s PCIe"),
                        ("current_link_width", "4"), ("max_link_speed", "8.0 GT/s PCIe"), ("max_link_width", "4")):
        (function / name).write_text(value + "\n")
    (sys / "bus" / "pci" / "drivers" / "nvme").mkdir(parents=True)
    (function / "driver").symlink_to(sys / "bus" / "pci" / "drivers" / "nvme")
    (sys / "block").mkdir()
    (sys / "block" / "nvme0n1").symlink_to(block)
    (block / "device").symlink_to(block.parent)  # a namespace's device/ is its controller, which holds the hwmon
    monkeypatch.setattr(health, "SYS_BLOCK", sys / "block")
    return health.link("nvme0n1")


def kelvin_millidegrees(kelvin: int) -> int:
    """The nvme driver's hwmon value of a temperature the drive states in Kelvin (kelvin_to_millicelsius)."""
    return kelvin * 1000 - 273150


def nvme_hwmon(sys: Path) -> Path:
    """The nvme driver's hwmon directory of the qemu drive on ``sys`` (after :func:`pcie_link`): temp1 the composite
    at the smart-log's 50 °C, temp1_max the Temperature Threshold feature (qemu's default: its WCTEMP), temp1_crit its
    CCTEMP, each converted as the driver converts the capture's Kelvin."""
    ctrl, log = capture("nvme-id-ctrl-qemu.json"), capture("nvme-smart-log-qemu.json")
    hwmon = sys / "block" / "nvme0n1" / "device" / "hwmon2"
    hwmon.mkdir()
    for name, kelvin in (("temp1_input", log["temperature"]), ("temp1_max", ctrl["wctemp"]),
                         ("temp1_crit", ctrl["cctemp"])):
        (hwmon / name).write_text(f"{kelvin_millidegrees(int(kelvin))}\n")
    (hwmon / "name").write_text("nvme\n")
    (hwmon / "temp1_label").write_text("Composite\n")
    return hwmon


def nvme_limits(sys: Path) -> list[dict]:
    """The drive record's ``temperature_limits`` of the qemu drive: hwmon's (:func:`nvme_hwmon`) and nvme-cli's."""
    return health.temperature_limits("nvme0n1", nvme_readings(), sys_block=sys / "block")


def nvme_identity(link: dict, limits: list | None = None) -> dict:
    """The drive's identity as health.identity records it: sysfs's fields, completed by the tools' answers, and the
    temperature limits (:func:`nvme_limits`) where given."""
    namespace = smart.namespace_format(capture("nvme-id-ns-qemu.json"))
    info = {"device": "/dev/nvme0n1", "transport": "nvme", "capacity_bytes": namespace["size_blocks"] * 512,
            "logical_block_size": 512, "physical_block_size": 512, "rotational": False, "link": link}
    if limits:
        info["temperature_limits"] = limits
    return _merged(info, nvme_readings())


def _merged(info: dict, readings: list) -> dict:
    for reading in readings:  # as health.identity: sysfs first, each tool completing what it left empty
        for key, value in reading.identity.items():
            if info.get(key) in (None, "", {}):
                info[key] = value
    info["sources"] = {r.tool: "ok" if r.ok else r.reason for r in readings}
    info["serial"] = health.hidden_serial(info.get("serial"))
    return info


def nvme_run(stored: Path, into: Path, link: dict, *, label: str = "qemu-nvme", limits: list | None = None) -> Path:
    """A copy of the stored run ``stored`` whose target's drive records are the qemu NVMe drive's (with ``limits``,
    its stored temperature limits; without, as a run recorded before they were)."""
    run = into / label / stored.name
    shutil.copytree(stored, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["label"] = label
    target = manifest["targets"][0]
    target["drives"] = [nvme_identity(link, limits)]
    target["health_before"] = [health.snapshot("nvme0n1", readings=nvme_readings())]
    target["health_after"] = [health.snapshot("nvme0n1", readings=nvme_readings("smartctl-a-qemu-nvme-after-64MiB.json"))]
    target["temperature_sources"] = {"/dev/nvme0n1": "hwmon"}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=1))
    results = pd.read_csv(run / "results.csv")
    results["label"] = label
    results.to_csv(run / "results.csv", index=False)
    return run


def write_series(run: Path, test: str, temperatures: list[dict], *, started: str) -> str | None:
    """The series of ``test`` (rep 1) in ``run``'s raw/ as the sampler writes it (:data:`thermal.Sampler.COLUMNS`):
    one sample a second from ``started`` (UTC), each a dict of ``temperatures`` ({sensor: degrees}); the test's
    maximum and the ``thermal`` flag in its rows as the engine's device watch writes them, from
    :func:`thermal.verdict` against the warning temperature in the run's health snapshot before. Returns the verdict."""
    raw = run / "raw"
    raw.mkdir(exist_ok=True)
    manifest = json.loads((run / "manifest.json").read_text())
    before = {s["device"]: s for s in manifest["targets"][0].get("health_before") or []}
    sampler = thermal.Sampler([thermal.Source("/dev/nvme0n1", "hwmon", lambda: None, sensor=sensor)
                               for sensor in temperatures[0]], raw / f"{test}-1.temp.csv")
    start = pd.Timestamp(started, tz="UTC")
    sampler.samples = [(float(second), (start + pd.Timedelta(seconds=second)).isoformat(timespec="milliseconds"),
                        "/dev/nvme0n1", sensor, float(degrees))
                       for second, sample in enumerate(temperatures) for sensor, degrees in sample.items()]
    pd.DataFrame(sampler.samples, columns=list(thermal.Sampler.COLUMNS)).to_csv(sampler.csv_path, index=False)
    verdict = thermal.verdict(sampler, before, {})
    results = pd.read_csv(run / "results.csv")
    mine = results["test"].eq(test)
    annotated = devicewatch.TestTemperature(sampler.maximum, verdict).annotate(results[mine])
    for column in ("temp_max_c", "flags"):
        results[column] = results[column].astype(object)
        results.loc[mine, column] = annotated[column]
    results.to_csv(run / "results.csv", index=False)
    return verdict


def hot_nvme_run(root: Path) -> tuple[Path, str | None]:
    """A copy of :data:`STORED` under ``root`` with the qemu NVMe's drive records (its PCIe link and hwmon limits
    laid out under ``root/sys``) and the :data:`SUSTAINED` temperature series: (the run, the sustained test's
    thermal verdict as :func:`write_series` gives it)."""
    import pytest

    with pytest.MonkeyPatch.context() as monkeypatch:
        link = pcie_link(root / "sys", monkeypatch)
    nvme_hwmon(root / "sys")
    run = nvme_run(STORED, root / "runs", link, limits=nvme_limits(root / "sys"))
    return run, write_series(run, "sustained", SUSTAINED, started="2026-11-27T00:59:50")
