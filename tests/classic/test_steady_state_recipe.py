"""The steady-state recipe (SNIA PTS style) on emulated devices, the ground truth: real fio, real
throttled loop devices in RAM. The declared ceilings are far below what the loop device does, so the
per-round figures are the throttle's on a busy host too."""
from __future__ import annotations

import json

import pytest

from iolab.analysis.steadystate import Reason, decode
from iolab.classic.capacity import Capacity
from iolab.classic.purge import purge_plan
from iolab.classic.steady_options import bounded, parse_options, precondition_bytes
from iolab.classic.steadystate import STEADY_COLUMNS, Engine
from iolab.core.errors import IolabError
from iolab.devices.emulated import get_profile
from iolab.engine import recipes
from iolab.engine.runoptions import RunOptions
from iolab.engine.targets import Target

from kernel_fixtures import machine_clean, module_clean, needs_fio, needs_root  # noqa: F401
from steady_fixtures import steady_run

MiB = 1024**2


def test_preconditioning_is_twice_the_capacity_or_the_declared_size():
    assert precondition_bytes("2x", 16 * MiB, "t") == 32 * MiB
    assert precondition_bytes(None, 16 * MiB, "t") == 32 * MiB
    assert precondition_bytes("200M", 16 * MiB, "t") == 200 * MiB
    assert precondition_bytes(0, 16 * MiB, "t") == 0
    with pytest.raises(IolabError, match="multiple of the capacity"):
        precondition_bytes("twox", 16 * MiB, "t")


@pytest.fixture
def small_drive(tmp_path):
    """A file target of 24 MiB: a capacity small enough for a test, and unlike the test area (--size 16M)."""
    path = tmp_path / "drive.img"
    path.write_bytes(b"\0" * (24 * MiB))
    return Target(spec=str(path), kind="file", name="drive", path=str(path), test_file=str(path))


def test_preconditioning_defaults_to_twice_the_capacity_and_a_declared_size_wins(small_drive):
    """The PTS's 2x is of the target's capacity (the file's 24 MiB), not of the rounds' 16 MiB test area; the
    job writes it over the whole capacity; --precondition-size wins; each is recorded with why."""
    engine = _engine(targets=[small_drive])
    plan = engine.preconditioning(small_drive)
    assert plan.record() == {"bytes": 48 * MiB, "pts": 48 * MiB, "why": "capacity", "capacity": 24 * MiB,
                             "capacity_source": "file"}
    pre = {s.test: s for s in engine.recipe.steps()}["precondition"]
    job = engine.job_text(pre, small_drive, False)
    assert "\nio_size=48m\n" in job and "\nsize=24m\n" in job.split("[precondition]")[1]
    declared = _engine(targets=[small_drive], precondition_size="8M").preconditioning(small_drive)
    assert (declared.bytes, declared.pts, declared.why) == (8 * MiB, 48 * MiB, "declared")
    assert _engine(precondition_size="0").bounds.plan(Capacity(24 * MiB, "file")).why == "none"
    area = Target(spec=str(small_drive.path), kind="dir", name="d", path=str(small_drive.path))
    assert _engine().preconditioning(area).record()["capacity_source"] == "dir"  # a directory: the test area


def test_the_command_lines_bounds_reach_the_engine_typed():
    """--precondition-size, --max-rounds and --max-time as `iolab run` passes them (text): in the recipe's
    options as bytes, a whole number and seconds, read by the engine into its Bounds."""
    recipe = bounded("steady-state", precondition_size="200M", max_rounds="8", max_time="2h")
    assert recipe.options == {"precondition": 200 * MiB, "max_rounds": 8, "max_time": 7200.0, "figure": "iops"}
    assert "precondition_size" not in recipe.defaults and "max_time" not in recipe.defaults
    engine = Engine(recipe.with_overrides(size="1G", runtime="60"), [], None, mem_limit=None, progress=False,
                    scratch_dir=None)
    bounds = engine.bounds
    assert (bounds.precondition, bounds.max_rounds, bounds.max_time) == (200 * MiB, 8, 7200.0)
    assert bounds.plan(Capacity(1024 * MiB, "emulated")).pts == 2048 * MiB
    assert bounds.precondition_s == 7200 - 5 * 60  # preconditioning leaves time for a window of five rounds
    pre = {s.test: s for s in engine.recipe.steps()}["precondition"]
    assert pre.options["runtime"] == "6900000ms"  # io_size: each target's, in its job file
    assert "time_based" not in pre.options  # whichever ends first: the bytes or the time
    assert bounded("steady-state") == "steady-state"  # nothing given: the recipe as named


