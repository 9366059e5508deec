"""A real ATA drive behind the kernel's libata and AHCI driver: qemu's emulated SATA disk (the lab VM).

The tier attaches one (``iolab lab --sata 256M``: q35's built-in AHCI controller, port 0, serial
``iolab-sata1``, model ``iolab-sata-ssd``, rotation rate 1 = non-rotating). qemu's ATA disk answers
IDENTIFY and SMART; its SMART table has attribute 190 (Airflow_Temperature_Cel) at 31 C and no 194, and no
written-data counter. These tests read the drive as iolab reads any SATA drive: the identity from smartctl
and sysfs (the link the kernel trained, the AHCI controller behind it), a health snapshot, and a run on it
that samples the temperature each second from smartctl's attribute 190 and leaves what the drive does not
count empty, never guessed; with the kernel's ``drivetemp`` loaded, which declines this drive, still from smartctl.
"""
import csv
import os
import re
import subprocess
from pathlib import Path

import pytest

from iolab.devices import health, thermal
from iolab.engine import store
from iolab.lab.vm import SATA_MODEL
from iolab.report import driveidentity

import lab_drives

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]

SERIAL = "iolab-sata1"
TEMPERATURE_C = 31  # qemu's SMART attribute 190: raw 0x1f


@pytest.fixture(scope="module")
def sata_disk() -> str:
    """The tier's SATA disk (``sda`` or so), found by the model the tier gave it (sysfs, as the kernel read it)."""
    return lab_drives.wait_for_disk("ahci", "sd*", lambda b: lab_drives.sysfs(b / "device" / "model") == SATA_MODEL,
                                    f"SATA disk of model {SATA_MODEL}")


def test_identity_link_and_controller_of_the_sata_drive(sata_disk):
    ident = health.identity(sata_disk, keep_serials=True)
    print(f"sata identity: {ident}")
    assert ident["sources"]["smartctl"] == "ok", ident["sources"]
    # the drive's serial (libata's VPD page 0x80, smartctl's serial_number), not sysfs's T10 wwid, which holds it
    assert (ident["model"], ident["serial"], ident["transport"]) == (SATA_MODEL, SERIAL, "sata"), ident
    assert ident["firmware"] and ident["capacity_bytes"] == 256 * 2**20 and ident["rotational"] is False
    assert (ident["logical_block_size"], ident["physical_block_size"]) == (512, 512)
    link = ident["link"]
    kernel = Path(f"/sys/class/ata_link/link{_ata_port(sata_disk)}/sata_spd").read_text().strip()
    assert link["sata_speed"] == kernel  # the speed the kernel trained, as it says it
    assert link["pcie"]["controller"] == "SATA AHCI controller" and link["pcie"]["driver"] == "ahci", link
    assert health.identity(sata_disk)["serial"] == health.hidden_serial(SERIAL)


def _ata_port(disk: str) -> str:
    return re.search(r"/ata(\d+)/", os.path.realpath(f"/sys/block/{disk}")).group(1)


def test_health_of_the_sata_drive_reads_attribute_190(sata_disk):
    snap = health.snapshot(sata_disk)
    print(f"sata health: {snap}")
    assert snap["temperature_c"] == TEMPERATURE_C, snap
    assert snap.get("data_written_bytes") is None  # qemu's drive counts no written data: empty, not 0
    found, missing = thermal.sources([sata_disk])
    assert missing == {} and len(found) == 1 and found[0].read() == TEMPERATURE_C, (found, missing)


def test_a_run_on_the_sata_drive_samples_its_temperature(sata_disk, tmp_path):
    device = f"/dev/{sata_disk}"
    result = lab_drives.run_write(tmp_path, device, "sata-write", 16)
    target = result.manifest["targets"][0]
    drive = target["drives"][0]
    assert (drive["model"], drive["transport"]) == (SATA_MODEL, "sata") and drive["serial"].startswith("sha256:")
    assert target["temperature_sources"][device] in ("smartctl", "hwmon")
    before, after = target["health_before"][0], target["health_after"][0]
    assert before["temperature_c"] == after["temperature_c"] == TEMPERATURE_C
    row = result.results.iloc[0]
    assert row["temp_max_c"] == TEMPERATURE_C and "thermal" not in str(row["flags"])
    (series_file,) = sorted((result.path / "raw").glob("*.temp.csv"))
    series = list(csv.DictReader(series_file.open()))
    assert len(series) >= 2 and {r["device"] for r in series} == {device}
    assert {float(r["temperature_c"]) for r in series} == {TEMPERATURE_C}
    manifest = {**store.read_manifest(result.path), "run_dir": str(result.path)}
    fields = driveidentity.identity_fields(manifest)
    assert fields["link"] and fields["not_read"] is None, fields



@pytest.fixture
def drivetemp():
    """The kernel's ``drivetemp`` module loaded (it offers itself to every SCSI disk as it registers), and
    unloaded afterwards."""
    loaded = subprocess.run(["modprobe", "drivetemp"], capture_output=True, text=True)
    assert loaded.returncode == 0, f"modprobe drivetemp: {loaded.stderr.strip()}"
    try:
        yield Path("/sys/module/drivetemp")
    finally:
        subprocess.run(["rmmod", "drivetemp"], check=False)


def test_drivetemp_declines_the_drive_and_the_temperature_still_comes_from_smartctl(sata_disk, drivetemp, tmp_path):
    """drivetemp takes only drives that say they are SATA: the kernel's ata_id_is_sata wants IDENTIFY word 93 (the
    hardware reset result a parallel ATA drive reports) to be 0, and qemu's ATA disk sets it (0x6001). So the
    module, loaded, makes no sensor for this drive, and iolab reads its temperature from smartctl as before and
    says so: a sensor is used where the kernel made one, never assumed. (A drive drivetemp takes is read as
    nvme's is, from hwmon temp1: test_lab_nvme.)"""
    assert drivetemp.is_dir()
    identify = subprocess.run(["hdparm", "--Istdout", f"/dev/{sata_disk}"], capture_output=True, text=True)
    # "/dev/sda:" then IDENTIFY's 256 words, in hex
    words = [int(w, 16) for w in re.findall(r"\b[0-9a-f]{4}\b", identify.stdout.split(":", 1)[-1], re.I)]
    assert len(words) == 256 and words[93] != 0, identify.stdout[:200]
    assert not list(Path(f"/sys/block/{sata_disk}/device").glob("hwmon*/**/temp1_input"))
    found, missing = thermal.sources([sata_disk])
    assert missing == {} and [(s.how, s.read()) for s in found] == [("smartctl", TEMPERATURE_C)], found
    result = lab_drives.run_write(tmp_path, f"/dev/{sata_disk}", "sata-drivetemp", 16)
    assert result.manifest["targets"][0]["temperature_sources"][f"/dev/{sata_disk}"] == "smartctl"
    assert result.results.iloc[0]["temp_max_c"] == TEMPERATURE_C
