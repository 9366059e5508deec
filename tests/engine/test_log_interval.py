"""``iolab run --log-interval MS``: fio's bw/iops/lat logs of every pass kept in raw/, in the manifest,
drawn over time in the report, copied by the fio-plot export; bad intervals refused."""
import json
import subprocess
from pathlib import Path

import pytest

from iolab.core.errors import IolabError
from iolab.engine import recipes, timelogs

from cli_helpers import IOLAB, ROOT, needs_fio

TESTS = ("SEQ1M-Q8T1-read", "SEQ1M-Q8T1-write")


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """One short real run: one quick test (read and write), 1 s each, a sample every 200 ms."""
    target = tmp_path_factory.mktemp("target")
    data = tmp_path_factory.mktemp("data")
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(target), "--size", "16M", "--runtime", "1",
                                   "--tests", "SEQ1M-Q8T1", "--log-interval", "200", "--label", "logged",
                                   "--data", str(data), "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


@needs_fio
def test_logs_kept_per_test_and_pass(logged_run):
    manifest = json.loads((logged_run / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    assert manifest["options"]["log_interval_ms"] == 200
    raw = logged_run / "raw"
    for step in TESTS:
        for kind in timelogs.KINDS:
            assert (raw / f"{step}-1_{kind}.1.log").stat().st_size > 0, (step, kind)
        assert not (raw / f"{step}_bw.1.log").exists()  # renamed to the pass's name
        samples = (raw / f"{step}-1_bw.1.log").read_text().splitlines()
        assert 3 <= len(samples) <= 7, samples  # 1 s at 200 ms: about 5
        assert "log_avg_msec=200" in (logged_run / "jobs" / f"{step}.fio").read_text()
    series = timelogs.bandwidth_series(logged_run)
    assert set(series["step"]) == set(TESTS) and (series["mbps"] > 0).all()


@pytest.mark.parametrize("value", ["0", "-200", "1.5", "fast"])
def test_bad_interval_refused(value):
    with pytest.raises(IolabError) as caught:
        timelogs.interval_ms(value)
    assert repr(value) in str(caught.value) and "--log-interval" in str(caught.value)


def test_bad_interval_refused_by_the_cli(tmp_path):
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(tmp_path), "--log-interval", "0",
                                   "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode != 0 and "--log-interval '0'" in proc.stderr
    assert not (tmp_path / "data").exists()  # refused before a run directory exists


def test_engines_with_own_logs_refused():
    with pytest.raises(IolabError, match="sustained"):
        timelogs.applied(recipes.load("sustained-write"), "200")