@pytest.mark.parametrize("kwargs, message", [
    ({"max_rounds": "3"}, "run option --max-rounds: .*>= 5"),
    ({"max_rounds": "many"}, "run option --max-rounds: .*whole number"),
    ({"precondition_size": "lots"}, "run option --precondition-size: .*not a size"),
    ({"max_time": "soon"}, "run option --max-time: .*not a duration"),
])
def test_bad_bounds_are_refused_naming_the_option(kwargs, message):
    """Named as every run option is (``run option --size``: iolab.engine.runoptions), not 'command line'."""
    with pytest.raises(IolabError, match=message) as refused:
        bounded("steady-state", **kwargs)
    assert "command line" not in str(refused.value)
    with pytest.raises(IolabError, match="run option --size: "):  # the wording the bounds follow
        RunOptions(size="lots")


def test_bounds_are_refused_for_other_recipes_and_a_time_too_short_for_a_window():
    with pytest.raises(IolabError, match="run option --max-rounds: bounds of a steady-state run.*crystaldiskmark"):
        bounded("crystaldiskmark", max_rounds="8")
    with pytest.raises(IolabError, match="run options --precondition-size, --max-time: "):
        bounded("crystaldiskmark", precondition_size="1G", max_time="2h")
    recipe = bounded("steady-state", max_time="4").with_overrides(runtime="1")
    with pytest.raises(IolabError, match="4 s leaves no time for a measurement window of 5 rounds of 1 s"):
        parse_options(recipe, 1.0)


def _engine(targets=(), **bounds):
    recipe = bounded(recipes.load("steady-state"), **bounds).with_overrides(size="16M", runtime="1")
    return Engine(recipe, list(targets), None, mem_limit=None, progress=False, scratch_dir=None)


def test_what_a_bound_cut_short_is_said_as_codes(small_drive):
    engine = _engine(precondition_size="8M", max_time="10")
    engine.preconditioning(small_drive)  # as prepare() does: 8 MiB declared, the PTS's 2 x 24 MiB
    engine.written["drive"] = 5 * MiB  # the time bound stopped fio after 5 of the 8 MiB
    stopped = Reason("max_time", {"limit_s": 10.0, "elapsed_s": 9.5, "rounds": 4})
    cut = engine.cut_short("drive", stopped, reached=False)
    assert [str(r) for r in cut] == ["precondition_under bytes=8388608 pts=50331648",
                                     "precondition_time written=5242880 planned=8388608 limit_s=5",
                                     "max_time limit_s=10 elapsed_s=9.5 rounds=4"]
    assert engine.cut_short("drive", stopped, reached=True)[-1].code == "precondition_time"  # steady: rounds not cut
    full = _engine()
    full.preconditioning(small_drive)
    full.written["drive"] = 48 * MiB
    assert full.cut_short("drive", None, reached=True) == []  # the PTS's 2x, written whole
    none = _engine(precondition_size="0")
    none.preconditioning(small_drive)
    assert [str(r) for r in none.cut_short("drive", None, reached=True)] == ["precondition_off pts=50331648"]


