"""The one reader of fio's time-series logs, against logs fio 3.33 wrote (tests/fixtures/fio/time_logs.*)."""
import json
from pathlib import Path

import pytest

from iolab.analysis.cliff import parse_bw_log
from iolab.analysis.fiolog import FIO_LOG_UNIT, read_log
from iolab.core.errors import IolabError

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio"


def job() -> dict:
    return json.loads((FIO / "time_logs.out").read_text())["jobs"][0]


@pytest.mark.parametrize("kind, figure", [("bw", lambda side: side["bw"]), ("lat", lambda side: side["lat_ns"]["mean"])])
def test_the_samples_average_to_what_fio_reported_for_the_job(kind, figure):
    """randrw 70/30, 250 ms averages over 2 s: each direction's samples (KiB/s, ns) average within 5% of the
    job's own figure in the JSON of the same run."""
    frame = read_log((FIO / f"time_logs.cap_{kind}.1.log").read_text())
    assert list(frame.columns) == ["t_s", "value", "direction"] and set(frame["direction"]) == {"read", "write"}
    for direction, samples in frame.groupby("direction"):
        assert samples["t_s"].is_monotonic_increasing and samples["t_s"].iloc[0] == pytest.approx(0.25, abs=0.01)
        assert samples["value"].mean() == pytest.approx(figure(job()[direction]), rel=0.05)


def test_the_cliff_reader_is_the_same_reader_in_bytes_per_second():
    text = (FIO / "time_logs.cap_bw.1.log").read_text()
    times, rates = parse_bw_log(text)
    frame = read_log(text)
    assert times == frame["t_s"].tolist() and rates == (frame["value"] * FIO_LOG_UNIT).tolist()


def test_a_line_that_is_not_fio_s_is_refused_naming_it():
    good = (FIO / "time_logs.cap_bw.1.log").read_text().splitlines()[0]
    with pytest.raises(IolabError, match=r"raw/x_bw.1.log line 2: not a fio log line: 'fio: oops'"):
        read_log(f"{good}\nfio: oops\n", context="raw/x_bw.1.log")
