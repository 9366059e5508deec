"""The drive each run measured in the report's environment table (issue 25 item 1): what the manifest records,
unknown with the tools' reasons where a value was not collected, nothing for runs from before drives were recorded.

The NVMe drive is the lab's qemu drive as iolab's parsers read its captured smartctl and nvme-cli output
(tests/drive_records.py); the loop device and the older run are stored real runs (tests/fixtures).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import drive_records
from iolab.devices import health
from iolab.report import driveidentity, environment, i18n
from iolab.report.tables import DASH

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOOP_RUN = FIXTURES / "flash" / "consumer-ssd" / "20261127T005944Z-sustained-write-2c3c"
OLD_RUN = next((FIXTURES / "data").rglob("manifest.json")).parent  # a run from before drives were recorded
ROWS = {"en": ("Firmware", "Capacity", "Sector size (logical / physical)", "NVMe namespace format", "Link",
               "Controller", "Serial (hashed)", "Not read by"),
        "ja": ("ファームウェア", "容量", "セクターサイズ（論理／物理）", "NVMeネームスペースのフォーマット", "リンク",
               "コントローラー", "シリアル番号（ハッシュ）", "読めなかったツール")}


def _manifest(run: Path) -> dict:
    return {**json.loads((run / "manifest.json").read_text()), "run_dir": str(run)}


@pytest.fixture
def nvme(tmp_path, monkeypatch) -> dict:
    link = drive_records.pcie_link(tmp_path / "sys", monkeypatch)
    return _manifest(drive_records.nvme_run(LOOP_RUN, tmp_path / "runs", link))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_nvme_drive_a_loop_device_and_an_older_run_side_by_side(nvme, lang):
    table = environment.environment_table([nvme, _manifest(LOOP_RUN), _manifest(OLD_RUN)], lang=lang,
                                          names=["qemu-nvme", "consumer-ssd", "old"]).frame
    firmware, capacity, sectors, namespace, link, controller, serial, not_read = ROWS[lang]
    drive = table["qemu-nvme"]
    assert drive[firmware] == "7.2.22" and drive[serial] == health.hidden_serial(drive_records.SERIAL)
    assert drive_records.SERIAL not in table.to_string()  # the serial itself is never shown
    assert drive[capacity].startswith("256 MiB") and "268,435,456" in drive[capacity]
    assert drive[sectors] == ("512 B / 512 B" if lang == "en" else "512 B／512 B")
    assert drive[namespace].startswith("LBA format 0: 512 B data + 0 B metadata" if lang == "en"
                                       else "LBAフォーマット0：データ512 B＋メタデータ0 B")
    assert drive[link] == ("PCIe Gen3 x4 (8.0 GT/s PCIe)" if lang == "en" else "PCIe Gen3 x4（8.0 GT/s PCIe）")
    assert drive[controller] == ("NVMe controller (nvme, 0000:3d:00.0)" if lang == "en"
                                 else "NVMeコントローラー（nvme、0000:3d:00.0）")
    # smartctl and nvme-cli both answered the drive, and a loop device is no drive (smartctl's "not a SMART device"
    # is no failure there): nothing to say, so no row
    assert not_read not in table.index
    loop = table["consumer-ssd"]
    assert loop[capacity].startswith("224 MiB")
    # a loop device has no firmware, link or controller of its own: not applicable, not "unknown"
    assert (loop[firmware], loop[link], loop[controller], loop[namespace]) == (DASH,) * 4
    assert set(table.loc[[row for row in ROWS[lang] if row != not_read], "old"]) == {DASH}
    # a table of older runs alone has no identity rows at all
    assert not set(ROWS[lang]) & set(environment.environment_table([_manifest(OLD_RUN)], lang=lang).frame.index)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_what_a_missing_tool_could_not_tell_is_unknown_with_its_reason(lang):
    """A SATA disk read by sysfs only (smartctl missing) and an NVMe drive without nvme-cli, as identity() records
    them: the values sysfs gives are shown, the others are unknown with the tool's reason, none guessed."""
    sata = {"device": "/dev/sda", "transport": "sata", "model": "Example SSD", "capacity_bytes": 10**12,
            "logical_block_size": 512, "physical_block_size": 4096, "rotational": False,
            "link": {"sata_speed": "6.0 Gbps"}, "sources": {"smartctl": "smartctl not installed"}}
    nvme = {"device": "/dev/nvme0n1", "transport": "nvme", "model": "QEMU NVMe Ctrl", "firmware": "7.2.22",
            "serial": health.hidden_serial("x"), "link": {},
            "sources": {"smartctl": "ok", "nvme": "nvme not installed"}}
    found = {name: driveidentity.identity_fields({"targets": [{"drives": [drive]}]}, lang=lang)
             for name, drive in (("sata", sata), ("nvme", nvme))}
    unknown = "unknown ({})" if lang == "en" else "不明（{}）"
    missing = {"en": "{0}: {0} not installed", "ja": "{0}：{0}がインストールされていない"}[lang]  # iolab's words, in lang
    assert found["sata"]["firmware"] == unknown.format(missing.format("smartctl"))
    assert found["sata"]["serial"] == found["sata"]["controller"] == found["sata"]["firmware"]
    assert found["sata"]["link"] == "SATA 6.0 Gbps" and found["sata"]["nvme_format"] is None
    assert found["sata"]["sectors"] == ("512 B / 4,096 B" if lang == "en" else "512 B／4,096 B")
    assert found["nvme"]["nvme_format"] == unknown.format(missing.format("nvme"))
    assert found["nvme"]["firmware"] == "7.2.22" and found["nvme"]["capacity"] is None
    assert driveidentity.identity_fields({"targets": [{"name": "x"}]}, lang=lang) == dict.fromkeys(
        driveidentity.FIELDS)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_drive_s_stated_temperature_limits_are_a_row(lang, tmp_path):
    """The lab's qemu NVMe states WCTEMP 343 K and CCTEMP 373 K (nvme-cli) and hwmon the same as 69.85 / 99.85 C:
    the row gives the limits the thermal verdict and the chart use (the drive's own, nvme-cli's, first); a drive
    that stated none (a loop device) has no row value, which is no failure to read."""
    nvme, _ = drive_records.hot_nvme_run(tmp_path)
    found = driveidentity.identity_fields(json.loads((nvme / "manifest.json").read_text()), lang=lang)
    assert found["temperature_limits"] == ("warning 70 °C, critical 100 °C" if lang == "en" else "警告70 °C、危険100 °C")
    loop = driveidentity.identity_fields(json.loads((drive_records.LOOP / "manifest.json").read_text()), lang=lang)
    assert loop["temperature_limits"] is None
    table = environment.environment_table([json.loads((nvme / "manifest.json").read_text())], lang=lang).frame
    assert i18n.text("drives.labels.temperature_limits", lang) in table.index


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_drive_that_trained_below_its_slot_says_what_the_slot_offers(lang):
    """The lab's qemu NVMe drive: its own link trained at 2.5 GT/s x1 (all qemu's NVMe device offers) below a root
    port of 8.0 GT/s x4; a drive whose link is all its slot offers says nothing more."""
    port = {"address": "0000:01:00.0", "driver": "nvme", "controller": "NVMe controller", "speed": "2.5 GT/s PCIe",
            "width": 1, "max_speed": "2.5 GT/s PCIe", "max_width": 1, "generation": 1,
            "slot": {"address": "0000:00:02.0", "max_speed": "8.0 GT/s PCIe", "max_width": 4, "generation": 3}}
    drive = {"transport": "nvme", "model": "QEMU NVMe Ctrl", "link": {"pcie": port}, "sources": {}}
    link = driveidentity.identity_fields({"targets": [{"drives": [drive]}]}, lang=lang)["link"]
    assert link == ("PCIe Gen1 x1 (2.5 GT/s PCIe) (in a slot of 8.0 GT/s PCIe x4)" if lang == "en"
                    else "PCIe Gen1 x1（2.5 GT/s PCIe）（スロットは8.0 GT/s PCIe x4）")
    full = {**port, "slot": {**port["slot"], "max_speed": "2.5 GT/s PCIe", "max_width": 1}}
    drive["link"] = {"pcie": full}
    assert "slot" not in driveidentity.identity_fields({"targets": [{"drives": [drive]}]}, lang="en")["link"]


