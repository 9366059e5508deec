"""The run panel offers ``--simultaneous`` (issue 24 item 5) where two or more targets are entered: a checkbox,
hidden for one target, passed on as the same RunOptions field the command line sets; what the engine refuses
is shown in the panel before anything exists, in the panel's language. The last test runs two directories
at once from the panel (fio, root: the device window)."""
import dataclasses

import pytest

from cli_helpers import needs_fio, needs_root

pytest.importorskip("ipywidgets")
from iolab.cli import build_parser  # noqa: E402
from iolab.cli import run as cli_run  # noqa: E402
from iolab.engine import store  # noqa: E402
from iolab.explorer import widgets  # noqa: E402


def _dirs(tmp_path, *names):
    out = []
    for name in names:
        (tmp_path / name).mkdir()
        out.append(str(tmp_path / name))
    return out


def _panel(tmp_path, target, **kwargs):
    return widgets.RunPanel(tmp_path / "data", target=target, recipe="quick", size="16M", runtime="1",
                            tests=["SEQ1M-Q1T1"], threaded=False, **kwargs)


def test_the_checkbox_is_offered_only_for_two_targets_or_more(tmp_path):
    one, two = _dirs(tmp_path, "one", "two")
    panel = _panel(tmp_path, one)
    assert panel.targets() == [one] and panel.simultaneous.layout.display == "none"
    panel.simultaneous.value = True  # left ticked, but not offered: the run is not simultaneous
    assert panel.run_options().simultaneous is False
    panel.target.value = f"{one}, {two}"
    assert panel.targets() == [one, two] and panel.simultaneous.layout.display == ""
    assert panel.run_options().simultaneous is True
    panel.simultaneous.value = False
    assert panel.run_options().simultaneous is False
    panel.target.value = f"{one}\n"  # back to one: hidden again
    assert panel.simultaneous.layout.display == "none"


def test_a_list_of_targets_fills_the_field_and_the_checkbox(tmp_path):
    one, two = _dirs(tmp_path, "one", "two")
    panel = _panel(tmp_path, [one, two], simultaneous=True)
    assert panel.target.value == f"{one}, {two}" and panel.simultaneous.layout.display == ""
    assert panel.simultaneous.value is True and panel.run_options().simultaneous is True


def test_the_panel_and_the_command_line_make_the_same_options(tmp_path):
    one, two = _dirs(tmp_path, "one", "two")
    args = build_parser().parse_args(["run", "quick", "--target", one, "--target", two, "--simultaneous",
                                      "--label", "array", "--size", "16M", "--runtime", "1", "--data", "store",
                                      "--no-progress"])
    cli = dataclasses.replace(cli_run.run_options(args), argv=None)
    panel = widgets.RunPanel("store", target=[one, two], label="array", size="16M", runtime="1", simultaneous=True)
    assert panel.run_options() == cli and cli.simultaneous is True


@pytest.mark.parametrize("lang, label, refusal", [
    ("en", "Measure at the same time", "names {path} twice"),
    ("ja", "同時に測る", "names {path} twice"),
])
def test_what_the_engine_refuses_is_shown_before_anything_exists(tmp_path, lang, label, refusal):
    (one,) = _dirs(tmp_path, "one")
    panel = _panel(tmp_path, f"{one}, {one}", simultaneous=True, lang=lang)
    assert panel.simultaneous.description == label
    panel.start()
    assert "--simultaneous" in panel.status.value and refusal.format(path=one) in panel.status.value
    assert panel.error and panel.run_dir is None and not (tmp_path / "data").exists()


def test_a_recipe_that_is_not_fio_is_refused_naming_the_option(tmp_path):
    one, two = _dirs(tmp_path, "one", "two")
    panel = widgets.RunPanel(tmp_path / "data", target=[one, two], recipe="bonnie", simultaneous=True,
                             threaded=False)
    panel.start()
    assert "--simultaneous" in panel.status.value and "bonnie" in panel.status.value
    assert not (tmp_path / "data").exists()


@needs_fio
@needs_root
def test_two_directories_measured_at_once_from_the_panel(tmp_path):
    one, two = _dirs(tmp_path, "disk1", "disk2")
    panel = _panel(tmp_path, [one, two], simultaneous=True, label="array")
    panel.start()
    assert panel.error is None, panel.status.value
    manifest = store.read_manifest(panel.run_dir)
    assert manifest["status"] == "completed" and manifest["simultaneous"] == {
        "targets": ["disk1", "disk2"], "total": "disk1+disk2"}
    rows = store.load(panel.run_dir)
    assert set(rows["target"]) == {"disk1", "disk2", "disk1+disk2"}
    assert set(rows.loc[rows["target"] == "disk1+disk2", "simultaneous"]) == {"total"}
    assert "Run completed" in panel.status.value
