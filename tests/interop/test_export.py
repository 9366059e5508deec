"""iolab export of a real 5-pass CrystalDiskMark run (warm-up + 5 passes, as the recipe writes raw/):
the real fio-plot (PyPI) draws its fio-plot layout, and its CrystalDiskMark text reads back through
iolab import with the figures of the best pass (or the mean)."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import iolab
from iolab.engine import store
from iolab.interop import exports, imports

from cli_helpers import FIXTURES, ROOT, cli_main, iolab_cli, needs_fio, needs_root

FIO_PLOT = ROOT / ".venv" / "bin" / "fio-plot"
FIXTURE_RUN = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a"


@pytest.fixture(scope="module")
def cdm_run(tmp_path_factory):
    """A real crystaldiskmark run of one test (RND4K-Q1T1: randread and randwrite), warm-up + 5 passes."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    target = tmp_path_factory.mktemp("target")
    data = tmp_path_factory.mktemp("data")
    proc = iolab_cli("run", "crystaldiskmark", "--target", target, "--size", "8M", "--runtime", "0.5",
                     "--pause", "0", "--tests", "RND4K-Q1T1", "--data", data, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert sorted(p.name for p in target.iterdir()) == []  # the run's files are gone
    return run_dir


@pytest.fixture(scope="module")
def fio_plot_tree(cdm_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("fio-plot")
    written = exports.export(cdm_run, out, fmt="fio-plot")
    return out, written


@needs_fio
@needs_root
def test_one_folder_per_pass_and_the_best_in_bench_fio_names(cdm_run, fio_plot_tree):
    out, written = fio_plot_tree
    assert [p.relative_to(out).as_posix() for p in written] == [
        "best/4k", "pass-1/4k", "pass-2/4k", "pass-3/4k", "pass-4/4k", "pass-5/4k", "warmup/4k"]
    for folder in written:
        assert sorted(p.name for p in folder.iterdir()) == ["randread-1-1.json", "randwrite-1-1.json"]
    rows = iolab.load(cdm_run)
    for rw, direction in (("randread", "read"), ("randwrite", "write")):
        best_rep = int(rows[rows["direction"] == direction].sort_values("bw_mbps").iloc[-1]["rep"])
        raw = json.loads((cdm_run / "raw" / f"RND4K-Q1T1-{rw}-{best_rep}.json").read_text())
        best = json.loads((out / "best" / "4k" / f"{rw}-1-1.json").read_text())
        assert {k: v for k, v in best["jobs"][0].items() if k != "job options"} == \
            {k: v for k, v in raw["jobs"][0].items() if k != "job options"}
        options = best["jobs"][0]["job options"]
        assert options["rw"] == rw and options["iodepth"] == "1" and options["numjobs"] == "1"


def test_job_options_are_completed_with_fio_defaults_only_where_missing():
    doc, first = exports._completed({"fio version": "fio-3.33", "global options": {"bs": "1M"},
                                     "jobs": [{"jobname": "a", "job options": {"rw": "randread"}}]})
    assert doc["jobs"][0]["job options"] == {"rw": "randread", "iodepth": "1", "numjobs": "1"}
    assert first == {"bs": "1M", "rw": "randread", "iodepth": "1", "numjobs": "1"}


@needs_fio
@needs_root
@pytest.mark.skipif(not FIO_PLOT.exists(), reason="fio-plot is not installed (the test extra)")
def test_the_real_fio_plot_draws_the_export(fio_plot_tree, tmp_path):
    out, _ = fio_plot_tree
    passes = [str(out / f"pass-{n}" / "4k") for n in range(1, 6)]
    for args, name in ((["-i", str(out / "best" / "4k"), "-l", "-r", "randread"], "best-randread"),
                       (["-i", *passes, "-C", "-r", "randwrite"], "passes-randwrite")):
        proc = subprocess.run([str(FIO_PLOT), *args, "-T", name, "-d", "1", "-n", "1", "-o", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        image = tmp_path / f"{name}.png"
        assert image.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.stat().st_size > 10_000


@needs_fio
@needs_root
def test_cdm_text_of_a_real_run_reads_back_with_the_best_pass(cdm_run, tmp_path):
    (text,) = exports.export(cdm_run, tmp_path / "txt", fmt="cdm-text")
    (back,) = imports.import_paths([text], data_dir=tmp_path / "d")
    manifest = store.read_manifest(back)
    assert manifest["imported"]["source_run"] == cdm_run.name and manifest["imported"]["statistic"] == "best"
    assert manifest["options"]["repeat"] == 5
    rows, again = iolab.load(cdm_run), iolab.load(back)
    assert sorted(again["direction"]) == ["read", "write"] and set(again["test"]) == {"RND4K-Q1T1"}
    for direction in ("read", "write"):
        best = rows[rows["direction"] == direction].sort_values("bw_mbps").iloc[-1]
        got = again[again["direction"] == direction].iloc[0]
        assert (got["bs"], got["iodepth"], got["numjobs"]) == (4096, 1, 1)
        assert got["bw_mbps"] == pytest.approx(best["bw_mbps"], abs=0.0005)
        assert got["iops"] == pytest.approx(best["iops"], abs=0.05)
        assert got["lat_mean_us"] == pytest.approx(best["lat_mean_us"], abs=0.005)


def test_cdm_text_round_trip_of_the_fixture_run_with_the_mean(tmp_path):
    (text,) = exports.export(FIXTURE_RUN, tmp_path / "txt", fmt="cdm-text", statistic="mean")
    body = text.read_text()
    assert "[Read]" in body and "[Write]" in body and "RND    4KiB (Q= 32, T= 1)" in body
    (back,) = imports.import_paths([text], data_dir=tmp_path / "d")
    assert store.read_manifest(back)["imported"]["statistic"] == "mean"
    rows, again = iolab.load(FIXTURE_RUN), iolab.load(back)
    means = rows.groupby(["test", "direction"])["bw_mbps"].mean()
    assert len(again) == len(means) == 8
    for _, got in again.iterrows():
        assert got["bw_mbps"] == pytest.approx(means[(got["test"], got["direction"])], abs=0.0005)


def test_the_cli_writes_and_refuses_in_one_line(tmp_path, capsys, caplog):
    code, out, err = cli_main(capsys, caplog, "export", FIXTURE_RUN, tmp_path / "o", "--format", "cdm-text")
    assert code == 0 and out.strip() == str(tmp_path / "o" / f"{FIXTURE_RUN.name}.txt")
    (cdm,) = imports.import_paths([FIXTURES / "interop" / "cdm8-nvme.txt"], data_dir=tmp_path / "d")
    code, out, err = cli_main(capsys, caplog, "export", cdm, tmp_path / "p", "--format", "fio-plot")
    assert code == 2 and err.strip().splitlines() == [
        f"iolab: error: {cdm}: no raw fio JSON files (raw/<test>-<rep>.json) in the run"]
    code, out, err = cli_main(capsys, caplog, "export", tmp_path / "nothing", tmp_path / "p", "--format", "cdm-text")
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("iolab: error: ")
