"""Health deltas between systems and the temperature series, from what runs record (pure: no device).

The snapshots are the parsers' readings of smartctl's JSON captured from the lab's qemu NVMe drive
before and after 64 MiB were written (tests/fixtures/health); the loop device's reason is smartctl's own.
"""
import json
from pathlib import Path

import pandas as pd
import pytest

import drive_records
from iolab.analysis.drivehealth import (COUNTERS, DELTA_COLUMNS, SERIES_COLUMNS, health_deltas, run_timeline,
                                      stated_limit, temperature_series, warning_thresholds)
from iolab.core.errors import IolabError
from iolab.devices import health, hwmon, smart, thermal

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"
LOOP_REASON = "not a SMART device: /dev/loop3: Unable to detect device type"


def _snapshot(name: str, device: str = "nvme0n1") -> dict:
    reading = smart.from_smartctl(json.loads((FIXTURES / name).read_text()), f"/dev/{device}")
    return health.snapshot(device, readings=[reading])


def _manifests() -> list[dict]:
    nvme = {"name": "nvme", "health_before": [_snapshot("smartctl-x-qemu-nvme.json")],
            "health_after": [_snapshot("smartctl-a-qemu-nvme-after-64MiB.json")]}
    loop = smart.Reading("smartctl", "/dev/loop3", reason=LOOP_REASON)
    emulated = {"name": "consumer-ssd", "health_before": [health.snapshot("loop3", readings=[loop])],
                "health_after": [health.snapshot("loop3", readings=[loop])]}
    return [{"run_id": "r1", "label": "nvme box", "targets": [nvme]},
            {"run_id": "r2", "label": "laptop", "targets": [emulated]},
            {"run_id": "r0", "label": "old run", "targets": [{"name": "x"}]}]  # from before health was recorded


def test_each_counter_before_after_and_what_the_run_added():
    found = health_deltas(_manifests())
    assert tuple(found.columns) == DELTA_COLUMNS
    nvme = found[found["system"].eq("nvme box")].set_index("counter")
    assert list(nvme.index) == [c for c in COUNTERS if c in nvme.index]  # in the table's order
    written = nvme.loc["data_written_bytes"]
    assert (written["before"], written["kind"]) == (0, "count")
    assert 64 * 2**20 <= written["delta"] < 64 * 2**20 + smart.NVME_DATA_UNIT  # dd wrote 64 MiB
    assert nvme.loc["host_write_commands", "delta"] == 128
    assert nvme.loc["data_read_bytes", "delta"] == 1_024_000  # two more 512,000-byte units read
    assert nvme.loc["temperature_c", ["before", "after", "delta", "kind"]].tolist() == [50, 50, 0, "level"]
    assert nvme.loc["media_errors", "delta"] == 0 and nvme.loc["percentage_used", "delta"] == 0
    assert nvme["unread"].isna().all() and set(nvme["device"]) == {"/dev/nvme0n1"} and set(nvme["run_id"]) == {"r1"}
    assert "smart_passed" not in nvme.index  # a verdict, not a counter


def test_a_drive_no_tool_read_is_said_not_zero():
    found = health_deltas(_manifests())
    loop = found[found["system"].eq("laptop")]
    assert len(loop) == 1 and pd.isna(loop["counter"].iloc[0]) and loop[["before", "after", "delta"]].isna().all(axis=None)
    assert loop["unread"].iloc[0] == f"smartctl: {LOOP_REASON}" and loop["device"].iloc[0] == "/dev/loop3"
    assert "old run" not in set(found["system"])


def test_systems_named_as_the_report_names_them():
    found = health_deltas(pd.DataFrame(_manifests()), names=["A", "B", "C"])
    assert list(dict.fromkeys(found["system"])) == ["A", "B"]
    with pytest.raises(IolabError, match="2 names for 3 runs"):
        health_deltas(_manifests(), names=["A", "B"])
    assert health_deltas([]).empty and tuple(health_deltas([]).columns) == DELTA_COLUMNS


def test_a_counter_in_one_snapshot_only_has_no_delta():
    after = {**_snapshot("smartctl-x-qemu-nvme.json"), "thermal_transitions": 2}
    found = health_deltas([{"run_id": "r", "label": "s", "targets": [
        {"name": "t", "health_before": [_snapshot("smartctl-x-qemu-nvme.json")], "health_after": [after]}]}])
    row = found.set_index("counter").loc["thermal_transitions"]
    assert pd.isna(row["before"]) and row["after"] == 2 and pd.isna(row["delta"])


