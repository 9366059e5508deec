"""crystaldiskmark's presets against CrystalDiskMark 8's and KDiskMark's definitions (their source, cited in
recipes/crystaldiskmark.yaml): the rows of each profile, their order (all reads, then all writes, then the
mixes), the mix ratio (--mix R10..R90), and KDiskMark's one figure per mixed row, in a real run's results.csv."""
import json
import math

import pandas as pd
import pytest

from iolab.analysis import mixfigure as cdm_mix
from iolab.core.errors import IolabError
from iolab.engine import recipes

from cli_helpers import cli_main, needs_fio, needs_root

#: (bs, iodepth, numjobs, sequential) of each CDM row name
ROW = {"SEQ1M-Q8T1": ("1m", 8, 1, True), "SEQ1M-Q1T1": ("1m", 1, 1, True), "SEQ128K-Q32T1": ("128k", 32, 1, True),
       "RND4K-Q32T1": ("4k", 32, 1, False), "RND4K-Q32T16": ("4k", 32, 16, False), "RND4K-Q1T1": ("4k", 1, 1, False)}
#: CrystalDiskMark 8 DiskMarkDlg.cpp SettingsQueuesThreads() (default mode and "NVMe SSD Ver.8"),
#: KDiskMark appsettings.cpp defaultBenchmarkParams() (Standard and NVMe_SSD)
PROFILES = {
    "default": ["SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1"],
    "nvme": ["SEQ1M-Q8T1", "SEQ128K-Q32T1", "RND4K-Q32T16", "RND4K-Q1T1"],
    "peak": ["SEQ1M-Q8T1", "RND4K-Q32T1"],
    "nvme-peak": ["SEQ1M-Q8T1", "RND4K-Q32T16"],
    "real-world": ["SEQ1M-Q1T1", "RND4K-Q1T1"],
    "demo": ["SEQ1M-Q8T1"],
}


def expected_steps(rows, *, mix=False):
    """CDM's ExecDiskBenchAll*: every row's read, then every row's write, then (mix) every row's mix."""
    reads = [f"{r}-{'read' if ROW[r][3] else 'randread'}" for r in rows]
    writes = [f"{r}-{'write' if ROW[r][3] else 'randwrite'}" for r in rows]
    return reads + writes + ([f"MIX-{r}" for r in rows] if mix else [])


@pytest.fixture(scope="module")
def cdm():
    return recipes.load("crystaldiskmark")


@pytest.mark.parametrize("preset", sorted(PROFILES))
def test_each_preset_is_the_tools_profile_in_their_order(cdm, preset):
    recipe = cdm.with_overrides(preset=preset)
    steps = recipe.steps()
    assert [s.id for s in steps] == expected_steps(PROFILES[preset])
    for step in steps:
        bs, depth, jobs, sequential = ROW[step.test]
        assert (step.options["bs"], step.options["iodepth"], step.options["numjobs"]) == (bs, depth, jobs)
        assert step.rw in (("read", "write") if sequential else ("randread", "randwrite"))
        assert "rwmixread" not in step.options
    assert recipe.preset == preset and recipe.to_dict()["order"] == "directions"


def test_the_mix_preset_is_default_plus_mix_at_r70(cdm):
    steps = cdm.with_overrides(preset="mix").steps()
    assert [s.id for s in steps] == expected_steps(PROFILES["default"], mix=True)
    mixes = steps[8:]
    assert [s.rw for s in mixes] == ["rw", "rw", "randrw", "randrw"]
    assert {s.options["rwmixread"] for s in mixes} == {70}
    assert [(s.options["bs"], s.options["iodepth"], s.options["numjobs"]) for s in mixes] == \
        [ROW[r][:3] for r in PROFILES["default"]]


@pytest.mark.parametrize("preset", sorted(PROFILES))
def test_mix_adds_each_rows_mix_after_the_writes(cdm, preset):
    recipe = cdm.with_mix("R40").with_overrides(preset=preset)
    steps = recipe.with_overrides().steps()  # a second pass (as the runner makes) keeps them as they are
    assert [s.id for s in steps] == expected_steps(PROFILES[preset], mix=True)
    for step in steps[-len(PROFILES[preset]):]:
        assert step.options["rwmixread"] == 40
        assert (step.options["bs"], step.options["iodepth"], step.options["numjobs"]) == \
            ROW[step.test.removeprefix("MIX-")][:3]
    saved = recipe.to_dict()
    assert saved["mix"] == 40
    assert {t["name"]: t.get("rwmixread") for t in saved["tests"] if t["name"].startswith("MIX-")} == \
        {f"MIX-{r}": 40 for r in PROFILES[preset]}


def test_mix_rerates_the_mix_preset_and_the_default_stays_r70(cdm):
    assert {s.options["rwmixread"] for s in cdm.with_mix("R90").with_overrides(preset="mix").steps()
            if s.test.startswith("MIX-")} == {90}
    assert {t.rwmixread for t in cdm.tests if t.name.startswith("MIX-")} == {70}  # the loaded recipe untouched


@pytest.mark.parametrize("text, ratio", [("R10", 10), ("R70", 70), ("r90", 90), ("R70/W30", 70), ("R60%/W40%", 60)])
def test_mix_ratios(text, ratio):
    assert recipes.parse_mix(text) == ratio


@pytest.mark.parametrize("text", ["R5", "R95", "X70", "70", "R75", "R0", "R100", "R70/W40", "", "R 70"])
def test_bad_mix_ratios_are_refused_naming_the_value(cdm, text):
    with pytest.raises(IolabError) as caught:
        cdm.with_mix(text)
    message = str(caught.value)
    assert repr(text) in message and "crystaldiskmark: --mix" in message and "R10" in message


