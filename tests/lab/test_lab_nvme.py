"""A real NVMe driver, smartctl and nvme-cli against qemu's emulated NVMe drive (the lab VM).

The tier attaches one drive (``iolab lab --nvme 256M``: serial ``iolab-nvme1``,
model "QEMU NVMe Ctrl", composite temperature 50 C, warning threshold 70 C).
Identity and health come from sysfs, smartctl and nvme; a run on the drive records
its health before and after (the data written grows by what fio wrote) and the
temperature each second, and the report's drive sections read them (environment rows, health table,
temperature chart with the stored warning temperature); lowering the drive's over-temperature threshold below
50 C (hwmon's temp1_max is the NVMe Temperature Threshold feature) makes the drive
raise its temperature warning, and the test run under it is flagged ``thermal``.
"""
import csv
import json
from pathlib import Path

import pytest

from iolab.devices import health, thermal
from iolab.engine import store
from iolab.report import drivehealth_table, driveidentity, temperature_chart

import lab_drives

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

SERIAL = "iolab-nvme1"


@pytest.fixture(scope="module")
def nvme_disk() -> str:
    """The namespace of the tier's NVMe drive (``nvme0n1``), found by its serial."""
    return lab_drives.wait_for_disk("nvme", "nvme*n1", lambda b: lab_drives.sysfs(b / "device" / "serial") == SERIAL,
                                    f"NVMe drive with serial {SERIAL}")


def test_identity_and_health_of_the_nvme_drive(nvme_disk):
    ident = health.identity(nvme_disk, keep_serials=True)
    assert ident["sources"] == {"smartctl": "ok", "nvme": "ok"}, ident["sources"]
    assert (ident["model"], ident["serial"], ident["transport"]) == ("QEMU NVMe Ctrl", SERIAL, "nvme")
    assert ident["firmware"] and ident["capacity_bytes"] == 256 * 2**20 and ident["rotational"] is False
    assert (ident["logical_block_size"], ident["physical_block_size"]) == (512, 512)
    assert ident["nvme_namespace"]["lba_format"] == 0 and ident["nvme_namespace"]["data_bytes"] == 512
    port = ident["link"]["pcie"]
    assert port["controller"] == "NVMe controller" and port["driver"] == "nvme"  # the drive's own port
    # behind the tier's root port (iolab lab: x-speed=8, x-width=4): the link the kernel trained with qemu's NVMe
    # device, which offers 2.5 GT/s x1, and the slot's Gen3 x4 above it, as sysfs says them
    own = Path(f"/sys/bus/pci/devices/{port['address']}")
    assert (port["speed"], port["width"]) == (lab_drives.sysfs(own / "current_link_speed"), int(lab_drives.sysfs(own / "current_link_width")))
    assert (port["generation"], port["width"]) == (1, 1), port
    assert port["slot"] == {"address": own.resolve().parent.name, "max_speed": "8.0 GT/s PCIe", "max_width": 4,
                            "generation": 3}, port
    # the temperature limits each source states: hwmon's in millidegrees from the drive's Kelvin (343 K: 69.85 C),
    # nvme-cli's id-ctrl by 273 (70 C); smartctl from 7.4 on says WCTEMP/CCTEMP too, as 70 and 100
    limits = {(r["source"], r["limit"]): r["celsius"] for r in ident["temperature_limits"]}
    assert {k: v for k, v in limits.items() if not k[0].startswith("smartctl")} == {
        ("hwmon temp1_max", "warning"): 69.85, ("hwmon temp1_crit", "critical"): 99.85,
        ("nvme id-ctrl wctemp", "warning"): 70.0, ("nvme id-ctrl cctemp", "critical"): 100.0}, limits
    assert {v for k, v in limits.items() if k[0].startswith("smartctl")} <= {70, 100}
    assert {r["sensor"] for r in ident["temperature_limits"]} == {"composite"}
    assert health.identity(nvme_disk)["serial"] == health.hidden_serial(SERIAL)
    snap = health.snapshot(nvme_disk)
    assert snap["temperature_c"] == 50 and (snap["warning_temp_c"], snap["critical_temp_c"]) == (70, 100)
    assert snap["percentage_used"] == 0 and snap["media_errors"] == 0 and snap["critical_warning"] == 0
    assert snap["data_written_bytes"] >= 0 and snap["power_on_hours"] >= 0
    found, missing = thermal.sources([nvme_disk])
    assert missing == {} and [s.how for s in found] == ["hwmon"] and 45 <= found[0].read() <= 55