def _write_series(path: Path, temperatures: dict) -> None:
    """A series as the sampler writes it: real files read by thermal's hwmon source."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sources = []
    for sensor, degrees in temperatures.items():
        reading = path.parent / f"{path.name}.{sensor.replace(' ', '_')}.input"
        reading.write_text(f"{int(degrees * 1000)}\n")
        sources.append(thermal.Source("/dev/nvme0n1", "hwmon", lambda r=reading: hwmon.millidegrees(r),
                                      sensor=sensor))
    with thermal.Sampler(sources, path, interval=3600):
        pass


def test_a_runs_temperature_files_as_one_series(tmp_path):
    run = tmp_path / "20261126T230000Z-sustained-write-ab12"
    _write_series(run / "raw" / "sustained-1.temp.csv", {"composite": 51.0, "sensor 1": 58.0})
    _write_series(run / "raw" / "ssd" / "seq-write-q8-2.temp.csv", {"composite": 44.0})
    old = run / "raw" / "recovery-1.temp.csv"  # written before sensors were told apart
    old.write_text("elapsed_s,utc,device,temperature_c\n0.0,2026-11-26T23:00:00.000+00:00,/dev/sda,33.0\n")
    found = temperature_series(run)
    assert tuple(found.columns) == SERIES_COLUMNS
    keyed = {(r.target, r.step, r.rep, r.sensor): r.temperature_c for r in found.itertuples()}
    assert keyed[(None, "sustained", 1, "composite")] == 51.0 and keyed[(None, "sustained", 1, "sensor 1")] == 58.0
    assert keyed[("ssd", "seq-write-q8", 2, "composite")] == 44.0
    assert keyed[(None, "recovery", 1, "composite")] == 33.0
    assert len(found) == 2 * 2 + 2 + 1  # first and last sample of each sensor, one row of the old file
    assert set(found["run_id"]) == {run.name}
    assert temperature_series(tmp_path / "nothing").empty


def test_a_damaged_series_names_its_file(tmp_path):
    bad = tmp_path / "raw" / "t-1.temp.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("when,what\n1,2\n")
    with pytest.raises(IolabError, match=r"t-1.temp.csv.*no column\(s\) device, elapsed_s, temperature_c|"
                                         r"no column\(s\) device, elapsed_s, temperature_c.*t-1.temp.csv"):
        temperature_series(tmp_path)


def test_a_runs_samples_on_the_runs_clock_and_the_thresholds_it_recorded(tmp_path):
    """Each test's series starts at elapsed 0: run_timeline places them by the samples' own time (utc); a file
    without it after the tests before it. The warning temperature is the one the snapshot before the run holds."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a-1.temp.csv").write_text("elapsed_s,utc,device,sensor,temperature_c\n"
                                      "0.0,2026-11-27T01:00:00.000+00:00,/dev/nvme0n1,composite,40\n"
                                      "1.0,2026-11-27T01:00:01.000+00:00,/dev/nvme0n1,composite,41\n")
    (raw / "b-1.temp.csv").write_text("elapsed_s,utc,device,sensor,temperature_c\n"
                                      "0.0,2026-11-27T01:00:10.500+00:00,/dev/nvme0n1,composite,45\n")
    (raw / "c-1.temp.csv").write_text("elapsed_s,device,temperature_c\n0.0,/dev/nvme0n1,44\n2.0,/dev/nvme0n1,43\n")
    timeline = run_timeline(temperature_series(tmp_path))
    assert list(zip(timeline["step"], timeline["run_s"])) == [("a", 0.0), ("a", 1.0), ("b", 10.5), ("c", 11.5),
                                                              ("c", 13.5)]
    snapshot = _snapshot("smartctl-x-qemu-nvme.json")
    manifest = {"targets": [{"health_before": [{**snapshot, "warning_temp_c": 70}]}, {"name": "old"}]}
    assert warning_thresholds(manifest) == {"/dev/nvme0n1": 70.0}
    assert warning_thresholds({"targets": [{"health_before": [snapshot]}]}) == {}


def test_the_stored_limits_win_the_drives_own_before_hwmons(tmp_path, monkeypatch):
    """The drive record's temperature_limits (the qemu drive's: hwmon laid out from the capture's Kelvin, nvme-cli's
    id-ctrl) give each limit; the drive's own statement (nvme-cli) before hwmon's, as the thermal verdict judges;
    hwmon's alone when no tool stated one; a run without stored limits keeps its snapshot's."""
    drive_records.pcie_link(tmp_path / "sys", monkeypatch)
    drive_records.nvme_hwmon(tmp_path / "sys")
    limits = drive_records.nvme_limits(tmp_path / "sys")
    snapshot = {**_snapshot("smartctl-x-qemu-nvme.json"), "warning_temp_c": 65, "critical_temp_c": 90}
    target = {"drives": [{"device": "/dev/nvme0n1", "temperature_limits": limits}], "health_before": [snapshot]}
    assert warning_thresholds({"targets": [target]}) == {"/dev/nvme0n1": 70.0}
    assert warning_thresholds({"targets": [target]}, "critical") == {"/dev/nvme0n1": 100.0}
    hwmon_only = [r for r in limits if r["source"].startswith("hwmon")]
    target["drives"][0]["temperature_limits"] = hwmon_only
    assert warning_thresholds({"targets": [target]}) == {"/dev/nvme0n1": 69.85}
    assert stated_limit(hwmon_only, "critical") == 99.85 and stated_limit([], "warning") is None
    del target["drives"][0]["temperature_limits"]  # a run recorded before the limits were
    assert warning_thresholds({"targets": [target]}) == {"/dev/nvme0n1": 65.0}
    assert warning_thresholds({"targets": [target]}, "critical") == {"/dev/nvme0n1": 90.0}
