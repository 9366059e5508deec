"""``iolab export`` of a ``--simultaneous`` run (one fio per pass, one job per target, a total row per pass):
fio-plot gets each target's own job in its folder and the whole pass in ``total-<a+b>``, and the real fio-plot
draws both; the CrystalDiskMark text is one file per drive, never the total, and reads back with each
drive's own best pass. The run is a stored run made simultaneous as the engine writes one
(tests/interop/simultaneous_run.py); the last test measures a real one (fio, root)."""
import json
import logging
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from iolab.engine import store
from iolab.interop import cdmtext, exports, imports

import simultaneous_run
from cli_helpers import ROOT, iolab_cli, needs_fio, needs_root
from simultaneous_run import TARGETS, TOTAL

FIO_PLOT = ROOT / ".venv" / "bin" / "fio-plot"
TOTAL_DIR = f"total-{TOTAL}"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return simultaneous_run.build(tmp_path_factory.mktemp("simultaneous"))


@pytest.fixture(scope="module")
def results(run_dir):
    rows = pd.read_csv(run_dir / "results.csv")
    assert set(rows["target"]) == {*TARGETS, TOTAL} and set(rows["simultaneous"]) == {"target", "total"}
    return rows


def _best_rep(rows, target, job):
    mine = rows[(rows["target"] == target) & (rows["job"] == job)]
    return int(mine.loc[mine["bw_mbps"].idxmax(), "rep"])


def _jobs(path: Path) -> list[str]:
    return [job["jobname"] for job in json.loads(path.read_text())["jobs"]]


def test_fio_plot_folders_per_target_hold_their_own_job_and_best(run_dir, results, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="iolab.interop.exports"):
        written = exports.export(run_dir, tmp_path, fmt="fio-plot")
    folders = {p.relative_to(tmp_path).parts[0] for p in written}
    assert folders == {*TARGETS, TOTAL_DIR}
    assert any(TOTAL_DIR in r.getMessage() and "unweighted" in r.getMessage() for r in caplog.records)
    for target in TARGETS:
        names = sorted(p.relative_to(tmp_path / target).as_posix() for p in (tmp_path / target).rglob("*.json"))
        assert names == sorted(f"{folder}/{bs}/{rw}-{qd}-1.json" for folder in ("best", "pass-1", "pass-2", "pass-3")
                               for bs, rw, qd in (("1048576", "read", 8), ("1048576", "write", 8),
                                                  ("1048576", "read", 1), ("1048576", "write", 1),
                                                  ("4096", "randread", 32), ("4096", "randwrite", 32),
                                                  ("4096", "randread", 1), ("4096", "randwrite", 1)))
        for path in (tmp_path / target).rglob("*.json"):
            assert [name.rpartition("@")[2] for name in _jobs(path)] == [target]
        for job, rw, qd in (("SEQ1M-Q8T1-read", "read", 8), ("RND4K-Q1T1-write", "randwrite", 1)):
            rep = _best_rep(results, target, job)
            best = json.loads((tmp_path / target / "best" / ("1048576" if qd == 8 else "4096") /
                               f"{rw}-{qd}-1.json").read_text())
            row = results[(results["target"] == target) & (results["job"] == job) & (results["rep"] == rep)].iloc[0]
            direction = "read" if rw.endswith("read") else "write"
            assert best["jobs"][0]["jobname"] == f"{job}@{target}"
            assert best["jobs"][0][direction]["bw_bytes"] == int(row["bw_mbps"] * 1e6)
    # the targets' best passes differ (the second target's figures are the next pass's), each is its own
    assert _best_rep(results, TARGETS[0], "SEQ1M-Q8T1-read") != _best_rep(results, TARGETS[1], "SEQ1M-Q8T1-read")


def test_fio_plot_total_folder_holds_each_whole_pass_and_the_best_total(run_dir, results, tmp_path):
    exports.export(run_dir, tmp_path, fmt="fio-plot")
    total = tmp_path / TOTAL_DIR
    for path in total.rglob("*.json"):
        assert sorted(name.rpartition("@")[2] for name in _jobs(path)) == sorted(TARGETS)
    rep = _best_rep(results, TOTAL, "SEQ1M-Q8T1-read")
    best = json.loads((total / "best" / "1048576" / "read-8-1.json").read_text())
    summed = sum(job["read"]["bw_bytes"] for job in best["jobs"])
    row = results[(results["target"] == TOTAL) & (results["job"] == "SEQ1M-Q8T1-read") & (results["rep"] == rep)]
    assert summed == pytest.approx(row.iloc[0]["bw_mbps"] * 1e6, abs=2)
    readme = (tmp_path / "README.txt").read_text()
    assert f"{TOTAL_DIR}/ holds each pass's whole fio JSON" in readme and "weights them by IOPS" in readme