def _hwmon_max(disk: str) -> Path:
    return next((Path("/sys/block") / disk / "device").glob("hwmon*/temp1_max"))


def _run(tmp_path: Path, device: str, name: str):
    return lab_drives.run_write(tmp_path, device, f"nvme-{name}", 32)


def _report_of_the_live_run(result, written: int) -> None:
    """The compare report's drive sections from the run just made, as `iolab report --notebook compare` builds them
    (the sections' own functions; the page itself is rendered by papermill from stored runs in
    tests/report/test_drive_health_page.py, not here under TCG): the environment rows, the health table with what
    the drive counted as written, the temperature chart with the stored warning temperature and its caption."""
    manifest = {**store.read_manifest(result.path), "run_dir": str(result.path)}
    fields = driveidentity.identity_fields(manifest)
    assert fields["firmware"] and fields["capacity"] and fields["link"] and fields["not_read"] is None, fields
    assert fields["temperature_limits"] == "warning 70 °C, critical 100 °C", fields  # nvme-cli's WCTEMP / CCTEMP
    table = drivehealth_table.health_table([manifest], names=["qemu-nvme"])
    numbers = table.data.xs("qemu-nvme", level=1)
    assert numbers.loc["Data written"].iloc[2] == written and numbers.loc["Media errors"].iloc[2] == 0
    section = temperature_chart.temperature_section([manifest], store.load(result.path), names=["qemu-nvme"])
    (figure,) = section.figures
    dashed = [line for line in figure.axes[0].lines if line.get_linestyle() == "--"]
    assert [set(line.get_ydata()) for line in dashed] == [{70.0}]  # nvme-cli's WCTEMP, stored in the drive record
    assert "critical temperature: 100 °C" in figure.caption and "No test was flagged thermal" in figure.caption
    print(f"report of the live run: {figure.caption}")


def test_a_run_records_health_before_and_after_and_the_temperature(nvme_disk, tmp_path):
    device = f"/dev/{nvme_disk}"
    result = _run(tmp_path, device, "cool")
    target = result.manifest["targets"][0]
    assert target["drives"][0]["model"] == "QEMU NVMe Ctrl" and target["drives"][0]["serial"].startswith("sha256:")
    assert target["temperature_sources"] == {device: "hwmon"}
    before, after = target["health_before"][0], target["health_after"][0]
    written = after["data_written_bytes"] - before["data_written_bytes"]
    print(f"health: {json.dumps(before)} -> {json.dumps(after)}")
    row = result.results.iloc[0]
    fio_wrote = int(result.results["io_bytes"].sum())
    assert fio_wrote <= written <= fio_wrote + 2 * 512_000, (written, fio_wrote)  # in 512,000-byte units
    assert 45 <= row["temp_max_c"] <= 55 and "thermal" not in str(row["flags"])
    files = sorted((result.path / "raw").glob("*.temp.csv"))
    assert [f.name.endswith("-1.temp.csv") for f in files] == [True], files  # raw/<test>-<rep>.temp.csv
    series = list(csv.DictReader(files[0].open()))
    assert len(series) >= 2 and {r["device"] for r in series} == {device}
    _report_of_the_live_run(result, written)

    threshold = _hwmon_max(nvme_disk)
    kept = threshold.read_text().strip()
    threshold.write_text("40000\n")  # the drive's over-temperature threshold below its 50 C
    try:
        hot = _run(tmp_path, device, "hot")
    finally:
        threshold.write_text(kept + "\n")
    row = hot.results.iloc[0]
    assert "thermal" in str(row["flags"]).split(";"), row["flags"]
    assert hot.manifest["status"] == "completed"
    assert health.snapshot(nvme_disk)["critical_warning"] == 0  # the warning ends with the threshold restored