def test_iolab_run_refuses_a_bad_mix_before_anything_runs(capsys, caplog, tmp_path):
    code, out, err = cli_main(capsys, caplog, "run", "crystaldiskmark", "--target", tmp_path, "--mix", "R95",
                              "--data", tmp_path / "data", "--dry-run")
    assert code != 0 and "'R95'" in err and "--mix" in err and not (tmp_path / "data").exists()
    code, out, err = cli_main(capsys, caplog, "run", "crystaldiskmark", "--target", tmp_path, "--preset", "demo",
                              "--mix", "--dry-run")
    assert code == 0 and "[MIX-SEQ1M-Q8T1]" in out and "rwmixread=70" in out  # --mix alone: R70


def test_mix_needs_a_mixed_counterpart(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ndescription: d\ntests:\n  - {name: A, rw: [read, write], bs: 4k}\n")
    with pytest.raises(IolabError, match=r"r: --mix.*test 'A' has no mixed counterpart 'MIX-A'"):
        recipes.load(str(path)).with_mix("R70").with_overrides()
    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=randrw\n")
    with pytest.raises(IolabError, match=r"j: --mix: a plain fio job file runs as is"):
        recipes.load(str(job)).with_mix("R70")


def test_recipes_keep_their_own_order_unless_they_ask(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ndescription: d\ntests:\n  - {name: A, rw: [read, write]}\n  - {name: B, rw: [read, write]}\n")
    assert [s.id for s in recipes.load(str(path)).steps()] == ["A-read", "A-write", "B-read", "B-write"]
    path.write_text(path.read_text() + "order: sideways\n")
    with pytest.raises(IolabError, match=r"order: must be one of tests, directions, got 'sideways'"):
        recipes.load(str(path))


def frame(read_bw, write_bw, read_iops, write_iops, read_lat, write_lat, error=None):
    return pd.DataFrame([
        {"test": "MIX-X", "rep": 1, "direction": d, "bw_mbps": bw, "iops": iops, "lat_mean_us": lat,
         "lat_p99_us": 9.0, "lat_max_us": lat * 3, "io_bytes": 1000, "runtime_s": 1.0, "error": error, "valid": True}
        for d, bw, iops, lat in (("read", read_bw, read_iops, read_lat), ("write", write_bw, write_iops, write_lat))])


class _Step:
    id, rw = "MIX-X", "randrw"
    options = {"rwmixread": 70}


def test_the_mix_figure_is_kdiskmarks():
    rows = cdm_mix.with_mix_row(frame(70.0, 30.0, 700.0, 300.0, 100.0, 200.0), _Step)
    assert list(rows["direction"]) == ["read", "write", "mix"]
    mix = rows.iloc[-1]
    assert mix["bw_mbps"] == pytest.approx((70 * 70 + 30 * 30) / 100)  # 58, not the total 100
    assert mix["iops"] == pytest.approx(580.0) and mix["lat_mean_us"] == pytest.approx(130.0)
    assert mix["bw_total_mbps"] == pytest.approx(100.0) and mix["iops_total"] == pytest.approx(1000.0)
    assert mix["rwmixread"] == 70 and mix["io_bytes"] == 2000 and mix["lat_max_us"] == 600.0
    assert math.isnan(mix["lat_p99_us"])  # percentiles do not combine
    # no figure from a failed job, nor for a step that is not a mix
    assert len(cdm_mix.with_mix_row(frame(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, error="fio failed"), _Step)) == 2

    class Read(_Step):
        rw = "randread"
    assert len(cdm_mix.with_mix_row(frame(1.0, 1.0, 1.0, 1.0, 1.0, 1.0), Read)) == 2


@needs_fio
@needs_root
def test_a_real_run_in_cdm_order_with_one_mix_figure_per_row(cdm_demo_mix_run):
    """demo + --mix R70 on a small file (one row: its read, its write, then its mix; the order of several
    rows is the steps' above), the mix row with KDiskMark's figure in results.csv (tests/conftest.py's run)."""
    run_dir, target = cdm_demo_mix_run
    assert list(target.iterdir()) == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [t["name"] for t in manifest["tests"]] == expected_steps(PROFILES["demo"], mix=True)
    assert [t["status"] for t in manifest["tests"]] == ["completed"] * 3
    table = pd.read_csv(run_dir / "results.csv")
    measured = table[table["rep"] == 1]
    assert list(zip(measured["test"], measured["direction"])) == [  # in the order run
        ("SEQ1M-Q8T1", "read"), ("SEQ1M-Q8T1", "write"),
        ("MIX-SEQ1M-Q8T1", "read"), ("MIX-SEQ1M-Q8T1", "write"), ("MIX-SEQ1M-Q8T1", "mix")]
    rows = measured[measured["test"] == "MIX-SEQ1M-Q8T1"].set_index("direction")
    assert rows.loc["read", "bw_mbps"] > 0 and rows.loc["write", "bw_mbps"] > 0
    assert rows.loc["mix", "bw_mbps"] == pytest.approx(
        (rows.loc["read", "bw_mbps"] * 70 + rows.loc["write", "bw_mbps"] * 30) / 100, rel=1e-6)
    assert rows.loc["mix", "bw_total_mbps"] == pytest.approx(rows.loc["read", "bw_mbps"] + rows.loc["write", "bw_mbps"])
    assert rows.loc["mix", "rwmixread"] == 70
    recipe = (run_dir / "recipe.yaml").read_text()
    assert "mix: 70" in recipe and "rwmixread: 70" in recipe and "order: directions" in recipe
    assert "rwmixread=70" in (run_dir / "jobs" / "MIX-SEQ1M-Q8T1.fio").read_text()
