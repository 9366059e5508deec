"""Imported runs beside an iolab run in the comparison article: a CrystalDiskMark 8 and a KDiskMark
export, plain fio JSON captured here, and the fixture's crystaldiskmark run; each import's origin is
said in the environment table and in "What was measured", and its figures are in the tables."""
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
