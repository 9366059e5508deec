"""The compare report puts the systems' drives side by side (issue 25 items 2 and 3): each drive's health
counters before and after its run, and the drives no tool could read in one line with the tools' reasons.

The runs are stored real runs (tests/fixtures/flash): the sata-ssd's sustained-write run as it is (a loop
device: smartctl cannot read it), and a copy of the consumer-ssd's whose drive records are the lab's qemu NVMe
drive's, read by iolab's parsers from captures taken before and after 64 MiB were written (tests/drive_records.py).
The page is rendered by papermill, as `iolab report --notebook compare` renders it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import drive_records
from iolab.core.units import human_size
from iolab.devices import smart
from iolab.report import notebooks as report

FLASH = drive_records.FLASH
STORED = FLASH / "consumer-ssd" / "20261127T005944Z-sustained-write-2c3c"
LOOP = FLASH / "sata-ssd" / "20261127T010010Z-sustained-write-c366"
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
HEADING = {"en": "## Drive health before and after", "ja": "## 実行前後のドライブのヘルス"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("drives")
    with pytest.MonkeyPatch.context() as monkeypatch:
        link = drive_records.pcie_link(root / "sys", monkeypatch)
    return [drive_records.nvme_run(STORED, root / "runs", link), LOOP]


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
    # the loop device has no counters: no row, one line with smartctl's own words
    assert "| sata-ssd |" not in page.split(HEADING[lang])[1].split("\n## ")[0].split("\n\n*")[0]
    unread = [line for line in page.splitlines() if "**sata-ssd**" in line and "not a SMART device" in line]
    assert len(unread) == 1 and unread[0].startswith("No health counters for" if lang == "en" else "ヘルスカウンターなし")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_runs_without_health_records_say_nothing_of_it(render_once, lang):
    page = render_once(data=DATA, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    assert HEADING[lang] not in page and "not a SMART device" not in page and "ヘルスカウンター" not in page