@pytest.mark.skipif(not FIO_PLOT.exists(), reason="fio-plot is not installed (the test extra)")
@pytest.mark.parametrize("folder", [TARGETS[1], TOTAL_DIR])
def test_the_real_fio_plot_draws_a_target_and_the_total(run_dir, tmp_path, folder):
    out = tmp_path / "export"
    exports.export(run_dir, out, fmt="fio-plot")
    passes = [str(out / folder / f"pass-{n}" / "4096") for n in (1, 2, 3)]
    for args, name in ((["-i", str(out / folder / "best" / "4096"), "-l", "-r", "randread", "-d", "1", "32"], "best"),
                       (["-i", *passes, "-C", "-r", "randwrite", "-d", "32"], "passes")):
        proc = subprocess.run([str(FIO_PLOT), *args, "-T", name, "-n", "1", "-o", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        image = tmp_path / f"{name}.png"
        assert image.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.stat().st_size > 10_000


def test_cdm_text_is_one_file_per_drive_never_the_total(run_dir, results, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="iolab.interop.exports"):
        written = exports.export(run_dir, tmp_path / "txt", fmt="cdm-text")
    assert sorted(p.name for p in written) == sorted(f"{run_dir.name}-{t}.txt" for t in TARGETS)
    assert any(TOTAL in r.getMessage() and "left out" in r.getMessage() for r in caplog.records)
    for path, target in zip(sorted(written), sorted(TARGETS)):
        text = path.read_text()
        other = next(t for t in TARGETS if t != target)
        assert f"* Measured at the same time as {other} (iolab run --simultaneous);" in text
        assert TOTAL not in text and f"[/srv/bench/{target}]" in text
        parsed = cdmtext.parse(text)
        assert len(parsed.rows) == 8
        (back,) = imports.import_paths([path], data_dir=tmp_path / f"d-{target}")
        again = store.load(back)
        mine = results[results["target"] == target]
        best = mine.loc[mine.groupby("job")["bw_mbps"].idxmax()].set_index(["test", "direction"])
        for _, got in again.iterrows():
            want = best.loc[(got["test"], got["direction"]), "bw_mbps"]
            assert got["bw_mbps"] == pytest.approx(want, abs=1e-3)  # the text holds 3 decimals


def test_cdm_text_of_an_ordinary_run_has_no_simultaneous_line(tmp_path):
    (path,) = exports.export(simultaneous_run.SOURCE, tmp_path, fmt="cdm-text")
    assert "Measured at the same time" not in path.read_text()


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory):
    """A real crystaldiskmark run of RND4K-Q1T1 on two directories at once (warm-up + 2 passes)."""
    first, second = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    data = tmp_path_factory.mktemp("data")
    proc = iolab_cli("run", "crystaldiskmark", "--target", first, "--target", second, "--simultaneous",
                     "--size", "8M", "--runtime", "0.5", "--pause", "0", "--repeat", "2", "--tests", "RND4K-Q1T1",
                     "--data", data, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@needs_fio
@needs_root
def test_a_measured_simultaneous_run_exports_per_target_and_total(measured_run, tmp_path):
    manifest = store.read_manifest(measured_run)
    names, total = manifest["simultaneous"]["targets"], manifest["simultaneous"]["total"]
    written = exports.export(measured_run, tmp_path / "plot", fmt="fio-plot")
    assert {p.relative_to(tmp_path / "plot").parts[0] for p in written} == {*names, f"total-{total}"}
    for name in names:
        for path in (tmp_path / "plot" / name).rglob("*.json"):
            assert [j.rpartition("@")[2] for j in _jobs(path)] == [name]
    texts = exports.export(measured_run, tmp_path / "txt", fmt="cdm-text")
    assert sorted(p.name for p in texts) == sorted(f"{measured_run.name}-{n}.txt" for n in names)
    if FIO_PLOT.exists():
        out = tmp_path / "total"
        (best,) = (tmp_path / "plot" / f"total-{total}" / "best").iterdir()  # the one block size's folder
        proc = subprocess.run([str(FIO_PLOT), "-i", str(best), "-l",
                               "-r", "randread", "-d", "1", "-n", "1", "-T", "t", "-o", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert (tmp_path / "total.png").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
