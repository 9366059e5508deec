"""A drive's identity, health and temperature (issue 25, items 1 and 2).

The parsers read real output captured in the lab VM from qemu's emulated NVMe
drive (tests/fixtures/health: ``smartctl -x --json=c``, ``nvme smart-log/id-ctrl/id-ns
-o json``, and smartctl after 64 MiB were written with dd). This host has no SMART
device at all: real smartctl on a real loop device proves that a device no tool can
read is said so ("not a SMART device: ..."), never filled in. tests/lab/test_lab_nvme.py
runs the same collection against the NVMe drive itself.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from device_fixtures import make_loop, requires, requires_root, scratch  # noqa: F401
import drive_records
from iolab.devices import health, hwmon, smart, thermal
from iolab.engine import devicewatch, runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_smartctl_reads_the_qemu_nvme_drives_identity_and_health():
    reading = smart.from_smartctl(fixture("smartctl-x-qemu-nvme.json"), "/dev/nvme0")
    assert reading.ok
    assert reading.identity == {"protocol": "NVMe", "type": "nvme", "model": "QEMU NVMe Ctrl",
                                "firmware": "7.2.22", "serial": "IOLABSERIAL42", "interface": "1.4"}
    assert reading.health["temperature_c"] == 50
    assert reading.health["percentage_used"] == 0 and reading.health["media_errors"] == 0
    assert reading.health["data_written_bytes"] == 0 and reading.health["data_read_bytes"] == 3 * 512_000
    assert reading.health["power_on_hours"] == 0 and reading.health["critical_warning"] == 0
    assert reading.health["warning_temp_minutes"] == 0 and reading.health["smart_passed"] is True


def _ata_document(attributes: dict | None = None) -> dict:
    """smartctl -x --json=c of a SATA SSD, written by hand in smartctl's JSON format (this machine has no SATA
    drive to capture one from): its attribute table (raw values packed as the drive does: 194's low byte the
    current temperature, higher bytes its minimum and maximum), device statistics and SCT temperature limits."""
    table = {5: 2, 9: 4321, 187: 1, 190: 35 | 30 << 16 | 48 << 24, 194: 36 | 20 << 16 | 65 << 32, 199: 7, 241: 123456}
    table.update(attributes or {})
    return {
        "smartctl": {"exit_status": 0}, "device": {"name": "/dev/sda", "type": "sat", "protocol": "ATA"},
        "model_name": "Example SSD 1TB", "serial_number": "EX123", "firmware_version": "FW01",
        "user_capacity": {"blocks": 1953525168, "bytes": 1000204886016},
        "logical_block_size": 512, "physical_block_size": 4096, "rotation_rate": 0,
        "form_factor": {"ata_value": 3, "name": "2.5 inches"}, "sata_version": {"string": "SATA 3.3", "value": 511},
        "interface_speed": {"max": {"sata_value": 14, "string": "6.0 Gb/s"},
                            "current": {"sata_value": 2, "string": "3.0 Gb/s"}},
        "smart_status": {"passed": True}, "power_on_time": {"hours": 4321},
        "temperature": {"current": 36, "lifetime_max": 65, "op_limit_max": 70, "limit_max": 75},
        "ata_smart_attributes": {"revision": 1, "table": [
            {"id": key, "raw": {"value": value}} for key, value in table.items() if value is not None]},
        "ata_device_statistics": {"pages": [
            {"number": 1, "name": "General Statistics", "table": [{"name": "Logical Sectors Written", "value": 2_000_000}]},
            {"number": 7, "name": "Solid State Device Statistics",
             "table": [{"name": "Percentage Used Endurance Indicator", "value": 3}]}]},
    }


def test_a_sata_drives_identity_link_and_health():
    reading = smart.from_smartctl(_ata_document(), "/dev/sda")
    assert reading.ok
    assert reading.identity == {"protocol": "ATA", "type": "sat", "model": "Example SSD 1TB", "firmware": "FW01",
                                "serial": "EX123", "capacity_bytes": 1000204886016, "logical_block_size": 512,
                                "physical_block_size": 4096, "rotation_rate_rpm": 0, "form_factor": "2.5 inches",
                                "interface": "SATA 3.3", "sata_link": {"current": "3.0 Gb/s", "max": "6.0 Gb/s"}}
    assert reading.health == {"temperature_c": 36, "power_on_hours": 4321, "smart_passed": True, "crc_errors": 7,
                              "media_errors": 3, "attribute_241_raw": 123456, "percentage_used": 3,
                              "data_written_bytes": 2_000_000 * 512, "warning_temp_c": 70, "critical_temp_c": 75}
    # attribute 194 first; a drive with only 190 (Airflow_Temperature_Cel) gives that one's low byte
    assert smart.from_smartctl(_ata_document({194: None}), "/dev/sda").health["temperature_c"] == 35


def test_nvme_data_units_count_what_was_written():
    """64 MiB written by dd: the drive counts it in units of 512,000 bytes, rounded up."""
    written = smart.from_smartctl(fixture("smartctl-a-qemu-nvme-after-64MiB.json"), "/dev/nvme0").health
    assert 64 * 2**20 <= written["data_written_bytes"] < 64 * 2**20 + smart.NVME_DATA_UNIT
    assert written["host_write_commands"] == 128


def test_nvme_cli_smart_log_kelvin_and_string_counters():
    health_ = smart.nvme_log_health(fixture("nvme-smart-log-qemu.json"))
    assert health_["temperature_c"] == 50  # 323 K
    assert health_["host_write_commands"] == 0 and health_["data_read_bytes"] == 3 * 512_000  # "3" as a string
    assert health_["thermal_transitions"] == 0 and health_["available_spare_pct"] == 0
    assert smart.nvme_thresholds(fixture("nvme-id-ctrl-qemu.json")) == {"warning_temp_c": 70, "critical_temp_c": 100}


def test_nvme_namespace_format():
    ns = smart.namespace_format(fixture("nvme-id-ns-qemu.json"))
    assert (ns["lba_format"], ns["data_bytes"], ns["metadata_bytes"], ns["size_blocks"]) == (0, 512, 0, 524288)
    assert len(ns["formats"]) == 8 and ns["formats"][1] == {"index": 1, "data_bytes": 512, "metadata_bytes": 8,
                                                            "relative_performance": 0}
    assert {f["data_bytes"] for f in ns["formats"]} == {512, 4096}


@pytest.mark.parametrize("name, device", [("smartctl-x-loop.json", "/dev/loop2"),
                                          ("smartctl-a-virtio.json", "/dev/vda")])
def test_a_device_smartctl_cannot_identify_is_said(name, device):
    reading = smart.from_smartctl(fixture(name), device)
    assert not reading.ok and reading.identity == {} and reading.health == {}
    assert reading.reason == f"not a SMART device: {device}: Unable to detect device type"


def test_no_permission_is_said_as_such():
    """smartctl's own document when run as a normal user (exit bit 1: the device could not be opened)."""
    doc = {"smartctl": {"exit_status": 2, "messages": [
        {"string": "Smartctl open device: /dev/nvme0 failed: Permission denied", "severity": "error"}]}}
    reading = smart.from_smartctl(doc, "/dev/nvme0")
    assert not reading.ok and reading.health == {}
    assert reading.reason == ("no permission to read SMART data (root needed): "
                              "Smartctl open device: /dev/nvme0 failed: Permission denied")
    # the higher bits report what the drive said (errors in its logs): the reading stands
    logged = {**fixture("smartctl-x-qemu-nvme.json")}
    logged["smartctl"] = {**logged["smartctl"], "exit_status": 64}
    assert smart.from_smartctl(logged, "/dev/nvme0").ok


