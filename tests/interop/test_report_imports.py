"""Imported runs beside an iolab run in the comparison article: a CrystalDiskMark 8 and a KDiskMark
export, plain fio JSON captured here, and the fixture's crystaldiskmark run; each import's origin is
said in the environment table and in "What was measured", and its figures are in the tables. The single-run
report shows an imported text export's figures and its origin under its runs table, and an article with no place for an
import names it under the article."""
import shutil
import subprocess

import pytest

from iolab.interop import imports

from cli_helpers import FIXTURES, iolab_cli, needs_fio

SAMPLES = FIXTURES / "interop"


@needs_fio
def test_compare_report_shows_imports_with_their_origin(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "data" / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a",
                    data / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a")
    fio_json = tmp_path / "seq.json"
    with open(fio_json, "wb") as out:
        subprocess.run(["fio", "--name=seqread", f"--filename={tmp_path / 'f.dat'}", "--rw=read", "--bs=1M",
                        "--size=8M", "--ioengine=psync", "--output-format=json"], stdout=out, check=True, timeout=120)
    imports.import_paths([SAMPLES / "cdm8-nvme.txt", SAMPLES / "kdiskmark3.txt", fio_json], data_dir=data,
                         host="desk")
    proc = iolab_cli("report", "--data", data, "--notebook", "compare", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "out" / "compare.md").read_text()
    for source, tool in ((SAMPLES / "cdm8-nvme.txt", "CrystalDiskMark 8.0.4 x64"),
                         (SAMPLES / "kdiskmark3.txt", "KDiskMark 3.0.0")):
        assert f"imported from {source.resolve()}, measured by {tool}, not by iolab" in text
    assert f"tool: imported from {fio_json.resolve()}, measured by fio 3." in text  # its own recipe: fio
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| Tool |"))
    header = next(lines[i] for i in range(at, -1, -1) if lines[i].startswith("| System |"))
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in lines[at].split("|")]))
    assert cells["HDD (emulated)"] == "—"  # the iolab run: no import sentence
    assert cells["kdiskmark3"].endswith("measured by KDiskMark 3.0.0, not by iolab")
    assert "| HDD (emulated) |" in text and "cdm8-nvme" in text and "kdiskmark3" in text
    assert "3,500" in text and "510" in text  # CDM 8's SEQ1M-Q8T1 read, KDiskMark's, in the table
    assert "## Recipe: fio" in text


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """CrystalDiskMark 3 and 8 text exports imported (no fio: the texts are the measurement)."""
    data = tmp_path_factory.mktemp("data")
    cdm3, cdm8 = imports.import_paths([SAMPLES / "cdm3.txt", SAMPLES / "cdm8-nvme.txt"], data_dir=data, host="desk")
    return cdm3, cdm8


def test_the_single_run_report_shows_an_imported_runs_figures(imported, tmp_path):
    from iolab.report import notebooks as report
    page = report.report([imported[1]], lang="en", out=tmp_path / "one").markdown.read_text(encoding="utf-8")
    assert "| cdm8-nvme | desk |" in page
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in page.splitlines()
            if line.startswith("| SEQ1M-Q8T1 |") or line.startswith("| MIX-RND4K-Q1T1 |")}
    assert "| 3,500 |" in rows[("SEQ1M-Q8T1", "read")] and "| 3,000 |" in rows[("SEQ1M-Q8T1", "write")]
    assert "| 55.0 |" in rows[("MIX-RND4K-Q1T1", "mix")]


def test_the_single_run_report_says_where_an_imported_run_came_from(imported, tmp_path):
    from iolab.report import notebooks as report
    page = report.report([imported[1]], lang="en", out=tmp_path / "one").markdown.read_text(encoding="utf-8")
    assert "measured by CrystalDiskMark 8.0.4 x64, not by iolab" in page


def test_an_imported_run_beside_an_article_with_no_place_for_it_is_named(imported, tmp_path):
    """nytro prints CrystalDiskMark 3's speed-ups (cache on / off), not one drive's figures: a CrystalDiskMark 3
    import has no column there and is named under the article, not dropped."""
    from iolab.report import notebooks as report
    page = report.report([imported[0]], reference="nytro", lang="en",
                         out=tmp_path / "nytro").markdown.read_text(encoding="utf-8")
    assert ("Not put beside the article: cdm3 (crystaldiskmark3): the article's tables have no place for those "
            "tests (they show crystaldiskmark-3 and tpc-c).") in page
