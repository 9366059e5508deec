"""CrystalDiskMark 3.x, 6.x, 8.x and KDiskMark 3.x text exports imported as runs: each figure in the
column that says what it is, the version and statistic recorded, nothing the text lacks filled in.
The samples (tests/fixtures/interop/, README there) are written in the layouts of public exports."""
import math

import pytest

import iolab
from iolab.core.errors import IolabError
from iolab.engine import store
from iolab.interop import cdmtext, imports

from cli_helpers import FIXTURES, cli_main

SAMPLES = FIXTURES / "interop"


def row(rows, test, direction):
    found = rows[(rows["test"] == test) & (rows["direction"] == direction)]
    assert len(found) == 1, (test, direction)
    return found.iloc[0]


def test_crystaldiskmark_8_with_the_mix(tmp_path):
    (run_dir,) = imports.import_paths([SAMPLES / "cdm8-nvme.txt"], data_dir=tmp_path, host="win1")
    manifest = store.read_manifest(run_dir)
    assert manifest["imported"]["tool"] == "CrystalDiskMark 8.0.4 x64" and manifest["tool"] == manifest["provenance"] and manifest["recipe"] == "crystaldiskmark"
    assert manifest["provenance"].endswith("measured by CrystalDiskMark 8.0.4 x64, not by iolab")
    imported = manifest["imported"]
    assert imported["statistic"] == "best" and imported["mix"] == "Read 70%/Write 30%"
    assert imported["format"] == "CrystalDiskMark text export (7.x/8.x layout)"
    assert manifest["options"] == {"size": "1 GiB", "repeat": 5, "runtime": 5.0, "pause": 5.0, "preset": "Default"}
    assert manifest["system"] == {"os": "Windows 11  [10.0 Build 22631] (x64)"}
    assert manifest["targets"] == [{"spec": "D:", "kind": "drive"}]
    assert (run_dir / "raw" / "cdm8-nvme.txt").read_bytes() == (SAMPLES / "cdm8-nvme.txt").read_bytes()
    rows = iolab.load(run_dir)
    assert len(rows) == 12 and set(rows["rep"]) == {1}
    seq = row(rows, "SEQ1M-Q8T1", "read")
    assert (seq["bs"], seq["iodepth"], seq["numjobs"]) == (1048576, 8, 1)
    assert (seq["bw_mbps"], seq["iops"], seq["lat_mean_us"]) == (3500.125, 3338.0, 2394.5)
    nvme = row(rows, "RND4K-Q32T16", "write")
    assert (nvme["bs"], nvme["iodepth"], nvme["numjobs"], nvme["bw_mbps"]) == (4096, 32, 16, 1500.125)
    assert row(rows, "SEQ128K-Q32T1", "read")["bs"] == 131072
    mix = row(rows, "MIX-RND4K-Q1T1", "mix")  # one figure per mixed row, as CrystalDiskMark shows it
    assert (mix["bw_mbps"], mix["iops"], mix["lat_mean_us"]) == (55.0, 13427.7, 74.3)
    for column in ("lat_p99_us", "cpu_usr_pct", "io_bytes", "runtime_s", "isolation"):
        assert rows[column].isna().all(), column  # not in the text: empty


def test_kdiskmark_latency_is_fio_completion_latency(tmp_path):
    (run_dir,) = imports.import_paths([SAMPLES / "kdiskmark3.txt"], data_dir=tmp_path, label="KDiskMark box")
    manifest = store.read_manifest(run_dir)
    assert manifest["imported"]["tool"] == "KDiskMark 3.0.0" and manifest["versions"] == {"fio": "fio-3.30"}
    assert manifest["imported"]["statistic"] == "mean"  # its Default profile averages the passes
    assert manifest["targets"] == [] and manifest["options"]["runtime"] == 5.0
    rows = iolab.load(run_dir)
    rnd = row(rows, "RND4K-Q32T1", "read")
    assert rnd["clat_mean_us"] == 374.1 and math.isnan(rnd["lat_mean_us"])
    assert (rnd["bw_mbps"], rnd["iops"], rnd["label"]) == (350.0, 85449.2, "KDiskMark box")


def test_crystaldiskmark_6_leaves_the_unstated_sequential_block_size_empty(tmp_path):
    (run_dir,) = imports.import_paths([SAMPLES / "cdm6.txt"], data_dir=tmp_path)
    rows = iolab.load(run_dir)
    assert store.read_manifest(run_dir)["options"]["size"] == "1024 MiB"
    seq = row(rows, "SEQ-Q32T1", "read")
    assert math.isnan(seq["bs"]) and seq["iodepth"] == 32 and seq["bw_mbps"] == 550.0 and math.isnan(seq["iops"])
    q8 = row(rows, "RND4K-Q8T8", "write")
    assert (q8["bs"], q8["iodepth"], q8["numjobs"], q8["iops"]) == (4096, 8, 8, 85449.2)
    assert rows["lat_mean_us"].isna().all()  # 6.x shows no latency


def test_crystaldiskmark_3_uses_the_crystaldiskmark3_recipe_names(tmp_path):
    (run_dir,) = imports.import_paths([SAMPLES / "cdm3.txt"], data_dir=tmp_path)
    manifest = store.read_manifest(run_dir)
    assert manifest["recipe"] == "crystaldiskmark3" and manifest["imported"]["tool"] == "CrystalDiskMark 3.0.1 x64"
    assert manifest["options"]["size"] == "1000 MB" and manifest["options"]["repeat"] == 5
    rows = iolab.load(run_dir)
    assert sorted(set(rows["test"])) == ["4K", "4K-QD32", "512K", "Seq"]
    assert row(rows, "4K-QD32", "read")["iops"] == 366.2 and row(rows, "4K-QD32", "read")["iodepth"] == 32
    assert row(rows, "Seq", "write")["bw_mbps"] == 110.25
    assert rows["bs"].isna().all()  # 3.x's text names no block size in bytes


def test_a_text_without_results_or_header_is_refused_naming_it(tmp_path, capsys, caplog):
    broken = tmp_path / "cut.txt"
    broken.write_text((SAMPLES / "cdm8-nvme.txt").read_text().split("[Read]")[0])
    with pytest.raises(IolabError, match="without a result line"):
        imports.import_paths([broken], data_dir=tmp_path / "d")
    other = tmp_path / "notes.txt"
    other.write_text("my benchmark notes\n")
    code, out, err = cli_main(capsys, caplog, "import", other, "--data", tmp_path / "d")
    assert code == 2 and err.strip().splitlines() == [
        f"iolab: error: {other}: neither fio JSON output nor a CrystalDiskMark/KDiskMark text export"]
    with pytest.raises(IolabError, match="not a CrystalDiskMark or KDiskMark"):
        cdmtext.parse("hello\n", context="x")
    assert not (tmp_path / "d").exists()
