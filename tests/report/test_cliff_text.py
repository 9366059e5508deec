"""The write-cliff finding in en and ja, from the columns a sustained-write run writes (no fio)."""
import pandas as pd
import pytest

from iolab.report import cliff_text


def rows(**extra):
    base = {"test": "sustained", "label": "consumer SSD", "io_bytes": 224 * 2**20, "cliff_found": True,
            "burst_mbps": 49.9, "cliff_bytes": 171_300_000, "cliff_s": 3.43, "after_mbps": 9.97,
            "cliff_drop": 0.80, "recovery_mbps": 51.2, "recovery_fraction": 1.03, "recovered": True, "idle_s": 4.04}
    return pd.DataFrame([{**base, **extra}, {"test": "recovery", "label": "consumer SSD", "bw_mbps": 51.2}])


def test_the_cliff_in_english():
    (said,) = cliff_text.sentences(rows(), "en")
    assert said.startswith("**consumer SSD**: writes at 49.9 MB/s for the first 163.4 MiB (3.43 s), "
                           "then falls to 9.97 MB/s, 80% slower")
    assert "After 4 s idle it wrote at 51.2 MB/s again" in said and "(100% of the way)" in said


def test_the_cliff_in_japanese():
    (said,) = cliff_text.sentences(rows(recovered=False, recovery_fraction=0.2, recovery_mbps=18.0), "ja")
    assert "49.9 MB/秒" in said and "9.97 MB/秒" in said and "80%低下" in said
    assert "回復していない" in said and "18.0 MB/秒" in said and "。 " not in said


@pytest.mark.parametrize("lang, words", [("en", "no write cliff"), ("ja", "書き込みの崖はない")])
def test_no_cliff_and_no_finding(lang, words):
    (said,) = cliff_text.sentences(rows(cliff_found=False, after_mbps=None, cliff_bytes=None), lang)
    assert words in said and "224 MiB" in said
    frame = rows(cliff_found=None, cliff_error="cliff series: 0 samples")
    assert "0 samples" in cliff_text.sentences(frame, lang)[0]


def test_a_run_without_the_finding_says_nothing():
    assert cliff_text.sentences(pd.DataFrame([{"test": "SEQ1M", "bw_mbps": 5.0}]), "en") == []
