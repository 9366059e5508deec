"""iolab.engine.fio.parse against real fio 3.33 output (tests/fixtures/fio, see capture.py there).

The expected values are read from the fixtures' JSON here, independently of the
parser (plain ``json`` on the text between a "{" line and its "}" line).
"""
from __future__ import annotations

import json
import logging
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.engine.fio import parse as fioparse
from iolab.core.columns import PARSE_COLUMNS
from iolab.core.errors import IolabError
import cli_helpers

FIXTURES = cli_helpers.FIXTURES / "fio"
DIRECTIONS = ("read", "write", "trim")
DATA_FIXTURES = [
    "json_randread", "jsonplus_randread", "psync_note", "status_interval", "numjobs4",
    "numjobs4_jsonplus", "numjobs4_group_reporting", "numjobs_uneven", "randrw_mix", "stonewall_groups",
    "clat_only", "enospc_tmpfs", "trimwrite_loop", "client_server",
]


def text(name: str, ext: str = "out") -> str:
    return (FIXTURES / f"{name}.{ext}").read_text()


def raw_docs(output: str) -> list[dict]:
    """Every JSON document, cut out by fio's layout: a "{" line to the next "}" line."""
    return [json.loads(m.group(0)) for m in re.finditer(r"^\{$.*?^\}$", output, re.M | re.S)]


def raw_doc(name: str) -> dict:
    return raw_docs(text(name))[-1]


def exit_status(name: str) -> int:
    return int(re.search(r"^# exit status: (-?\d+)$", text(name, "cmd"), re.M).group(1))


def pct(table: dict, p: float) -> float:
    return next(v for k, v in table["percentile"].items() if abs(float(k) - p) < 1e-9)


def hist_percentile(bins: dict, p: float) -> float:
    """fio's rule, written out again: first bucket where the running count >= p% of all."""
    items = sorted((int(k), v) for k, v in bins.items())
    total = sum(v for _, v in items)
    running = 0
    for value, count in items:
        running += count
        if running >= p / 100 * total:
            return value
    raise AssertionError("empty histogram")


def only(frame, **where):
    for column, value in where.items():
        frame = frame[frame[column] == value]
    assert len(frame) == 1, where
    return frame.iloc[0]


# --------------------------------------------------------------------------- shape and units

@pytest.mark.parametrize("name", DATA_FIXTURES)
def test_every_row_matches_fio_units(name):
    """Columns in contract order; bw_mbps * 1e6 == bw_bytes, us * 1000 == ns, ms / 1000 == s."""
    frame = fioparse.parse_output(text(name))
    assert list(frame.columns) == PARSE_COLUMNS
    assert frame.attrs["fio_version"] == "3.33"
    doc = raw_doc(name)
    entries = [e for e in doc.get("client_stats", doc.get("jobs", []))
               if e["jobname"] != "All clients"]
    assert len(frame) >= 1
    for _, row in frame.iterrows():
        same = [e for e in entries if e["jobname"] == row.job and e["groupid"] == row.groupid
                and e.get("hostname") == row.host]
        assert same, row.job
        stats = [e[row.direction] for e in same]
        assert row.io_bytes == sum(s["io_bytes"] for s in stats) > 0
        assert row.runtime_s == max(s["runtime"] for s in stats) / 1000
        if len(stats) == 1:  # fio's own figures
            assert row.bw_mbps * 1e6 == pytest.approx(stats[0]["bw_bytes"], rel=1e-12)
            assert row.iops == pytest.approx(stats[0]["iops"], rel=1e-12)
        else:  # merged: their I/O over the longest runtime (fio's group_reporting)
            assert row.bw_mbps * 1e6 * row.runtime_s == pytest.approx(row.io_bytes, rel=1e-12)
            assert row.iops * row.runtime_s == pytest.approx(sum(s["total_ios"] for s in stats), rel=1e-12)
        assert row.lat_max_us * 1000 == pytest.approx(max(s["lat_ns"]["max"] for s in stats))
        assert 0 < row.lat_p50_us <= row.lat_p99_us <= row.lat_p999_us
        assert row.lat_mean_us <= row.lat_max_us
        assert row.numjobs >= len(same) and row.iodepth >= 1 and row.bs >= 512


