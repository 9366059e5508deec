"""fio output beyond the contract columns: tiotest's slow-I/O shares, per-client fairness."""
import json
from pathlib import Path

import pytest

from iolab.engine.fio.spread import latency_over
from iolab.engine.fio.text import documents
import cli_helpers

FIXTURES = cli_helpers.FIXTURES / "fio"


def test_share_over_threshold_matches_the_histogram():
    text = (FIXTURES / "jsonplus_randread.out").read_text()
    bins = documents(text)[-1]["jobs"][0]["read"]["lat_ns"]["bins"]
    total = sum(bins.values())
    expected = 100.0 * sum(c for v, c in bins.items() if int(v) > 100_000) / total
    shares = latency_over(text, (0.0001, 2))
    row = shares.iloc[0]
    assert row["job"] == "randread" and row["direction"] == "read"
    assert row["over_0.0001s_pct"] == pytest.approx(expected)
    assert 0 < row["over_0.0001s_pct"] < 100
    assert row["over_2s_pct"] == 0


def test_entries_of_one_job_are_added_and_plain_json_gives_nothing():
    text = (FIXTURES / "numjobs4_jsonplus.out").read_text()
    entries = [j for j in documents(text)[-1]["jobs"] if j["read"]["io_bytes"]]
    assert len(entries) == 4
    shares = latency_over(text, (0.00005,))
    merged = {}
    for entry in entries:
        for value, count in entry["read"]["lat_ns"]["bins"].items():
            merged[int(value)] = merged.get(int(value), 0) + count
    expected = 100.0 * sum(c for v, c in merged.items() if v > 50_000) / sum(merged.values())
    assert len(shares) == 1 and shares["over_5e-05s_pct"].iloc[0] == pytest.approx(expected)
    assert latency_over((FIXTURES / "json_randread.out").read_text()).empty


def test_client_fairness_from_per_client_entries():
    from iolab.engine.fio.spread import client_fairness
    text = (FIXTURES / "numjobs4.out").read_text()
    clients = [j["read"]["bw_bytes"] / 1e6 for j in documents(text)[-1]["jobs"] if j["read"]["io_bytes"]]
    row = client_fairness(text).iloc[0]
    assert row["clients"] == 4
    assert row["jain_index"] == pytest.approx(sum(clients) ** 2 / (4 * sum(c * c for c in clients)))
    assert row["client_min_mbps"] == pytest.approx(min(clients))
    # with group_reporting fio merged the clients itself: nothing to say about fairness
    assert client_fairness((FIXTURES / "numjobs4_group_reporting.out").read_text()).empty


@pytest.mark.skipif(__import__("shutil").which("fio") is None, reason="fio is not installed")
def test_two_servers_on_one_address_are_two_hosts(servers, tmp_path):
    """fio names a client by its address only: the port tells two loopback servers apart."""
    import subprocess

    from iolab.engine.fio.parse import parse_output
    a, b = servers(port=0, writable=[tmp_path]), servers(port=0, writable=[tmp_path])
    job = tmp_path / "job.fio"
    job.write_text(f"[r]\nfilename={tmp_path}/f\nsize=4m\nrw=randread\nbs=4k\nruntime=1\ntime_based\n")
    out = subprocess.run(["fio", "--output-format=json", f"--client={a.endpoint.client_spec}", str(job),
                          f"--client={b.endpoint.client_spec}", str(job)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    frame = parse_output(out.stdout)
    assert len(frame) == 2 and frame["host"].nunique() == 2
    assert all(host.startswith("127.0.0.1:") for host in frame["host"])
    assert (frame["numjobs"] == 1).all() and (frame["iops"] > 0).all()
