"""The compare report puts the systems' drives side by side (issue 25 items 2 and 3): each drive's health
counters before and after its run, the drives no tool could read in one line with the tools' reasons, and the
temperature over each run that sampled it, with the drive's warning threshold and the tests flagged thermal.

The runs are stored real runs (tests/fixtures/flash): the sata-ssd's sustained-write run as it is (a loop
device: smartctl cannot read it), and a copy of the consumer-ssd's whose drive records are the lab's qemu NVMe
drive's, read by iolab's parsers from captures taken before and after 64 MiB were written (tests/drive_records.py),
and a temperature series of each of its tests in the sampler's format: the sustained write heats the drive past the
70 °C warning temperature the drive reports (NVMe WCTEMP in the capture), so the engine's own verdict flags it thermal.
The page is rendered by papermill, as `iolab report --notebook compare` renders it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import drive_records
from iolab.analysis.drivehealth import run_timeline, temperature_series
from iolab.core.units import human_size
from iolab.devices import smart
from iolab.engine import store
from iolab.report import i18n, notebooks as report, temperature_chart

FLASH = drive_records.FLASH
STORED, LOOP = drive_records.STORED, drive_records.LOOP
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
HEADING = {"en": "## Drive health before and after", "ja": "## 実行前後のドライブのヘルス"}
TEMPERATURE = {"en": "## Drive temperature during the runs", "ja": "## 実行中のドライブ温度"}
SUSTAINED = drive_records.SUSTAINED
#: the short write after the pause starts cooler
RECOVERY = [{"composite": t, "sensor 1": t + 6} for t in (66, 62, 60)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    nvme, thermal = drive_records.hot_nvme_run(tmp_path_factory.mktemp("drives"))
    assert "70 C" in thermal
    assert drive_records.write_series(nvme, "recovery", RECOVERY, started="2026-11-27T01:00:05") is None
    return [nvme, LOOP]


@pytest.fixture(scope="module")
def pages(runs, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("pages")
    return {lang: report.report(runs, notebook="compare", lang=lang, out=out / lang).markdown.read_text(encoding="utf-8")
            for lang in ("en", "ja")}


def _row(page: str, counter: str) -> list[str]:
    (line,) = [line for line in page.splitlines() if line.startswith(f"| {counter} | qemu-nvme |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_health_before_after_and_change_per_system(pages, lang):
    page = pages[lang]
    assert HEADING[lang] in page
    before, after = (smart.from_smartctl(drive_records.capture(name), "/dev/nvme0").health["data_written_bytes"]
                     for name in ("smartctl-x-qemu-nvme.json", "smartctl-a-qemu-nvme-after-64MiB.json"))
    written = _row(page, "Data written" if lang == "en" else "書き込み量")
    assert written[2:] == [human_size(before), human_size(after), "+" + human_size(after - before)]
    assert 64 * 2**20 <= after - before < 64 * 2**20 + smart.NVME_DATA_UNIT  # what dd wrote
    assert _row(page, "Temperature" if lang == "en" else "温度")[2:] == ["50 °C", "50 °C", "0 °C"]
    assert _row(page, "Media errors" if lang == "en" else "メディアエラー")[2:] == ["0", "0", "0"]
    assert _row(page, "Percentage used (wear)" if lang == "en" else "使用率（摩耗）")[2:] == ["0%", "0%", "0%"]
    hours = _row(page, "Power-on hours" if lang == "en" else "通電時間")
    assert hours[2] == ("0 h" if lang == "en" else "0時間")
    # the loop device has no counters: no row, one line saying it is no drive (not smartctl's "not a SMART device")
    assert "| sata-ssd |" not in page.split(HEADING[lang])[1].split("\n## ")[0].split("\n\n*")[0]
    assert "not a SMART device" not in page
    said = i18n.text("drive_health.unread_virtual", lang, systems="**sata-ssd**")
    assert [line for line in page.splitlines() if "**sata-ssd**" in line and said in line] == [said]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_runs_without_health_records_say_nothing_of_it(render_once, lang):
    page = render_once(data=DATA, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    assert HEADING[lang] not in page and "not a SMART device" not in page and "ヘルスカウンター" not in page
    assert TEMPERATURE[lang] not in page


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_temperature_chart_draws_the_series_the_threshold_and_the_thermal_test(runs, lang, request):
    if lang == "ja":
        request.getfixturevalue("japanese")
    manifest = {**store.read_manifest(runs[0]), "run_dir": str(runs[0])}
    section = temperature_chart.temperature_section([manifest, {**store.read_manifest(LOOP), "run_dir": str(LOOP)}],
                                                    store.load(runs[0]), names=["qemu-nvme", "sata-ssd"], lang=lang)
    (figure,) = section.figures  # the loop device sampled nothing: no chart
    ax = figure.axes[0]
    timeline = run_timeline(temperature_series(runs[0]))
    composite = timeline[timeline["sensor"].eq("composite")]
    drawn = [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines if line.get_linewidth() == 2.0]
    # a line per test, on the run's clock: the recovery write 15 s after the sustained one began
    assert [x for x, _ in drawn] == [list(range(9)), [15.0, 16.0, 17.0]]
    assert [y for _, y in drawn] == [list(p["temperature_c"]) for _, p in composite.groupby("step", sort=False)]
    threshold = [line for line in ax.lines if line.get_linestyle() == "--"]
    # the drive record's stored limits: nvme-cli's WCTEMP 343 K (70 °C) before hwmon's temp1_max (69.85 °C)
    stored = {(r["source"], r["limit"]): r["celsius"] for r in manifest["targets"][0]["drives"][0]["temperature_limits"]}
    assert stored == {("hwmon temp1_max", "warning"): 69.85, ("hwmon temp1_crit", "critical"): 99.85,
                      ("nvme id-ctrl wctemp", "warning"): 70.0, ("nvme id-ctrl cctemp", "critical"): 100.0}
    assert len(threshold) == 1 and set(threshold[0].get_ydata()) == {70.0}
    (shaded,) = ax.patches  # the thermal test's span: the sustained write's 8 seconds
    assert (shaded.get_x(), shaded.get_width()) == (0.0, 8.0)
    if lang == "en":
        assert "hottest composite reading was 74 °C" in figure.caption and "(70 °C)" in figure.caption
        assert "flagged thermal (sustained)" in figure.caption and "critical temperature: 100 °C." in figure.caption
    else:
        assert "最高は74 °C" in figure.caption and "警告温度（70 °C）" in figure.caption
        assert "臨界温度は100 °C。" in figure.caption
        assert "thermalフラグの付いたテスト（sustained）" in figure.caption


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_compare_page_shows_the_chart_of_the_run_that_sampled_temperature(pages, lang):
    page = pages[lang]
    assert page.count(TEMPERATURE[lang]) == 1
    part = page.split(TEMPERATURE[lang])[1].split("\n## ")[0]
    images = [line for line in part.splitlines() if line.startswith("![")]
    assert len(images) == 1 and "qemu-nvme" in images[0] and "sata-ssd" not in part
    caption = [line for line in part.splitlines() if line.startswith("**")][-1]
    assert ("74 °C" in caption and "70 °C" in caption and "sustained" in caption)
