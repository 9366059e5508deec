"""Parsers of the original tools' output, against output captured from the real tools
(bonnie++ 2.00a, hdparm 9.65 on Debian 12: tests/fixtures/originals, made by capture.py),
and the recipe options check shared by the classic engines."""
from __future__ import annotations

from pathlib import Path

import pytest

from iolab.core.errors import IolabError
from iolab.classic.originals import Option, bonnie_latency_us, check_options, parse_bonnie_csv, parse_hdparm
import cli_helpers

FIXTURES = cli_helpers.FIXTURES / "originals"
MiB = 1024 * 1024


def out(name: str) -> str:
    return (FIXTURES / f"{name}.out").read_text()


def err(name: str) -> str:
    path = FIXTURES / f"{name}.err"
    return path.read_text() if path.exists() else ""


# --------------------------------------------------------------------------- bonnie++

def by_test(frame):
    return frame.set_index("test")


def test_bonnie_text_and_csv_output_gives_six_rows():
    rows = by_test(parse_bonnie_csv(out("bonnie_tmpdir"), byte_io=MiB))
    assert list(rows.index) == ["putc", "put_block", "rewrite", "getc", "get_block", "seeks"]
    assert set(rows["tool"]) == {"bonnie++"} and set(rows["bonnie_version"]) == {"2.00a"}
    putc = rows.loc["putc"]
    assert putc["kps"] == 1291 and putc["cpu_pct"] == 95 and putc["lat_max_us"] == 12032
    assert putc["bw_mbps"] == pytest.approx(1291 * 1024 / 1e6) and putc["io_bytes"] == MiB
    assert putc["runtime_s"] == pytest.approx(1024 / 1291) and putc["bs"] == 1
    # "+++++": under 0.5 s, no number -- and "+++" for its CPU
    block = rows.loc["put_block"]
    assert block["plus"] == "+++++" and block["kps"] != block["kps"] and block["cpu_pct"] != block["cpu_pct"]
    assert block["lat_max_us"] == 4304 and block["file_size"] == 128 * MiB and block["bs"] == 8192
    seeks = rows.loc["seeks"]
    assert seeks["iops"] == 9887 and seeks["cpu_pct"] == 65 and seeks["numjobs"] == 5
    assert seeks["seeks"] == 8192 and seeks["runtime_s"] == pytest.approx(8192 / 9887)
    assert rows.loc["getc", "direction"] == "read" and rows.loc["rewrite", "direction"] == "write"


def test_bonnie_quiet_csv_on_an_emulated_hdd():
    rows = by_test(parse_bonnie_csv(out("bonnie_hdd_quiet"), byte_io=MiB))
    assert rows["plus"].isna().all()  # every cell measured
    assert rows.loc["get_block", "kps"] == 99559
    assert rows.loc["get_block", "bw_mbps"] == pytest.approx(101.95, abs=0.01)  # the HDD profile's 100 MB/s
    assert rows.loc["get_block", "lat_max_us"] == 101_000  # "101ms"
    assert rows.loc["seeks", "iops"] == pytest.approx(142.1)  # the profile's 150 IOPS
    assert rows.loc["seeks", "seeks"] == 600 and rows.loc["seeks", "seed"] == 7
    assert rows.loc["seeks", "lat_max_us"] == 107_000


def test_bonnie_repeated_runs_without_per_char_and_a_4k_chunk():
    frame = parse_bonnie_csv(out("bonnie_chunk4k_repeat"), chunk=4096)
    assert sorted(set(frame["line"])) == [1, 2]  # the header line of -x 2 is skipped
    assert "putc" not in set(frame["test"]) and "getc" not in set(frame["test"])  # -f: skipped
    assert set(frame["chunk"]) == {4096}  # bonnie++ 2.00a leaves the chunk cell empty
    assert set(frame["seek_procs"]) == {3} and set(frame["seeks"]) == {2000}
    second = frame[frame["line"] == 2].set_index("test")
    assert second.loc["put_block", "lat_max_us"] == 13093 and second.loc["rewrite", "lat_max_us"] == 107_000
    assert second.loc["rewrite", "kps"] == 73941 and second.loc["seeks", "iops"] == pytest.approx(794.4)


def test_bonnie_errors_name_the_problem():
    with pytest.raises(IolabError, match="no bonnie\\+\\+ CSV line"):
        parse_bonnie_csv(out("bonnie_too_small"))  # bonnie++ refused: usage text on stderr, nothing here
    assert "File size should be double RAM" in err("bonnie_too_small")
    line = out("bonnie_hdd_quiet").replace("1.98,", "1.97,", 1)
    with pytest.raises(IolabError, match="format 1.97 is not supported"):
        parse_bonnie_csv(line)
    with pytest.raises(IolabError, match="cells"):
        parse_bonnie_csv("1.98,2.00a,x,1,1,1G,,8192,5,1,2\n")


