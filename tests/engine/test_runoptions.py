"""One RunOptions value: checked once, named when wrong, the same from the command line, the measure
notebook's papermill parameters and the explorer's run panel; the run's manifest records the recipe's statistic."""
import ast
import dataclasses
import json
from pathlib import Path

import pytest

from iolab.cli import build_parser
from iolab.cli import run as cli_run
from iolab.core.errors import IolabError
from iolab.engine import recipes, runner
from iolab.engine.runoptions import Allowances, RunOptions

from cli_helpers import ROOT, needs_fio


@pytest.mark.parametrize("option, value, flag", [
    ("size", "lots", "--size"), ("size", "-3G", "--size"), ("runtime", "soon", "--runtime"),
    ("runtime", "0", "--runtime"), ("repeat", 0, "--repeat"), ("repeat", "2.5", "--repeat"),
    ("repeat", "two", "--repeat"), ("pause", "-1", "--pause"), ("isolation", "tmpfs", "--isolation"),
    ("mem_limit", "1M", "--mem-limit"), ("mem_limit", "much", "--mem-limit"), ("mix", "R75", "--mix"),
    ("log_interval_ms", "0", "--log-interval"), ("log_interval_ms", "fast", "--log-interval"),
    ("unconfined", "yes", "--unconfined"), ("label", 3, "--label"), ("progress", "on", "--progress"),
])
def test_a_bad_value_is_refused_naming_the_option_and_the_value(option, value, flag):
    with pytest.raises(IolabError) as caught:
        RunOptions(**{option: value})
    message = str(caught.value)
    assert flag in message and (str(value) in message or repr(value) in message), message


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(IolabError, match="no run option named 'sise'.*size"):
        RunOptions.of(sise="1G")