def test_plain_json_row_is_fio_own_numbers():
    frame = fioparse.parse_output(text("json_randread"))
    job = raw_doc("json_randread")["jobs"][0]
    read = job["read"]
    row = only(frame, direction="read")
    assert len(frame) == 1  # write and trim did no I/O: no rows
    assert (row.job, row.host, row.groupid, row.error) == ("randread", None, 0, None)
    assert (row.bs, row.iodepth, row.numjobs) == (4096, 8, 1)
    assert row.bw_mbps == read["bw_bytes"] / 1e6
    assert row.lat_mean_us == pytest.approx(read["lat_ns"]["mean"] / 1000, rel=1e-12)
    assert row.lat_p50_us == pct(read["lat_ns"], 50) / 1000
    assert row.lat_p99_us == pct(read["lat_ns"], 99) / 1000
    assert row.lat_p999_us == pct(read["lat_ns"], 99.9) / 1000
    assert (row.cpu_usr_pct, row.cpu_sys_pct) == (job["usr_cpu"], job["sys_cpu"])
    assert frame.attrs["percentile_source"] == "lat"
    assert str(frame["bs"].dtype) == "Int64" and str(frame["bw_mbps"].dtype) == "float64"


# --------------------------------------------------------------------------- what fio prints around JSON

def test_text_before_json_is_skipped_and_iodepth_is_as_written():
    output = text("psync_note")
    assert output.startswith("note: both iodepth >= 1 and synchronous I/O engine")
    row = only(fioparse.parse_output(output), direction="read")
    assert row.iodepth == 4  # the option as written; fio's note says psync caps it at 1
    assert row.io_bytes == raw_doc("psync_note")["jobs"][0]["read"]["io_bytes"]


def test_text_after_json_is_ignored():
    output = text("json_randread") + "\nfio: some trailing message\n"
    assert fioparse.parse_output(output).equals(fioparse.parse_output(text("json_randread")))


def test_status_interval_uses_the_last_document():
    output = text("status_interval")
    docs = raw_docs(output)
    assert len(docs) == 3 and fioparse.documents(output) == docs
    frame = fioparse.parse_output(output)
    row = only(frame, direction="read")
    assert frame.attrs["documents"] == 3
    final, first = docs[-1]["jobs"][0]["read"], docs[0]["jobs"][0]["read"]
    assert row.io_bytes == final["io_bytes"] > first["io_bytes"]
    assert row.runtime_s == final["runtime"] / 1000 > first["runtime"] / 1000