def test_a_missing_tool_is_said():
    doc, why = smart.run_json(["iolab-no-such-smartctl", "-x", "/dev/null"])
    assert doc is None and why == "iolab-no-such-smartctl not installed"


def test_serials_are_hashed_everywhere_unless_kept():
    entry = {"device": {"serial": "S3EVNX0K123", "raid": {"members": [{"serial": "WD-1"}]}}, "drives": []}
    hidden = health.hide_serials(entry)
    assert hidden["device"]["serial"] == health.hidden_serial("S3EVNX0K123") != "S3EVNX0K123"
    assert hidden["device"]["serial"].startswith("sha256:") and len(hidden["device"]["serial"]) == 23
    assert hidden["device"]["raid"]["members"][0]["serial"] == health.hidden_serial("WD-1")
    assert health.hide_serials(hidden) == hidden  # hashed once, not twice
    assert health.hide_serials(entry, keep=True) is entry


def test_pcie_generation_from_the_link_speed():
    assert health._generation("8.0 GT/s PCIe") == 3 and health._generation("16.0 GT/s PCIe") == 4
    assert health._generation("Unknown") is None and health._generation(None) is None


def _pci_function(sys: Path, path: str, pci_class: str, driver: str, link: tuple | None = None) -> Path:
    """A PCI function directory as sysfs has it: class, vendor, the driver link and, on PCIe, its link."""
    function = sys / "devices" / path
    function.mkdir(parents=True)
    (function / "class").write_text(pci_class + "\n")
    (function / "vendor").write_text("0x1000\n")
    drivers = sys / "bus" / "pci" / "drivers" / driver
    drivers.mkdir(parents=True)
    (function / "driver").symlink_to(drivers)
    if link:
        for name, value in zip(("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"), link):
            (function / name).write_text(value + "\n")
    return function