def test_values_are_checked_once_into_their_units():
    options = RunOptions(size="16M", runtime="2m", repeat="3", pause="0", mem_limit="256M", mix="R70",
                         log_interval_ms="200", tests=["a", " b ", ""], confirm="/dev/sdz", data_dir="d", label=" x ")
    assert (options.size, options.runtime, options.repeat, options.pause) == (16 * 1024**2, 120.0, 3, 0.0)
    assert (options.mem_limit, options.mix, options.log_interval_ms) == (256 * 1024**2, 70, 200)
    assert options.tests == ("a", "b") and options.confirm == ("/dev/sdz",) and options.label == "x"
    assert options.data_dir == Path("d") and options.allow == Allowances()
    # made again from itself (the keyword form on top of a value): the same value, nothing parsed twice wrongly
    assert RunOptions.of(options) is options and dataclasses.replace(options) == options
    assert RunOptions.of(options, label="y") == dataclasses.replace(options, label="y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.size = 1


FORM = {"label": "ssd", "isolation": "direct", "size": "16M", "runtime": "1", "repeat": 2, "data_dir": "store"}


def _from_the_command_line():
    args = build_parser().parse_args(["run", "quick", "--target", "/tmp", "--label", "ssd", "--isolation", "direct",
                                      "--size", "16M", "--runtime", "1", "--repeat", "2", "--data", "store",
                                      "--no-progress"])
    return dataclasses.replace(cli_run.run_options(args), argv=None)


def _from_the_measure_notebook(**parameters):
    """The RunOptions the measure notebook builds from its papermill parameters: its own statement, run on them."""
    cells = json.loads((ROOT / "notebooks" / "measure.ipynb").read_text())["cells"]
    defaults, built = {}, None
    for cell in (c for c in cells if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            exec(source, {}, defaults)
        for node in ast.parse("\n".join(l for l in source.splitlines() if not l.startswith("%"))).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["options"]:
                built = ast.Expression(node.value)
    assert built is not None, "the measure notebook builds `options`"
    scope = {**defaults, **parameters, "runner": runner}
    return eval(compile(built, "measure.ipynb", "eval"), scope)


def _from_the_run_panel(**fields):
    pytest.importorskip("ipywidgets")
    from iolab.explorer import widgets
    return widgets.RunPanel(fields.pop("data_dir"), target="/tmp", **fields).run_options()


def test_the_command_line_the_notebook_and_the_run_panel_make_the_same_options():
    cli = _from_the_command_line()
    notebook = _from_the_measure_notebook(**FORM, progress=False, mem_limit=None, confirm=None)
    panel = _from_the_run_panel(**FORM)
    assert cli == notebook == panel
    assert (cli.size, cli.runtime, cli.repeat, cli.isolation, cli.label) == (16 * 1024**2, 1.0, 2, "direct", "ssd")


def test_blank_fields_leave_the_recipes_values_alike_everywhere():
    args = build_parser().parse_args(["run", "quick", "--target", "/tmp", "--no-progress"])
    cli = dataclasses.replace(cli_run.run_options(args), argv=None)
    blank = dict(label="", isolation="", size="", runtime="", repeat=0, data_dir="data")
    notebook = _from_the_measure_notebook(**{**blank, "isolation": None, "size": None, "runtime": None,
                                             "repeat": None}, progress=False, mem_limit=None, confirm=None)
    assert cli == notebook == _from_the_run_panel(**blank) == RunOptions(progress=False)


def test_an_empty_field_is_unset_but_a_pause_of_zero_is_no_pause():
    form = RunOptions.from_form(size="  ", runtime=0, repeat=0, label="", tests=[], pause=0, progress=False,
                                isolation=None)
    assert form == RunOptions(pause=0, progress=False) and form.pause == 0.0 and form.size is None
    assert RunOptions.from_form(pause="").pause is None  # an empty box: the recipe's pause
    with pytest.raises(IolabError, match=r"--runtime.*-1"):
        RunOptions.from_form(runtime=-1)


def test_a_bad_notebook_parameter_is_refused_by_name_before_anything_runs():
    with pytest.raises(IolabError, match=r"--size.*'big'"):
        _from_the_measure_notebook(size="big")


def test_the_recipe_reads_its_run_values_as_typed_fields():
    cdm = recipes.load("crystaldiskmark")
    assert (cdm.pause, cdm.warmup, cdm.statistic) == (5.0, True, "best")
    assert cdm.max_repeat >= cdm.repeat and 0 < cdm.cov_target < 1 and cdm.mem_limit == recipes.DEFAULT_MEM_LIMIT
    ran = cdm.with_options(RunOptions(pause="0", repeat=3, mem_limit="64M", runtime="2"))
    assert (ran.pause, ran.repeat, ran.max_repeat, ran.mem_limit, ran.runtime) == (0.0, 3, 3, 64 * 1024**2, 2.0)
    assert cdm.pause == 5.0  # a copy: the loaded recipe is unchanged
    assert ran.to_dict()["defaults"]["pause"] == 0.0  # the recipe as run (recipe.yaml) says what ran


def test_runner_and_dry_run_take_one_signature():
    import inspect
    from iolab.engine import dryrun
    for function in (runner.run, runner.plan, dryrun.dry_run):
        assert list(inspect.signature(function).parameters) == ["recipe", "target_specs", "options", "keywords"]


@needs_fio
def test_a_small_run_records_the_recipes_statistic_and_its_options(tmp_path):
    """Device window: a real run (one 4 KiB test, 16 MiB, 0.5 s) on a directory."""
    target = tmp_path / "target"
    target.mkdir()
    options = RunOptions(size="16M", runtime="0.5", repeat=1, pause=0, tests=["RND4K-Q1T1"], label="opts",
                         data_dir=tmp_path / "data", progress=False)
    result = runner.run("quick", [str(target)], options)
    manifest = json.loads((Path(result.path) / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    assert manifest["statistic"] == recipes.load("quick").statistic == "best"
    assert manifest["label"] == "opts" and manifest["options"]["size"] == 16 * 1024**2
    assert manifest["options"]["pause"] == 0.0 and manifest["options"]["repeat"] == 1
    from iolab.report import notebooks
    assert notebooks.recipe_statistic(result.path) == "best"


def test_no_run_option_is_read_by_string_key_from_recipe_defaults():
    """Only recipes.py reads ``defaults`` by key (behind the Recipe's typed fields); others may set them."""
    package = ROOT / "iolab"
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "engine" / "recipes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            read = (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and node.value) or \
                (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                 and node.func.value)
            if isinstance(read, ast.Attribute) and read.attr == "defaults" and "recipe" in ast.unparse(read.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert found == []