def test_every_reason_iolab_records_is_read_back_and_said_in_each_language():
    """The words iolab records when a tool cannot read a drive (drivehealth.TOOL_REASONS, written by
    iolab.devices.smart) are read back by key; the English page says them exactly as recorded, the Japanese page
    in Japanese, with the tool's own words kept in brackets."""
    from iolab.analysis import drivehealth
    from iolab.report import i18n
    assert {k: v for k, v in i18n.catalog("en")["drives"]["reasons"].items() if k != "joiner"} == \
        drivehealth.TOOL_REASONS
    fields = {"program": "smartctl", "seconds": "10", "code": "2", "said": "/dev/sdb: Unable to detect device type"}
    for key, template in drivehealth.TOOL_REASONS.items():
        recorded = drivehealth.tool_reason(key, **{k: v for k, v in fields.items() if "{" + k + "}" in template})
        assert drivehealth.reason_of(recorded)[0] == key, recorded
        assert driveidentity.say_reasons([("nvme", recorded)], "en") == f"nvme: {recorded}"
        ja = driveidentity.say_reasons([("nvme", recorded)], "ja")
        assert ja.startswith("nvme：") and (fields["said"] not in recorded or f"「{fields['said']}」" in ja), ja
    # a tidy table's one text (health_deltas' unread) splits back into the same pairs
    assert driveidentity.say_reasons(drivehealth.tool_lines("smartctl: a; b; nvme: its own words"), "ja") == \
        "smartctl：「a; b」；nvme：「its own words」"
