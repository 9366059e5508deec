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


CDM7 = """------------------------------------------------------------------------------
CrystalDiskMark 7.0.0 x64 (C) 2007-2019 hiyohiyo Crystal Dew World: https://crystalmark.info/
------------------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

[Read]
Sequential 1MiB (Q=  8, T= 1):   100.000 MB/s [     95.4 IOPS] < 83000.00 us>
    Random 4KiB (Q= 32, T=16):     0.800 MB/s [    195.3 IOPS] <600000.00 us>

[Write]
Sequential 1MiB (Q=  8, T= 1):    90.000 MB/s [     85.8 IOPS] < 92000.00 us>
"""

CDM5 = """-----------------------------------------------------------------------
CrystalDiskMark 5.2.0 x64 (C) 2007-2016 hiyohiyo
                           Crystal Dew World : http://crystalmark.info/
-----------------------------------------------------------------------
* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]
* KB = 1000 bytes, KiB = 1024 bytes

   Sequential Read (Q= 32,T= 1) :   140.000 MB/s
          Sequential Read (T= 1) :   150.000 MB/s
   Random Read 4KiB (Q= 1,T= 1) :    10.000 MB/s [  2441.4 IOPS]

  Test : 1024 MiB [E: 0.4% (26.4/7167.0 MiB)] (x5)  [Interval=5 sec]
"""


def test_the_7x_and_5x_layouts():
    seven = cdmtext.parse(CDM7)
    assert (seven.name, seven.layout) == ("CrystalDiskMark 7.0.0 x64", "7.x/8.x")
    assert [(r["test"], r["direction"], r["bs"], r["numjobs"]) for r in seven.rows] == [
        ("SEQ1M-Q8T1", "read", 1048576, 1), ("RND4K-Q32T16", "read", 4096, 16), ("SEQ1M-Q8T1", "write", 1048576, 1)]
    assert seven.rows[1]["latency_us"] == 600000.0
    five = cdmtext.parse(CDM5)
    assert (five.name, five.layout, five.passes, five.drive) == ("CrystalDiskMark 5.2.0 x64", "5.x/6.x", 5, "E:")
    assert [(r["test"], r["iodepth"], r["numjobs"], r["bw_mbps"]) for r in five.rows] == [
        ("SEQ-Q32T1", 32, 1, 140.0), ("SEQ-T1", None, 1, 150.0), ("RND4K-Q1T1", 1, 1, 10.0)]
