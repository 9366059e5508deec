"""``iolab run ... --simultaneous`` without running anything: the option is typed and refused where it cannot
work (naming it), the step's one job file starts one job per target together, and the total row adds the
targets' rows up. The measurements themselves are in ``test_simultaneous_run.py`` (fio on emulated devices)."""
import configparser
import dataclasses

import pandas as pd
import pytest

from iolab.cli import build_parser
from iolab.cli import run as cli_run
from iolab.core.errors import IolabError
from iolab.engine import recipes, runner, simultaneous, targets
from iolab.engine.runoptions import RunOptions

SIMULTANEOUS = RunOptions(simultaneous=True)


def _targets(tmp_path, *names):
    out = []
    for name in names:
        (tmp_path / name).mkdir()
        out.append(targets.Target(spec=str(tmp_path / name), kind="dir", path=str(tmp_path / name), name=name,
                                  test_file=str(tmp_path / name / targets.TEST_FILE)))
    return out


def _sections(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(comment_prefixes=(";", "#"), interpolation=None)
    parser.read_string(text)
    return parser


def test_the_option_is_a_typed_flag_named_when_wrong():
    assert RunOptions().simultaneous is False
    assert RunOptions.of(simultaneous=True).simultaneous is True
    with pytest.raises(IolabError, match="run option --simultaneous.*'yes'"):
        RunOptions(simultaneous="yes")


def test_the_command_line_sets_it():
    args = build_parser().parse_args(["run", "quick", "--target", "/a", "--target", "/b", "--simultaneous"])
    assert cli_run.run_options(args).simultaneous is True
    args = build_parser().parse_args(["run", "quick", "--target", "/a"])
    assert cli_run.run_options(args).simultaneous is False


def test_one_target_is_refused_naming_the_option():
    with pytest.raises(IolabError, match=r"run option --simultaneous: needs two or more --target, got 1"):
        simultaneous.check(recipes.load("quick"), ["/a"], SIMULTANEOUS)


def test_a_path_named_twice_is_refused_and_two_emulated_devices_are_not(tmp_path):
    (tmp_path / "z").mkdir()
    with pytest.raises(IolabError, match=r"run option --simultaneous.*names .*z twice"):
        simultaneous.check(recipes.load("quick"), [str(tmp_path / "z"), f"{tmp_path}/./z/"], SIMULTANEOUS)
    simultaneous.check(recipes.load("quick"), ["emulated:hdd", "emulated:hdd"], SIMULTANEOUS)


def test_a_recipe_whose_engine_is_not_fio_is_refused_naming_the_option():
    with pytest.raises(IolabError, match=r"run option --simultaneous: .*'bonnie'.*bonnie engine"):
        simultaneous.check(recipes.load("bonnie"), ["/a", "/b"], SIMULTANEOUS)


def test_a_job_file_and_log_interval_are_refused_naming_the_option(tmp_path):
    job = tmp_path / "mine.fio"
    job.write_text("[w]\nrw=write\nsize=1M\n")
    with pytest.raises(IolabError, match=r"run option --simultaneous: a \.fio job file"):
        simultaneous.check(recipes.load(str(job)), ["/a", "/b"], SIMULTANEOUS)
    with pytest.raises(IolabError, match=r"run option --simultaneous: does not go with --log-interval"):
        simultaneous.check(recipes.load("quick"), ["/a", "/b"], RunOptions(simultaneous=True, log_interval_ms=500))


def test_not_asked_nothing_is_refused():
    simultaneous.check(recipes.load("bonnie"), ["/a"], RunOptions())
    assert issubclass(runner.SimultaneousEngine, runner.FioEngine)


def test_a_fleet_run_is_refused_naming_the_option(tmp_path):
    args = build_parser().parse_args(["run", "quick", "--hosts", str(tmp_path / "inventory.yaml"), "--simultaneous"])
    with pytest.raises(IolabError, match=r"--simultaneous .*--hosts already runs its hosts at once"):
        cli_run.run(args)


def test_one_job_file_starts_one_job_per_target_together(tmp_path):
    recipe = recipes.load("quick")
    ours = _targets(tmp_path, "disk1", "disk2", "disk3")
    step = recipe.steps()[0]
    text = simultaneous.job_text(recipe, step, ours, force_direct=False)
    parsed = _sections(text)
    jobs = [s for s in parsed.sections() if s != "global"]
    assert jobs == [f"{step.id}@disk1", f"{step.id}@disk2", f"{step.id}@disk3"]
    assert "filename" not in parsed["global"] and parsed["global"]["size"] == "64m"
    for target, job in zip(ours, jobs):
        section = parsed[job]
        assert section["filename"] == target.test_file  # its own file, nobody else's
        assert section["new_group"] == "1"  # reported apart even under group_reporting
        assert {k: section[k] for k in step.options} == {k: str(v) for k, v in step.options.items()}
    assert "stonewall" not in text and "wait_for" not in text


def test_options_that_would_serialise_the_jobs_are_left_out(tmp_path):
    recipe = recipes.load("quick")
    ours = _targets(tmp_path, "a", "b")
    step = recipe.steps()[0]
    step = dataclasses.replace(step, options={**step.options, "stonewall": 1})
    parsed = _sections(simultaneous.job_text(recipe, step, ours, force_direct=False))
    assert all("stonewall" not in parsed[s] for s in parsed.sections())


def test_the_total_name_is_no_target_name(tmp_path):
    ours = _targets(tmp_path, "sda", "sdb")
    assert simultaneous.total_name(ours) == "sda+sdb"
    made = targets.resolve([str(tmp_path / "sda"), str(tmp_path / "sdb")], size=1, writes=False)
    assert [t.name for t in made] == ["sda", "sdb"]
    (tmp_path / "sda+sdb").mkdir()  # a directory called like a total is named without its '+'
    assert "+" not in targets.resolve([str(tmp_path / "sda+sdb")], size=1, writes=False)[0].name


def _pass(target, direction, bw, iops, lat, lat_max, error=None, flags=None):
    return {"target": target, "direction": direction, "bs": 1048576, "iodepth": 8, "numjobs": 1, "bw_mbps": bw,
            "iops": iops, "lat_mean_us": lat, "lat_p50_us": lat, "lat_p99_us": lat * 2, "lat_p999_us": lat * 3,
            "lat_max_us": lat_max, "cpu_usr_pct": 1.0, "cpu_sys_pct": 2.0, "io_bytes": int(bw * 1e6 * 3),
            "runtime_s": 3.0, "error": error, "valid": error is None, "flags": flags, "dev_read_bytes": 10,
            "simultaneous": "target"}


def test_the_total_adds_up_the_targets_of_a_pass():
    a = pd.DataFrame([_pass("a", "read", 100.0, 100.0, 80_000.0, 200_000.0, flags="emulated_latency")])
    b = pd.DataFrame([_pass("b", "read", 200.0, 300.0, 26_000.0, 90_000.0)])
    total = simultaneous.total_rows([a, b], "a+b")
    assert len(total) == 1
    row = total.iloc[0]
    assert (row["target"], row["simultaneous"], row["direction"]) == ("a+b", "total", "read")
    assert row["bw_mbps"] == 300.0 and row["iops"] == 400.0 and row["io_bytes"] == a["io_bytes"][0] + b["io_bytes"][0]
    assert row["lat_mean_us"] == pytest.approx((80_000 * 100 + 26_000 * 300) / 400)  # weighted by IOPS
    assert row["lat_max_us"] == 200_000.0 and row["runtime_s"] == 3.0
    assert pd.isna(row["lat_p50_us"]) and pd.isna(row["lat_p99_us"])  # percentiles do not add up
    assert row["cpu_sys_pct"] == 4.0 and row["dev_read_bytes"] == 20
    assert row["valid"] and pd.isna(row["error"]) and row["flags"] == "emulated_latency;simultaneous_total"
    assert list(total.columns) == list(a.columns)


def test_a_target_that_ended_first_adds_its_io_over_the_longest_runtime_not_its_rate():
    """Size-based jobs end apart: 300 MB in 3 s beside 300 MB in 1.5 s moved 600 MB in 3 s (200 MB/s, as fio's
    group_reporting would say of them), not 100 + 200 MB/s; the mean latency weighs each target's I/Os."""
    a = pd.DataFrame([_pass("a", "read", 100.0, 100.0, 10_000.0, 20_000.0)])
    b = pd.DataFrame([{**_pass("b", "read", 200.0, 200.0, 4_000.0, 9_000.0), "runtime_s": 1.5, "io_bytes": 300_000_000}])
    row = simultaneous.total_rows([a, b], "a+b").iloc[0]
    assert row["bw_mbps"] == pytest.approx(200.0) and row["iops"] == pytest.approx(200.0)
    assert row["io_bytes"] == 600_000_000 and row["runtime_s"] == 3.0
    assert row["lat_mean_us"] == pytest.approx((10_000 * 300 + 4_000 * 300) / 600)  # 300 I/Os each
    unknown = pd.DataFrame([{**_pass("b", "read", 200.0, 200.0, 4_000.0, 9_000.0), "runtime_s": None}])
    assert simultaneous.total_rows([a, unknown], "a+b").iloc[0]["bw_mbps"] == 300.0  # no runtime: rates add up


def test_a_total_over_a_failed_target_carries_its_error_and_is_not_valid():
    a = pd.DataFrame([_pass("a", "write", 100.0, 100.0, 1.0, 2.0)])
    b = pd.DataFrame([_pass("b", "write", 5.0, 5.0, 1.0, 2.0, error="fio: pid=1, err=28")])
    row = simultaneous.total_rows([a, b], "a+b").iloc[0]
    assert row["error"] == "b: fio: pid=1, err=28" and not row["valid"]


def test_each_direction_gets_its_total():
    a = pd.DataFrame([_pass("a", "read", 10.0, 10.0, 1.0, 1.0), _pass("a", "write", 1.0, 1.0, 1.0, 1.0)])
    b = pd.DataFrame([_pass("b", "read", 20.0, 20.0, 1.0, 1.0), _pass("b", "write", 2.0, 2.0, 1.0, 1.0)])
    total = simultaneous.total_rows([a, b], "a+b").set_index("direction")
    assert total.loc["read", "bw_mbps"] == 30.0 and total.loc["write", "bw_mbps"] == 3.0


def test_the_runner_refuses_before_anything_exists(tmp_path):
    data = tmp_path / "data"
    with pytest.raises(IolabError, match=r"run option --simultaneous: needs two or more --target"):
        runner.plan("quick", [str(tmp_path)], RunOptions(simultaneous=True, data_dir=data))
    assert not data.exists()


def test_reports_leave_the_total_out_of_the_systems_they_set_side_by_side():
    from iolab.report.sections import common
    assert common.SIMULTANEOUS_TOTAL_FLAG == simultaneous.TOTAL_FLAG
    a = pd.DataFrame([_pass("a", "read", 100.0, 100.0, 1.0, 1.0, flags="emulated_latency")])
    b = pd.DataFrame([_pass("b", "read", 200.0, 200.0, 1.0, 1.0)])
    rows = pd.concat([a, b, simultaneous.total_rows([a, b], "a+b")], ignore_index=True)
    rows["system"] = "web1 · " + rows["target"]
    assert list(common.without_aggregates(rows)["target"]) == ["a", "b"]
    assert common.measured_systems(rows) == ["web1 · a", "web1 · b"]


def test_a_pass_that_measured_nothing_has_no_total():
    failed = {**_pass("a", None, 0.0, 0.0, 0.0, 0.0, error="fio ran no job"), "bw_mbps": None, "iops": None}
    assert simultaneous.total_rows([pd.DataFrame([failed]), pd.DataFrame([{**failed, "target": "b"}])], "a+b").empty
