"""The single-server report page (report.ipynb) shows the runs' drives as the compare page does (issues 25 and
23): the health counters before and after each run, the drives no tool could read in one line, and the
temperature over each run that sampled it, by calling the compare page's own modules (drivehealth_table,
temperature_chart). Runs: the stored flash runs (tests/fixtures/flash), one given the lab's qemu NVMe drive
records and a temperature series (tests/drive_records.py), as in test_drive_health_page."""
from __future__ import annotations

from pathlib import Path

import pytest

import drive_records
from iolab.engine import store
from iolab.report import drivehealth_table, i18n, notebooks as report, temperature_chart

LOOP = drive_records.LOOP
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    nvme, _ = drive_records.hot_nvme_run(tmp_path_factory.mktemp("drives"))
    return [nvme, LOOP]


@pytest.fixture(scope="module")
def pages(runs, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("pages")
    return {lang: report.report(runs, lang=lang, out=out / lang).markdown.read_text(encoding="utf-8")
            for lang in ("en", "ja")}


def _heading(key: str, lang: str) -> str:
    return "## " + i18n.text(key, lang)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_report_page_shows_the_health_table_and_the_unread_drive(runs, pages, lang):
    page = pages[lang]
    sel = report.select(None, runs, lang=lang)
    table = drivehealth_table.health_table(sel.manifests, names=sel.manifests["system_name"], lang=lang)
    assert page.count(_heading("drive_health.heading", lang)) == 1
    part = page.split(_heading("drive_health.heading", lang))[1].split("\n## ")[0]
    # the module's own rows, on this page: each counter of the qemu NVMe drive, before, after and change
    for counter, system in table.frame.index:
        row = table.frame.loc[(counter, system)]
        assert f"| {counter} | {system} | {' | '.join(row)} |" in part, (counter, part[:1500])
    assert "| sata-ssd |" not in part.split("\n\n*")[0]  # a loop device has no counters
    unread = drivehealth_table.unread_line(sel.manifests, names=sel.manifests["system_name"], lang=lang)
    assert unread and "sata-ssd" in unread and page.count(unread) == 1
    # a loop device is no drive: said as such, not as smartctl's failure to read it
    said = i18n.text("drive_health.unread_virtual", lang, systems="**sata-ssd**")
    assert said in unread and "Unable to detect device type" not in unread


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_report_page_shows_the_temperature_of_the_run_that_sampled_it(runs, pages, lang, request):
    if lang == "ja":
        request.getfixturevalue("japanese")
    page = pages[lang]
    section = temperature_chart.temperature_section(
        [{**store.read_manifest(r), "run_dir": str(r)} for r in runs], store.load(runs[0]),
        names=["qemu-nvme", "sata-ssd"], lang=lang)
    heading = "## " + section.title
    assert page.count(heading) == 1
    part = page.split(heading)[1].split("\n## ")[0]
    images = [line for line in part.splitlines() if line.startswith("![")]
    assert len(images) == 1 and "qemu-nvme" in images[0] and "sata-ssd" not in part
    (figure,) = section.figures
    assert figure.caption.rstrip("。.") in part


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_runs_without_drive_records_show_neither(tmp_path, lang):
    page = report.report([DATA], lang=lang, out=tmp_path / lang).markdown.read_text(encoding="utf-8")
    assert _heading("drive_health.heading", lang) not in page
    assert "## " + i18n.text("drive_temperature.heading", lang) not in page