def test_truncated_last_document_falls_back_to_the_previous_one(caplog):
    output = text("status_interval")
    cut = output[: output.rindex("\n{\n") + len(output[output.rindex("\n{\n"):]) // 2]
    with caplog.at_level(logging.WARNING, logger="iolab.engine.fio.parse"):
        frame = fioparse.parse_output(cut)
    assert frame.attrs["truncated_tail"] is True
    assert only(frame, direction="read").io_bytes == raw_docs(output)[1]["jobs"][0]["read"]["io_bytes"]
    assert "incomplete JSON document" in caplog.text


def test_truncated_json_raises_with_context():
    output = text("psync_note")
    with pytest.raises(IolabError) as info:
        fioparse.parse_output(output[: len(output) // 2])
    assert info.value.context == "fio output"
    assert "truncated JSON" in info.value.message
    assert "note: both iodepth" in info.value.message  # the first line of the text


def test_no_json_raises_with_fios_own_message():
    stdout, stderr = text("bad_option"), text("bad_option", "err")
    assert exit_status("bad_option") == 1
    with pytest.raises(IolabError) as info:
        fioparse.parse_output(stdout + stderr)
    assert info.value.context == "fio output"
    assert "fio: failed parsing rw=bogus" in str(info.value)
    with pytest.raises(IolabError, match="valid values"):
        fioparse.parse_output(stdout)  # stdout alone holds only fio's list of values
    with pytest.raises(IolabError, match="empty output"):
        fioparse.parse_output("")


# --------------------------------------------------------------------------- json+ and percentiles

@pytest.mark.parametrize("name", ["jsonplus_randread", "numjobs4_jsonplus"])
def test_histogram_rule_reproduces_fio_percentiles_exactly(name):
    for job in raw_doc(name)["jobs"]:
        for kind in ("lat_ns", "clat_ns"):
            table = job["read"][kind]
            assert "bins" in table
            for key, value in table["percentile"].items():
                assert fioparse.percentile_from_bins(table["bins"], float(key)) == value
                assert hist_percentile(table["bins"], float(key)) == value


def test_numjobs_without_group_reporting_is_summed():
    doc = raw_doc("numjobs4")
    entries = [e for e in doc["jobs"] if e["jobname"] == "rand4"]
    assert len(entries) == 4 and len(doc["jobs"]) == 4
    reads = [e["read"] for e in entries]
    row = only(fioparse.parse_output(text("numjobs4")), direction="read")
    assert row.numjobs == 4
    longest = max(r["runtime"] for r in reads) / 1000
    assert row.bw_mbps == pytest.approx(sum(r["io_bytes"] for r in reads) / longest / 1e6, rel=1e-12)
    assert row.iops == pytest.approx(sum(r["total_ios"] for r in reads) / longest, rel=1e-12)
    # the four ran equally long: the same as the sum of their own rates (fio rounds bw_bytes down)
    assert row.bw_mbps == pytest.approx(sum(r["bw_bytes"] for r in reads) / 1e6, rel=1e-6)
    assert row.iops == pytest.approx(sum(r["iops"] for r in reads), rel=1e-6)
    assert row.io_bytes == sum(r["io_bytes"] for r in reads)
    assert row.runtime_s == max(r["runtime"] for r in reads) / 1000
    n = [r["lat_ns"]["N"] for r in reads]
    assert row.lat_mean_us * 1000 == pytest.approx(
        sum(r["lat_ns"]["mean"] * k for r, k in zip(reads, n)) / sum(n), rel=1e-12)
    assert row.lat_max_us * 1000 == max(r["lat_ns"]["max"] for r in reads)
    assert row.cpu_usr_pct == pytest.approx(sum(e["usr_cpu"] for e in entries))
    assert row.cpu_sys_pct == pytest.approx(sum(e["sys_cpu"] for e in entries))
    # no bins in plain json: sample-weighted mean of the jobs' percentiles
    for column, p in (("lat_p50_us", 50), ("lat_p99_us", 99), ("lat_p999_us", 99.9)):
        values = [pct(r["lat_ns"], p) for r in reads]
        expected = sum(v * k for v, k in zip(values, n)) / sum(n) / 1000
        assert row[column] == pytest.approx(expected, rel=1e-12)
        assert min(values) / 1000 <= row[column] <= max(values) / 1000


def test_jobs_that_end_apart_are_rated_over_the_longest_runtime():
    """Two jobs with one name, rate-limited to 1 MiB/s, reading 1 and 2 MiB: they end a second apart.
    The row's rate is their 3 MiB over the longer one's ~2 s (fio's group_reporting, tiotest's Rate), not
    the sum of their own ~1 MiB/s rates, which would say 2 MiB/s of a test that moved 3 MiB in 2 s."""
    reads = [e["read"] for e in raw_doc("numjobs_uneven")["jobs"]]
    assert len(reads) == 2 and reads[0]["runtime"] < 0.75 * reads[1]["runtime"]  # they did end apart
    row = only(fioparse.parse_output(text("numjobs_uneven")), direction="read")
    assert row.io_bytes == 3 * 1024**2 and row.numjobs == 2
    assert row.runtime_s == reads[1]["runtime"] / 1000
    assert row.bw_mbps * 1e6 * row.runtime_s == pytest.approx(row.io_bytes, rel=1e-9)
    assert row.iops * row.runtime_s == pytest.approx(sum(r["total_ios"] for r in reads), rel=1e-9)
    assert row.bw_mbps < 0.8 * sum(r["bw_bytes"] for r in reads) / 1e6  # the sum of rates overstates it


def test_numjobs_json_plus_merges_histograms_exactly():
    reads = [e["read"] for e in raw_doc("numjobs4_jsonplus")["jobs"]]
    assert len(reads) == 4
    merged: dict[str, int] = {}
    for read in reads:
        for value, count in read["lat_ns"]["bins"].items():
            merged[value] = merged.get(value, 0) + count
    assert sum(merged.values()) == sum(r["lat_ns"]["N"] for r in reads)
    row = only(fioparse.parse_output(text("numjobs4_jsonplus")), direction="read")
    for column, p in (("lat_p50_us", 50), ("lat_p99_us", 99), ("lat_p999_us", 99.9)):
        assert row[column] * 1000 == hist_percentile(merged, p)
        values = [pct(r["lat_ns"], p) for r in reads]
        assert min(values) <= row[column] * 1000 <= max(values)


def test_group_reporting_entry_gives_the_same_quantities():
    doc = raw_doc("numjobs4_group_reporting")
    assert len(doc["jobs"]) == 1 and doc["jobs"][0]["job options"]["numjobs"] == "4"
    job = doc["jobs"][0]
    row = only(fioparse.parse_output(text("numjobs4_group_reporting")), direction="read")
    assert row.numjobs == 4
    assert row.io_bytes == job["read"]["io_bytes"]
    assert row.lat_p99_us == pct(job["read"]["lat_ns"], 99) / 1000
    # fio prints the jobs' mean CPU here; the row holds the sum, as for numjobs4
    assert row.cpu_sys_pct == pytest.approx(4 * job["sys_cpu"])
    summed = only(fioparse.parse_output(text("numjobs4")), direction="read")
    assert row.cpu_sys_pct == pytest.approx(summed.cpu_sys_pct, rel=0.5)  # same workload


def test_clat_percentiles_are_used_without_lat_percentiles():
    read = raw_doc("clat_only")["jobs"][0]["read"]
    assert "percentile" not in read["lat_ns"] and "percentile" in read["clat_ns"]
    frame = fioparse.parse_output(text("clat_only"))
    row = only(frame, direction="read")
    assert row.lat_p50_us == pct(read["clat_ns"], 50) / 1000
    assert row.lat_p999_us == pct(read["clat_ns"], 99.9) / 1000
    assert row.lat_mean_us == pytest.approx(read["lat_ns"]["mean"] / 1000, rel=1e-12)
    assert frame.attrs["percentile_source"] == "clat"


# --------------------------------------------------------------------------- several rows

def test_randrw_gives_a_row_per_direction_with_its_block_size():
    job = raw_doc("randrw_mix")["jobs"][0]
    frame = fioparse.parse_output(text("randrw_mix"))
    assert list(frame.direction) == ["read", "write"]
    assert list(frame.bs) == [4096, 16384]  # bs=4k,16k
    for _, row in frame.iterrows():
        assert row.io_bytes == job[row.direction]["io_bytes"] > 0
        assert row.lat_p99_us == pct(job[row.direction]["lat_ns"], 99) / 1000
        assert row.cpu_usr_pct == job["usr_cpu"]  # a job's CPU covers both directions


def test_stonewalled_groups_are_separate_rows():
    doc = raw_doc("stonewall_groups")
    assert doc["global options"]["ioengine"] == "libaio"
    frame = fioparse.parse_output(text("stonewall_groups"))
    assert list(zip(frame.job, frame.groupid, frame.direction)) == [
        ("seqwrite", 0, "write"), ("randread", 1, "read")]
    assert list(frame.bs) == [1024 * 1024, 4096]
    assert list(frame.iodepth) == [4, 16]
    for (_, row), job in zip(frame.iterrows(), doc["jobs"]):
        assert row.io_bytes == job[row.direction]["io_bytes"]


def test_trim_rows():
    job = raw_doc("trimwrite_loop")["jobs"][0]
    frame = fioparse.parse_output(text("trimwrite_loop"))
    assert list(frame.direction) == ["write", "trim"]
    assert only(frame, direction="trim").io_bytes == job["trim"]["io_bytes"] == 16 * 2**20


def test_client_server_rows_per_host_without_the_aggregate():
    doc = raw_doc("client_server")
    names = [e["jobname"] for e in doc["client_stats"]]
    assert "All clients" in names and "jobs" not in doc
    frame = fioparse.parse_output(text("client_server"))
    assert sorted(frame.host) == ["127.0.0.1", "127.0.0.2"]
    assert "All clients" not in set(frame.job)
    for _, row in frame.iterrows():
        entry = next(e for e in doc["client_stats"] if e["hostname"] == row.host
                     and e["jobname"] == row.job)
        assert row.io_bytes == entry["read"]["io_bytes"]
        assert row.bs == 4096 and row.iodepth == 4
    aggregate = next(e for e in doc["client_stats"] if e["jobname"] == "All clients")
    assert frame.io_bytes.sum() == aggregate["read"]["io_bytes"]


# --------------------------------------------------------------------------- errors

def test_enospc_keeps_the_data_and_records_the_error():
    output = text("enospc_tmpfs")
    assert exit_status("enospc_tmpfs") == 1
    assert re.search(r"fio: pid=\d+, err=28/", output)
    job = raw_doc("enospc_tmpfs")["jobs"][0]
    assert job["error"] == 28
    row = only(fioparse.parse_output(output), direction="write")
    assert row.io_bytes == job["write"]["io_bytes"] > 0
    assert row.error.startswith("errno 28 (ENOSPC): No space left on device")
    assert "io_u error" in row.error
    assert row.bw_mbps > 0 and not math.isnan(row.lat_p99_us)


def test_job_that_failed_before_io_still_gives_a_row():
    job = raw_doc("failed_open")["jobs"][0]
    assert job["error"] == 2 and exit_status("failed_open") == 1
    assert all(job[d]["io_bytes"] == 0 for d in DIRECTIONS)
    frame = fioparse.parse_output(text("failed_open"))
    row = only(frame, job="noopen")
    assert row.direction is None and math.isnan(row.bw_mbps) and math.isnan(row.lat_p99_us)
    assert row.error.startswith("errno 2 (ENOENT): No such file or directory")
    assert "/proc/iolab-no-such-file" in row.error  # from fio's "fio: pid=..." line


def test_error_line_on_stderr_is_matched_when_given():
    stdout, stderr = text("layout_failed"), text("layout_failed", "err")
    assert "err=1/" in stderr and "fio: pid=" not in stdout
    alone = only(fioparse.parse_output(stdout), job="nolayout")
    both = only(fioparse.parse_output(stdout + stderr), job="nolayout")
    assert alone.error == "errno 1 (EPERM): Operation not permitted"
    assert both.error.startswith(alone.error) and "func=unlink" in both.error


def test_error_without_any_job_entry_is_not_lost():
    # Edge case fio 3.33 did not produce here: an error line but no job entry at all.
    # Derived from the real failed_open output by emptying its "jobs" list.
    output = text("failed_open")
    start = output.index("\n{\n") + 1
    doc = raw_doc("failed_open")
    doc["jobs"] = []
    frame = fioparse.parse_output(output[:start] + json.dumps(doc, indent=2) + "\n")
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row.job is None and row.direction is None and row.error.startswith("errno 2 (ENOENT)")
    doc_no_error = fioparse.parse_output(json.dumps(doc))
    assert len(doc_no_error) == 0 and list(doc_no_error.columns) == PARSE_COLUMNS


def test_error_lines_are_parsed():
    (line,) = fioparse.error_lines(text("enospc_tmpfs"))
    assert (line.errno, line.func, line.message) == (28, "io_u error", "No space left on device")
    assert line.file.startswith("io_u.c:")


def test_parse_file_names_the_file(tmp_path):
    frame = fioparse.parse_file(FIXTURES / "json_randread.out")
    assert frame.equals(fioparse.parse_output(text("json_randread")))
    with pytest.raises(IolabError) as info:
        fioparse.parse_file(FIXTURES / "bad_option.out")
    assert "bad_option.out" in info.value.context
    with pytest.raises(IolabError, match="cannot read"):
        fioparse.parse_file(tmp_path / "missing.out")


# --------------------------------------------------------------------------- fio's size rules

FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed")


def fio_block_sizes(*options: str) -> dict[str, int]:
    """What fio itself makes of the options: its 'bs=(R) ..., (W) ..., (T) ...' line."""
    out = subprocess.run([FIO, "--name=x", "--ioengine=null", "--size=1m", "--rw=randrw",
                          *options], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    found = re.findall(r"\((R|W|T)\) ([\d.]+)(B|KiB|MiB)-", out)
    assert len(found) == 3, out
    unit = {"B": 1, "KiB": 1024, "MiB": 1024**2}
    return {dict(R="read", W="write", T="trim")[d]: round(float(v) * unit[u]) for d, v, u in found}


@needs_fio
@pytest.mark.parametrize("options", [
    ["--bs=4k"], ["--bs=4KiB"], ["--bs=4kB"], ["--bs=4KB"], ["--bs=1m"], ["--bs=512"],
    ["--bs=8k,16k"], ["--bs=,8k"], ["--bs=8k,16k,"], ["--bs=0x1000"],
    ["--kb_base=1000", "--bs=4KiB"], ["--kb_base=1000", "--bs=4kB,2k"],
])
def test_block_sizes_agree_with_fio(options):
    parsed = dict(o[2:].split("=", 1) for o in options)
    assert fioparse.block_sizes(parsed) == fio_block_sizes(*options)


# --------------------------------------------------------------------------- live

@needs_fio
def test_live_fio_run_is_parsed(tmp_path):
    argv = [FIO, "--name=live", f"--filename={tmp_path / 'f'}", "--size=8m", "--rw=randread",
            "--bs=4k", "--ioengine=psync", "--runtime=1", "--time_based", "--lat_percentiles=1",
            "--output-format=json+"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    read = raw_docs(proc.stdout)[-1]["jobs"][0]["read"]
    frame = fioparse.parse_output(proc.stdout)
    row = only(frame, job="live", direction="read")
    assert row.io_bytes == read["io_bytes"] > 0 and row.error is None
    assert row.bw_mbps * 1e6 == pytest.approx(read["bw_bytes"], rel=1e-12)
    assert row.lat_p99_us * 1000 == pct(read["lat_ns"], 99)
    assert row.lat_p99_us * 1000 == hist_percentile(read["lat_ns"]["bins"], 99)
    assert 0.5 <= row.runtime_s <= 1.5