def test_a_block_device_smaller_than_the_test_area_is_written_within_its_end(small_drive):
    """No --size on a 32 MiB block device: preconditioning over its 32 MiB (not max(capacity, 1G)), the rounds
    over the whole device; a file keeps its region of at least the test area. The job files only (the device
    itself: tests/classic/test_flash_small_device.py)."""
    recipe = recipes.load("steady-state").with_overrides(runtime="1")
    device = Target(spec="/dev/loop9", kind="block", name="loop9", path="/dev/loop9")
    engine = Engine(recipe, [device, small_drive], None, mem_limit=None, progress=False, scratch_dir=None)
    engine.plans = {"loop9": engine.bounds.plan(Capacity(32 * MiB, "device")),
                    "drive": engine.bounds.plan(Capacity(24 * MiB, "file"))}
    steps = {s.test: s for s in engine.recipe.steps()}
    jobs = {(test, t.name): engine.job_text(steps[test], t, False) for test in steps for t in (device, small_drive)}
    assert "\nsize=32m\n" in jobs[("precondition", "loop9")] and "\nio_size=64m\n" in jobs[("precondition", "loop9")]
    assert "\nsize=32m\n" in jobs[("round", "loop9")]
    assert "\nsize=1g\n" in jobs[("precondition", "drive")] and "\nio_size=48m\n" in jobs[("precondition", "drive")]
    assert "\nsize=1g\n" in jobs[("round", "drive")]  # a file is the test area, grown as before


@pytest.mark.parametrize("target, code", [
    (Target(spec="emulated:hdd", kind="emulated", name="hdd"), "emulated"),
    (Target(spec="/mnt/x", kind="dir", name="x", path="/mnt/x"), "not_device kind=dir"),
    (Target(spec="/dev/sdz", kind="block", name="sdz", path="/dev/sdz"), "no_confirm"),
    (Target(spec="/dev/sdz", kind="block", name="sdz", path="/dev/sdz", confirm=["/dev/sdy"]), "no_confirm"),
])
def test_only_a_confirmed_device_is_purged(target, code):
    argv, reason = purge_plan(target)
    assert argv is None and str(reason) == code


@needs_root
@needs_fio
def test_a_constant_throttle_is_steady_at_round_five(steady_hdd_run):
    """emulated:hdd holds writes at 150 IOPS from the start: steady at the first possible round."""
    run_dir, rows, found = steady_hdd_run
    verdict = found["targets"]["hdd"]
    assert verdict["reached"] and verdict["round"] == 5 and verdict["window"] == [1, 2, 3, 4, 5]
    assert verdict["mean"] == pytest.approx(get_profile("hdd").write_iops, rel=0.10)
    assert found["purge"][0]["purged"] is False and found["purge"][0]["code"] == "emulated"
    pre = rows[rows["test"].eq("precondition")]
    assert len(pre) == 1 and pre["io_bytes"].iloc[0] == 32 * MiB  # 2x the 16 MiB device, 128 KiB sequential
    rounds = rows[rows["test"].eq("round")]
    assert list(rounds["round"]) == [1, 2, 3, 4, 5] and rounds["steady_reached"].all()
    assert rounds["steady_window"].all() and set(rounds["steady_round"]) == {5}
    # the steady-state figure: the window's mean, in the workload's metric (IOPS of 4 KiB random writes)
    assert rounds["steady_figure"].tolist() == pytest.approx([rounds["iops"].mean()] * 5, rel=1e-6)
    assert set(rounds["steady_metric"]) == {"iops"} and set(rounds["steady_purge"]) == {"emulated"}
    assert set(STEADY_COLUMNS) <= set(rows.columns)  # the engine's declared columns, all in results.csv
    assert rounds["steady_cut"].isna().all() and rounds["steady_why_not"].isna().all()  # nothing cut short
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["steady_state"]["bounds"]["max_rounds"] == 8  # --max-rounds 8, recorded
    assert manifest["steady_state"]["precondition"]["hdd"] == {  # no size declared: twice the capacity
        "bytes": 32 * MiB, "pts": 32 * MiB, "why": "capacity", "capacity": 16 * MiB, "capacity_source": "emulated"}
    assert manifest["steady_state"]["targets"]["hdd"]["reached"] is True