def _disk(sys: Path, function: Path, below: str, disk: str) -> None:
    block = function / below / "block" / disk
    block.mkdir(parents=True)
    (sys / "block").mkdir(exist_ok=True)
    (sys / "block" / disk).symlink_to(block)


def test_the_controller_behind_a_sata_disk_and_a_raid_cards_disk(tmp_path, monkeypatch):
    """The controller nearest a disk, from sysfs laid out as the kernel does: a SATA disk on the chipset's
    AHCI controller (its link's negotiated speed from /sys/class/ata_link) and a disk behind a MegaRAID card
    in a PCIe 3.0 x8 slot (the card's link; the disks' own are hidden behind it)."""
    sys = tmp_path / "sys"
    ahci = _pci_function(sys, "pci0000:00/0000:00:1f.2", "0x010601", "ahci")
    _disk(sys, ahci, "ata3/host2/target2:0:0/2:0:0:0", "sda")
    (sys / "class" / "ata_link" / "link3").mkdir(parents=True)
    (sys / "class" / "ata_link" / "link3" / "sata_spd").write_text("6.0 Gbps\n")
    raid = _pci_function(sys, "pci0000:00/0000:00:01.0/0000:03:00.0", "0x010400", "megaraid_sas",
                         ("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "8"))
    _disk(sys, raid, "host0/target0:2:0/0:2:0:0", "sdb")
    monkeypatch.setattr(health, "SYS_BLOCK", sys / "block")
    monkeypatch.setattr(health, "SYS_ATA_LINK", sys / "class" / "ata_link")
    assert (health.transport("sda"), health.transport("sdb")) == ("sata", "scsi")
    sata = health.link("sda")
    assert sata["sata_speed"] == "6.0 Gbps"
    assert sata["pcie"] == {"address": "0000:00:1f.2", "driver": "ahci", "controller": "SATA AHCI controller",
                            "speed": None, "width": None, "max_speed": None, "max_width": None, "generation": None,
                            "note": "the port reports no PCIe link (a conventional PCI bus, e.g. a virtual machine's)"}
    card = health.link("sdb")
    assert "sata_speed" not in card
    assert card["pcie"] == {"address": "0000:03:00.0", "driver": "megaraid_sas", "controller": "RAID controller",
                            "speed": "8.0 GT/s PCIe", "width": 8, "max_speed": "8.0 GT/s PCIe", "max_width": "8",
                            "generation": 3}


def test_every_transport_is_either_a_drive_or_the_kernels_own():
    """The names transport() gives are the ones the report sorts into drives (firmware, link, health counters to
    ask for) and the kernel's own devices (no drive: nothing to read): one vocabulary, each name in one set."""
    from iolab.analysis.drivehealth import HARDWARE_TRANSPORTS, VIRTUAL_TRANSPORTS
    assert not HARDWARE_TRANSPORTS & VIRTUAL_TRANSPORTS
    given = {name for name, _ in health.SYSFS_TRANSPORTS} | {"nvme", "scsi", "virtual", "unknown"}
    assert given == HARDWARE_TRANSPORTS | VIRTUAL_TRANSPORTS
    for disk in sorted(p.name for p in health.SYS_BLOCK.iterdir()):  # this machine's own (loop, ram, sda...)
        assert health.transport(disk) in given, disk


@requires_root
@requires("smartctl")
def test_a_loop_device_is_described_without_guessing(make_loop):  # noqa: F811
    loop = make_loop("16M")
    disk = Path(loop).name
    assert health.disks_of(loop) == [disk]
    ident = health.identity(disk)
    assert ident["transport"] == "loop" and ident["model"] == "loop device"
    assert ident["capacity_bytes"] == 16 * 2**20 and ident["logical_block_size"] == 512
    assert ident["sources"] == {"smartctl": f"not a SMART device: {loop}: Unable to detect device type"}
    assert "firmware" not in ident and "serial" not in ident
    snap = health.snapshot(disk)
    assert set(snap) == {"device", "at", "sources"}, snap  # no temperature, no counters: none were read
    found, missing = thermal.sources([disk])
    assert found == [] and missing == {loop: "no temperature sensor (no hwmon sensor, smartctl reports none)"}


def _hwmon_like(path: Path, millidegrees: int) -> None:
    path.write_text(f"{millidegrees}\n")


def test_the_sampler_keeps_a_series_and_its_maximum(tmp_path):
    """First sample on entry, last on exit; the thread's own samples (every hour here) never come."""
    sensor = tmp_path / "temp1_input"
    _hwmon_like(sensor, 41000)
    source = thermal.Source("/dev/nvme9n1", "hwmon", lambda: hwmon.millidegrees(sensor), warning_c=70.0)
    series = tmp_path / "seq-read-1.temp.csv"
    with thermal.Sampler([source], series, interval=3600) as sampler:
        _hwmon_like(sensor, 72500)
    rows = list(csv.DictReader(series.open()))
    assert [(r["device"], float(r["temperature_c"])) for r in rows] == [("/dev/nvme9n1", 41.0), ("/dev/nvme9n1", 72.5)]
    assert sampler.maximum == 72.5
    assert thermal.verdict(sampler, {}, {}) == "/dev/nvme9n1 reached 72.5 C, at or above its warning threshold of 70 C"
    cooler = {"/dev/nvme9n1": {"warning_temp_c": 80}}  # the drive's own threshold wins over the sensor's
    assert thermal.verdict(sampler, cooler, {}) is None


def _sysfs_hwmon(sys_block: Path, disk: str, hwmon: str, sensors: dict, *, max_c=None) -> Path:
    """A sysfs-shaped hwmon directory as the kernel lays it out: ``{index: (label or None, degrees)}``."""
    directory = sys_block / disk / "device" / hwmon
    directory.mkdir(parents=True)
    for index, (label, degrees) in sensors.items():
        _hwmon_like(directory / f"temp{index}_input", int(degrees * 1000))
        if label:
            (directory / f"temp{index}_label").write_text(label + "\n")
    if max_c is not None:
        _hwmon_like(directory / "temp1_max", int(max_c * 1000))
    return directory


def test_every_nvme_sensor_is_sampled_and_the_composite_is_the_drives_temperature(tmp_path):
    """The nvme driver's hwmon: temp1 the composite (its temp1_max the warning threshold), temp2.. the drive's
    sensors 1-8 where it reports them. Each sensor is a column of the series; the row's maximum and the warning
    are the composite's, so a hotter controller sensor alone does not make the test thermal."""
    sys_block = tmp_path / "sys" / "block"
    hwmon = _sysfs_hwmon(sys_block, "nvme0n1", "hwmon2", {1: ("Composite", 48.85), 2: ("Sensor 1", 61.0),
                                                          3: ("Sensor 2", 44.0)}, max_c=70)
    # SATA with drivetemp: device/hwmon/hwmonN/temp1_input, no label
    _sysfs_hwmon(sys_block, "sda", "hwmon/hwmon5", {1: (None, 35.0)})
    (sys_block / "iolab-nodisk0" / "device").mkdir(parents=True)
    found, missing = thermal.sources(["nvme0n1", "sda"], sys_block=sys_block)
    assert missing == {}
    assert [(s.device, s.sensor, s.how, s.warning_c) for s in found] == [
        ("/dev/nvme0n1", "composite", "hwmon", 70.0), ("/dev/nvme0n1", "sensor 1", "hwmon", None),
        ("/dev/nvme0n1", "sensor 2", "hwmon", None), ("/dev/sda", "composite", "hwmon", None)]
    series = tmp_path / "w-1.temp.csv"
    with thermal.Sampler(found, series, interval=3600) as sampler:
        _hwmon_like(hwmon / "temp2_input", 82000)  # the controller's sensor heats up, the composite does not
    rows = list(csv.DictReader(series.open()))
    assert list(rows[0]) == ["elapsed_s", "utc", "device", "sensor", "temperature_c"]
    assert [(r["device"], r["sensor"], float(r["temperature_c"])) for r in rows] == [
        ("/dev/nvme0n1", "composite", 48.85), ("/dev/nvme0n1", "sensor 1", 61.0), ("/dev/nvme0n1", "sensor 2", 44.0),
        ("/dev/sda", "composite", 35.0),
        ("/dev/nvme0n1", "composite", 48.85), ("/dev/nvme0n1", "sensor 1", 82.0), ("/dev/nvme0n1", "sensor 2", 44.0),
        ("/dev/sda", "composite", 35.0)]
    assert sampler.maximum == 48.85 and sampler.maximum_of("/dev/nvme0n1", "sensor 1") == 82.0
    assert thermal.verdict(sampler, {}, {}) is None  # 82 C on sensor 1 is not the composite's 70 C warning
    _hwmon_like(hwmon / "temp1_input", 70500)
    with thermal.Sampler(found[:1], tmp_path / "w-2.temp.csv", interval=3600) as hot:
        pass
    assert thermal.verdict(hot, {}, {}) == (
        "/dev/nvme0n1 reached 70.5 C, at or above its warning threshold of 70 C")
    assert thermal.sources(["iolab-nodisk0"], sys_block=sys_block) == (  # no hwmon; smartctl has nothing either
        [], {"/dev/iolab-nodisk0": "no temperature sensor (no hwmon sensor, smartctl reports none)"})


def test_throttling_reported_by_the_drive_is_thermal(tmp_path):
    sampler = thermal.Sampler([], tmp_path / "x.temp.csv")
    with sampler:
        pass
    assert not (tmp_path / "x.temp.csv").exists()  # no source, no series
    before = {"/dev/nvme0": {"thermal_transitions": 0, "critical_warning": 0}}
    assert thermal.verdict(sampler, before, before) is None
    after = {"/dev/nvme0": {"thermal_transitions": 2, "critical_warning": 0}}
    assert "thermal throttling (thermal_transitions 0 -> 2)" in thermal.verdict(sampler, before, after)
    hot = {"/dev/nvme0": {"critical_warning": 0x02}}
    assert "temperature warning" in thermal.verdict(sampler, {}, hot)


def test_the_thermal_flag_joins_the_rows_flags():
    frame = pd.DataFrame({"flags": ["cache_suspect", None]})
    out = devicewatch.TestTemperature(maximum_c=71.0, thermal="hot").annotate(frame)
    assert list(out["flags"]) == ["cache_suspect;thermal", "thermal"] and list(out["temp_max_c"]) == [71.0, 71.0]
    cool = devicewatch.TestTemperature().annotate(frame)
    assert cool["temp_max_c"].isna().all() and cool["flags"][0] == "cache_suspect" and pd.isna(cool["flags"][1])


RECIPE = """
name: health-probe
description: one short read of a block device
isolation: none
defaults: {size: 4M, runtime: 1}
fio: {ioengine: psync, direct: 1}
tests:
  - name: READ
    rw: read
    bs: 1M
"""


@requires_root
@requires("smartctl", "fio", "bwrap")
def test_a_run_records_the_drive_and_its_health_said_not_guessed(make_loop, tmp_path):  # noqa: F811
    loop = make_loop("16M")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    result = runner.run(str(recipe), [loop], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    target = result.manifest["targets"][0]
    reason = f"not a SMART device: {loop}: Unable to detect device type"
    assert [d["device"] for d in target["drives"]] == [loop] and target["drives"][0]["sources"]["smartctl"] == reason
    assert [set(h) for h in target["health_before"]] == [{"device", "at", "sources"}]
    assert target["health_after"][0]["sources"] == {"smartctl": reason}
    assert target["temperature_sources"] == {loop: "no temperature sensor (no hwmon sensor, smartctl reports none)"}
    saved = json.loads((result.path / "manifest.json").read_text())
    assert saved["targets"][0]["health_after"] == target["health_after"]
    assert result.results["temp_max_c"].isna().all()
    assert not list((result.path / "raw").glob("*.temp.csv"))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_thermal_flag_has_its_sentence_and_readme_line(lang):
    from iolab.report import commentary, i18n
    assert i18n.has("flags.thermal", lang)
    summary = pd.DataFrame([{"system": "nvme", "test": "T", "direction": "write", "value": 1.0, "metric": "bw_mbps",
                             "unit": "MB/s", "cache_isolated": True, "n": 3, "ci_low": float("nan"),
                             "ci_high": float("nan"), "flags": "thermal", "cov": 0.0}])
    text = " ".join(commentary.caveat_sentences(commentary.caveats(summary), lang=lang))
    assert "(thermal" in text or "（thermal" in text
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "`thermal`" in readme.split("### Flags")[1].split("\n## ")[0]


@requires("fio", "bwrap")
def test_keep_serials_through_the_cli(tmp_path, capsys, caplog):
    """A directory target on this host's disk: its serial is hashed in every field, kept with --keep-serials."""
    from cli_helpers import cli_main
    disks = health.disks_of(tmp_path)
    serials = [s for s in (blockdev_serial(d) for d in disks) if s]
    if not serials:
        pytest.skip(f"the disk under {tmp_path} ({disks}) has no serial number in sysfs")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.replace("direct: 1", "direct: 0"))
    target = tmp_path / "target"
    target.mkdir()
    manifests = []
    for extra in ([], ["--keep-serials"]):
        code, out, err = cli_main(capsys, caplog, "run", recipe, "--target", target, "--data", tmp_path / "data",
                                  "--no-progress", "--size", "4M", *extra)
        assert code == 0, err
        manifests.append(json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text()))
    hidden, kept = (m["targets"][0] for m in manifests)
    assert hidden["drives"][0]["serial"] == health.hidden_serial(serials[0]) == hidden["device"]["serial"]
    assert serials[0] not in json.dumps(manifests[0])
    assert kept["drives"][0]["serial"] == serials[0] == kept["device"]["serial"]


def blockdev_serial(disk: str) -> str | None:
    from iolab.devices import blockdev
    return blockdev.serial(disk)


def test_keep_serials_is_refused_with_hosts(tmp_path, capsys, caplog):
    from cli_helpers import cli_main
    code, out, err = cli_main(capsys, caplog, "run", "quick", "--hosts", tmp_path / "inventory.yaml", "--keep-serials")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--keep-serials does not go with --hosts" in err, err


@requires_root
@requires("smartctl", "fio", "bwrap")
def test_health_after_is_recorded_when_a_test_fails(make_loop, tmp_path):  # noqa: F811
    loop = make_loop("16M")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.replace("    bs: 1M", "    bs: 1M\n    fio: {size: 4k}"))  # fio refuses: bs > size
    result = runner.run(str(recipe), [loop], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "failed"
    saved = json.loads((result.path / "manifest.json").read_text())["targets"][0]
    assert saved["health_after"][0]["device"] == loop and "health_before" in saved


def test_hwmon_limits_of_an_nvme_and_a_sata_drive(tmp_path):
    """tempN_max and tempN_crit as the kernel lays them out: the nvme driver's composite threshold and CCTEMP and a
    sensor's own threshold; drivetemp's SCT limits. Each is a record naming its file; a drive without any has none."""
    sys_block = tmp_path / "sys" / "block"
    nvme = _sysfs_hwmon(sys_block, "nvme0n1", "hwmon2", {1: ("Composite", 48.85), 2: ("Sensor 1", 61.0)})
    _hwmon_like(nvme / "temp1_max", 83850)
    _hwmon_like(nvme / "temp1_crit", 84850)
    _hwmon_like(nvme / "temp2_max", 90000)
    sata = _sysfs_hwmon(sys_block, "sda", "hwmon/hwmon5", {1: (None, 35.0)})
    _hwmon_like(sata / "temp1_max", 60000)
    _hwmon_like(sata / "temp1_crit", 70000)
    _sysfs_hwmon(sys_block, "sdb", "hwmon/hwmon6", {1: (None, 30.0)})
    assert hwmon.limits("nvme0n1", sys_block) == [
        {"sensor": "composite", "limit": "warning", "celsius": 83.85, "source": "hwmon temp1_max"},
        {"sensor": "composite", "limit": "critical", "celsius": 84.85, "source": "hwmon temp1_crit"},
        {"sensor": "sensor 1", "limit": "warning", "celsius": 90.0, "source": "hwmon temp2_max"}]
    assert [(r["limit"], r["celsius"]) for r in hwmon.limits("sda", sys_block)] == [("warning", 60.0), ("critical", 70.0)]
    assert hwmon.limits("sdb", sys_block) == [] and hwmon.limits("loop0", sys_block) == []
    found, _ = thermal.sources(["nvme0n1"], sys_block=sys_block)  # the sampler's warning: the composite's only
    assert [(s.sensor, s.warning_c) for s in found] == [("composite", 83.85), ("sensor 1", None)]


def test_the_drive_record_keeps_every_sources_temperature_limits(tmp_path, monkeypatch):
    """The qemu drive (tests/fixtures/health: nvme-cli's id-ctrl WCTEMP 343 K, CCTEMP 373 K; hwmon laid out as the
    nvme driver converts them): four records, each as its source says it (hwmon 69.85 °C, nvme-cli 70 °C)."""
    drive_records.pcie_link(tmp_path / "sys", monkeypatch)
    drive_records.nvme_hwmon(tmp_path / "sys")
    limits = drive_records.nvme_limits(tmp_path / "sys")
    assert [(r["source"], r["limit"], r["celsius"]) for r in limits] == [
        ("hwmon temp1_max", "warning", 69.85), ("hwmon temp1_crit", "critical", 99.85),
        ("nvme id-ctrl wctemp", "warning", 70.0), ("nvme id-ctrl cctemp", "critical", 100.0)]
    assert {r["sensor"] for r in limits} == {"composite"}
    # a tool that could not read the drive states none; nor does a reading without thresholds (a snapshot's)
    unread = [smart.Reading("smartctl", "/dev/nvme0", reason="smartctl not installed"),
              smart.Reading("nvme", "/dev/nvme0", health={"temperature_c": 50})]
    assert health.temperature_limits("nvme0n1", unread, sys_block=tmp_path / "nothing") == []


def test_smartctl_states_nvme_limits_from_version_7_4():
    """smartctl 7.3 (the capture) puts no NVMe thresholds in its JSON; 7.4 adds WCTEMP and CCTEMP as
    temperature.op_limit_max and critical_limit_max, an ATA drive's SCT limits are op_limit_max and limit_max."""
    doc = fixture("smartctl-x-qemu-nvme.json")
    assert "warning_temp_c" not in smart.from_smartctl(doc, "/dev/nvme0").health
    newer = {**doc, "temperature": {"current": 50, "op_limit_max": 70, "critical_limit_max": 100}}
    reading = smart.from_smartctl(newer, "/dev/nvme0")
    assert (reading.health["warning_temp_c"], reading.health["critical_temp_c"]) == (70, 100)
    assert [(r["source"], r["celsius"]) for r in health.temperature_limits("nvme0n1", [reading],
                                                                            sys_block=Path("/nonexistent"))] == [
        ("smartctl temperature.op_limit_max", 70.0), ("smartctl temperature.limit_max or critical_limit_max", 100.0)]