def test_bonnie_latency_units():
    assert bonnie_latency_us("44us") == 44
    assert bonnie_latency_us("107ms") == 107_000
    assert bonnie_latency_us("2s") == 2_000_000
    assert bonnie_latency_us("") is None
    with pytest.raises(IolabError):
        bonnie_latency_us("fast")


# --------------------------------------------------------------------------- hdparm

def test_hdparm_cached_and_buffered_reads():
    rows = parse_hdparm(out("hdparm_hdd_Tt")).set_index("test")
    cached, disk = rows.loc["cached-reads"], rows.loc["disk-reads"]
    assert cached["hdparm_mb_sec"] == pytest.approx(6485.15) and cached["io_bytes"] == 12850 * MiB
    assert cached["runtime_s"] == pytest.approx(1.98) and cached["direct"] == 0
    # hdparm's "MB" is MiB: 93.84 "MB/sec" is 98.4 MB/s, the HDD profile's 100 MB/s
    assert disk["hdparm_mb_sec"] == pytest.approx(93.84)
    assert disk["bw_mbps"] == pytest.approx(93.84 * 1.048576)
    assert set(rows["device"]) == {"/dev/loop0"} and rows["error"].isna().all()


def test_hdparm_direct_and_offset():
    direct = parse_hdparm(out("hdparm_hdd_t_direct")).iloc[0]
    assert direct["test"] == "disk-reads" and direct["direct"] == 1 and direct["hdparm_mb_sec"] == pytest.approx(74.87)
    cached = parse_hdparm(out("hdparm_hdd_T_direct")).iloc[0]
    assert cached["test"] == "cached-reads" and cached["direct"] == 1 and cached["io_bytes"] == 152 * MiB
    offset = parse_hdparm(out("hdparm_hdd_t_offset")).iloc[0]
    assert offset["offset_gb"] == 0 and offset["hdparm_mb_sec"] == pytest.approx(94.77)


def test_hdparm_two_devices_and_kb_per_second():
    rows = parse_hdparm(out("hdparm_two_devices_slow"))
    assert list(rows["device"]) == ["/dev/loop0", "/dev/loop4"]
    slow = rows.iloc[1]
    assert slow["hdparm_mb_sec"] == pytest.approx(574.94 / 1024)  # "kB/sec" converted to hdparm's MB/sec
    assert slow["bw_mbps"] == pytest.approx(0.6, rel=0.02)  # the 600 kB/s throttle
    assert slow["io_bytes"] == 2 * MiB and slow["runtime_s"] == pytest.approx(3.56)


def test_hdparm_failure_keeps_its_message():
    rows = parse_hdparm(out("hdparm_regular_file"), err("hdparm_regular_file"))
    assert len(rows) == 1 and rows.iloc[0]["test"] == "disk-reads"
    assert "BLKFLSBUF failed" in rows.iloc[0]["error"]
    with pytest.raises(IolabError, match="no timing line"):
        parse_hdparm("\n/dev/sda:\n", "HDIO_DRIVE_CMD failed")


def test_old_hdparm_wording():
    rows = parse_hdparm("/dev/hda:\n Timing buffer-cache reads:   916 MB in  2.00 seconds = 457.84 MB/sec\n")
    assert rows.iloc[0]["test"] == "cached-reads" and rows.iloc[0]["hdparm_mb_sec"] == pytest.approx(457.84)


# --------------------------------------------------------------------------- options

SCHEMA = {"seeks": Option(8192, "int", 1), "size": Option("3M", "size", 0), "sync": Option(False, "bool"),
          "settle": Option(3, "seconds", 0)}


def test_options_defaults_and_conversion():
    assert check_options({}, SCHEMA, "r.yaml") == {"seeks": 8192, "size": 3 * MiB, "sync": False, "settle": 3.0}
    assert check_options({"size": 0, "settle": "500ms"}, SCHEMA, "r.yaml")["settle"] == 0.5


@pytest.mark.parametrize("given, message", [
    ({"seek": 1}, "r.yaml: options: unknown option 'seek'"),
    ({"seeks": "many"}, "r.yaml: options.seeks: must be a whole number"),
    ({"seeks": 0}, "r.yaml: options.seeks: must be at least 1"),
    ({"sync": "yes"}, "r.yaml: options.sync: must be true or false"),
    ({"size": "lots"}, "r.yaml: options.size: not a size"),
])
def test_options_errors_name_file_and_field(given, message):
    with pytest.raises(IolabError) as info:
        check_options(given, SCHEMA, "r.yaml")
    assert str(info.value).startswith(message)