@needs_root
@needs_fio
@pytest.mark.usefixtures("module_clean", "machine_clean")
def test_the_consumer_ssd_is_steady_only_after_its_cliff(tmp_path):
    """emulated:consumer-ssd: 50 MB/s for its first 160 MiB, then 10 MB/s. 64 MiB of preconditioning
    leaves ~2 s of burst for 4 KiB random rounds of 1 s: steady state is the rate after the cliff,
    reached only by a window of rounds that all come after it."""
    p = get_profile("consumer-ssd")
    run_dir, rows, found = steady_run(tmp_path, "emulated:consumer-ssd", "32M", max_rounds=14)
    verdict = found["targets"]["consumer-ssd"]
    figures = verdict.pop("figures")
    print(f"\nconsumer-ssd rounds (IOPS): {[round(f) for f in figures]}; {verdict}")
    assert verdict["reached"], verdict["why_not"]
    assert verdict["mean"] == pytest.approx(p.cliff.write_bps / 4096, rel=0.10)
    assert figures[0] == pytest.approx(p.write_bps / 4096, rel=0.10)  # the first round at the burst rate
    assert verdict["round"] > 5
    burst_rounds = [i + 1 for i, f in enumerate(figures) if f > 1.2 * verdict["mean"]]
    assert min(verdict["window"]) > max(burst_rounds)  # the window lies wholly after the cliff
    cliff = json.loads((run_dir / "manifest.json").read_text())["targets"][0]["emulated"]["cliff"]
    assert cliff["events"][0]["event"] == "cliff"


@needs_root
@needs_fio
def test_a_time_bound_cuts_preconditioning_and_rounds_short_and_says_so(unsteady_hdd_run):
    """--max-time 6 with 1 s rounds leaves preconditioning 1 s (6 less a window of five rounds): 24 MiB
    (--precondition-size, under the PTS's 32 MiB) need ~1.3 s at hdd's 150 x 128 KiB/s, so fio stops it;
    the rounds left are fewer than a window, and the run completes, not steady, saying what was cut."""
    run_dir, rows, found = unsteady_hdd_run
    verdict = found["targets"]["hdd"]
    assert not verdict["reached"] and verdict["round"] is None and verdict["figure"] is None
    assert found["precondition"] == 24 * MiB  # declared; the PTS's twice the emulated device's 16 MiB
    assert found["targets"]["hdd"]["precondition"] == {"bytes": 24 * MiB, "pts": 32 * MiB, "why": "declared",
                                                       "capacity": 16 * MiB, "capacity_source": "emulated"}
    pre = rows[rows["test"].eq("precondition")]
    written = int(pre["io_bytes"].iloc[0])
    assert 0 < written < 24 * MiB
    rounds = rows[rows["test"].eq("round")]
    n = len(rounds)
    assert 1 <= n < 5 and not rounds["steady_reached"].any() and rounds["steady_figure"].isna().all()
    assert decode(rounds["steady_why_not"].iloc[0]) == [Reason("few_rounds", {"rounds": n, "window": 5})]
    cut = decode(rounds["steady_cut"].iloc[0])
    assert [r.code for r in cut] == ["precondition_under", "precondition_time", "max_time"]
    assert cut[0].figures == {"bytes": 24 * MiB, "pts": 32 * MiB}
    assert cut[1].figures == {"written": written, "planned": 24 * MiB, "limit_s": 1}
    assert cut[2].figures["limit_s"] == 6 and cut[2].figures["rounds"] == n
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    bounds = manifest["steady_state"]["bounds"]
    assert (bounds["max_time"], bounds["precondition"], bounds["precondition_s"]) == (6.0, 24 * MiB, 1.0)
    assert manifest["steady_state"]["targets"]["hdd"]["cut"] == rounds["steady_cut"].iloc[0]


def test_the_preconditioning_codes_are_worded_in_both_languages():
    """What the engine now says (precondition_under / precondition_off: twice the capacity), as the report words it."""
    from iolab.report.sections.steadystate import worded
    cut = "precondition_under bytes=8388608 pts=50331648; precondition_off pts=50331648"
    en, ja = worded(cut, "cut", "en"), worded(cut, "cut", "ja")
    assert en == ["Preconditioning wrote 8 MiB, less than the PTS's twice the capacity (48 MiB): bounded by "
                  "--precondition-size.",
                  "No preconditioning (--precondition-size 0): the PTS first writes twice the capacity (48 MiB)."]
    assert "容量の2倍（48 MiB）より少ない" in ja[0] and "容量の2倍（48 MiB）を書く" in ja[1]
