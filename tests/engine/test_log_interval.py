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
    assert repr(value) in str(caught.value)
    assert str(caught.value).startswith("run option --log-interval: ")  # named as every run option is


def test_bad_interval_refused_by_the_cli(tmp_path):
    proc = subprocess.run(IOLAB + ["run", "quick", "--target", str(tmp_path), "--log-interval", "0",
                                   "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode != 0 and "--log-interval '0'" in proc.stderr
    assert not (tmp_path / "data").exists()  # refused before a run directory exists


def test_engines_with_own_logs_refused():
    with pytest.raises(IolabError, match="^run option --log-interval: .*sustained"):
        timelogs.applied(recipes.load("sustained-write"), "200")


FIO_PLOT = ROOT / ".venv" / "bin" / "fio-plot"


@needs_fio
def test_fio_plot_export_has_the_logs_under_bench_fio_names(logged_run, tmp_path):
    from iolab.interop import exports
    out = tmp_path / "export"
    exports.export(logged_run, out, fmt="fio-plot")
    for folder in ("pass-1", "best"):
        for rw in ("read", "write"):
            for kind in ("bw", "iops", "lat"):
                assert (out / folder / "1m" / f"{rw}-iodepth-8-numjobs-1_{kind}.1.log").stat().st_size > 0
    if not FIO_PLOT.exists():
        pytest.skip("fio-plot is not installed (the test extra)")
    proc = subprocess.run([str(FIO_PLOT), "-i", str(out / "best" / "1m"), "-g", "-r", "write", "-d", "8", "-n", "1",
                           "-t", "bw", "-T", "logged", "-o", str(tmp_path / "logged")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    image = tmp_path / "logged.png"
    assert image.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_fio
def test_report_draws_the_over_time_chart(logged_run, tmp_path):
    from iolab.report import notebooks, overtime
    page = notebooks.report([logged_run], lang="en", out=tmp_path / "en")
    markdown = page.markdown.read_text(encoding="utf-8")
    for step in ("SEQ1M-Q8T1 read", "SEQ1M-Q8T1 write"):
        assert f"{step} over time: MB/s" in markdown, markdown[-3000:]
    # en and ja captions from the locale; one chart per test, a line per system (one pass here)
    import matplotlib
    import matplotlib.pyplot as plt
    from iolab.report import plot
    selection = notebooks.select(None, [logged_run])
    with matplotlib.rc_context({"font.family": plot.font_families("ja")}):  # Japanese labels, this test only
        figures = overtime.figures(selection.results, lang="ja")
    try:
        assert len(figures) == 2 and all("速度の推移" in f.caption for f in figures)
        assert [len(f.axes[0].lines) for f in figures] == [1, 1]
    finally:
        for figure in figures:
            plt.close(figure.figure)


def test_no_logs_no_chart():
    import pandas as pd
    from iolab.report import overtime
    assert overtime.figures(pd.DataFrame({"run_dir": [], "system": []})) == []
