"""iolab batch: inventories checked on load, real papermill runs of measure.ipynb, failures kept apart."""
import json
import subprocess
import textwrap
from pathlib import Path

import nbformat
import pytest

from iolab.fleet import batch
from iolab.core.errors import IolabError

from cli_helpers import IOLAB, ROOT, cli_main, needs_fio

#: One test of `quick` per entry, tiny: each entry is a papermill run of a few seconds.
TINY = {"recipe": "quick", "tests": ["SEQ1M-Q1T1"], "size": "16M", "runtime": 1}


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------------------
# inventory validation: every error names the file and the field


@pytest.mark.parametrize("text, expected", [
    ("entries: [{name: a, target: /tmp}]\nhosts: []\n", "unknown field 'hosts'"),
    ("defaults: {recipe: quick, speed: 3}\nentries: [{name: a, target: /tmp}]\n", "defaults: unknown field 'speed'"),
    ("entries: [{name: a, recipe: quick, target: /tmp, colour: red}]\n", "entries[0] (a): unknown field 'colour'"),
    ("entries: [{name: a, recipe: quick}]\n", "entries[0] (a): missing required field 'target'"),
    ("entries: [{name: a, target: /tmp}]\n", "entries[0] (a): missing required field 'recipe'"),
    ("entries: [{recipe: quick, target: /tmp}]\n", "entries[0]: missing required field 'name'"),
    ("defaults: {recipe: quick}\n", "missing required field 'entries'"),
    ("entries: []\n", "entries: must be a non-empty list"),
    ("entries: [{name: a b, recipe: quick, target: /tmp}]\n", "entries[0].name: names become file names"),
    ("defaults: {recipe: quick, target: /tmp}\nentries: [{name: a}, {name: a}]\n", "entries[1] (a).name: duplicate"),
    ("entries: [{name: a, recipe: quick, target: /tmp, isolation: ramdisk}]\n", "entries[0] (a).isolation: must be one of"),
    ("entries: [{name: a, recipe: quick, target: /tmp, size: lots}]\n", "entries[0] (a).size"),
    ("entries: [{name: a, recipe: quick, target: /tmp, runtime: soon}]\n", "entries[0] (a).runtime"),
    ("entries: [{name: a, recipe: quick, target: /tmp, repeat: 0}]\n", "entries[0] (a).repeat: must be a whole number"),
    ("entries: [{name: a, recipe: nosuch, target: /tmp}]\n", "entries[0] (a).recipe: unknown recipe 'nosuch'"),
    ("entries: [{name: a, recipe: quick, target: /tmp, tests: [SEQ9]}]\n", "entries[0] (a).tests: recipe quick has no test 'SEQ9'"),
    ("entries: [{name: a, recipe: quick, target: /tmp, preset: nvme}]\n", "entries[0] (a).preset: unknown preset 'nvme'"),
    ("entries: [{name: a, recipe: quick, target: [], label: x}]\n", "entries[0] (a): missing required field 'target'"),
    ("entries: [{name: a, recipe: quick, target: /tmp, timeout: -1}]\n", "entries[0] (a).timeout"),
    ("entries: [{name: a, recipe: quick, target: /tmp, lang: fr}]\n", "entries[0] (a).lang: must be one of"),
    ("- just a list\n", "an inventory must be a YAML mapping"),
    ("entries: [{name: a\n", "not valid YAML"),
])
def test_bad_inventory_names_file_and_field(tmp_path, text, expected):
    path = write(tmp_path / "inv.yaml", text)
    with pytest.raises(IolabError) as info:
        batch.load_inventory(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert expected in message, message


def test_bad_inventory_is_one_line_and_exit_2(tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = write(tmp_path / "inv.yaml", "entries: [{name: a, recipe: quick}]\n")
    returncode, _, stderr = cli_main(capsys, caplog, "batch", path)
    assert returncode == 2
    assert stderr.strip().splitlines() == [
        f"iolab: error: {path}: entries[0] (a): missing required field 'target'"]
    assert not (tmp_path / "data").exists()


def test_inventory_defaults_and_relative_paths(tmp_path):
    (tmp_path / "disk").mkdir()
    write(tmp_path / "mine.yaml", """\
        name: mine
        description: one test
        tests: [{name: T, rw: read, bs: 4k}]
    """)
    path = write(tmp_path / "inv.yaml", """\
        data: results
        defaults: {recipe: quick, size: 16M, runtime: 2}
        entries:
          - {name: a, target: disk}
          - {name: b, target: [disk, emulated:hdd], recipe: [mine.yaml, quick], runtime: 1, label: B disk,
             lang: ja}
    """)
    inv = batch.load_inventory(path)
    assert inv.data == tmp_path / "results"
    a, b = inv.entries
    assert a.recipes == ["quick"] and a.targets == [str(tmp_path / "disk")] and a.runtime == 2.0
    assert b.recipes == [str(tmp_path / "mine.yaml"), "quick"]
    assert b.targets == [str(tmp_path / "disk"), "emulated:hdd"] and b.runtime == 1.0
    params = b.parameters(data_dir="/d", result_file="/r.json")
    # every notebook parameter is passed: the notebook's own small defaults never leak into a batch
    assert params["label"] == "B disk" and params["tests"] == [] and params["repeat"] is None
    assert a.parameters(data_dir="/d")["label"] == "a" and params["size"] == "16M"
    # the notebook's language: the entry's, else English (passed either way, like every parameter)
    assert params["lang"] == "ja" and a.parameters(data_dir="/d")["lang"] == "en"
    import nbformat as nbf
    cell = next(c for c in nbf.read(str(ROOT / "notebooks" / "measure.ipynb"), 4).cells
                if "parameters" in c.metadata.get("tags", []))
    names = {line.split("=")[0].strip() for line in cell.source.splitlines() if "=" in line}
    # the measure notebook's parameters, lang among them, are exactly the ones a batch passes
    assert names == set(params) and "lang" in names


def test_select_tests_keeps_order_and_applies_preset_first():
    recipe = batch.select_tests("quick", ["RND4K-Q1T1", "SEQ1M-Q8T1"])
    assert [t.name for t in recipe.tests] == ["SEQ1M-Q8T1", "RND4K-Q1T1"]
    assert [s.id for s in recipe.steps()][:2] == ["SEQ1M-Q8T1-read", "SEQ1M-Q8T1-write"]
    assert [t.name for t in batch.select_tests("quick").tests] == [t.name for t in batch.recipes.load("quick").tests]
    nvme = batch.select_tests("crystaldiskmark", ["RND4K-Q1T1"], preset="nvme")
    assert [t.name for t in nvme.tests] == ["RND4K-Q1T1"] and nvme.preset == "nvme"
    # the runner's own preset handling does not undo the choice
    assert [t.name for t in nvme.with_overrides(size="16M").tests] == ["RND4K-Q1T1"]
    with pytest.raises(IolabError, match=r"preset peak\) has no test 'RND4K-Q1T1'.*its tests: SEQ1M-Q8T1, RND4K-Q32T1"):
        batch.select_tests("crystaldiskmark", ["SEQ1M-Q8T1", "RND4K-Q1T1"], preset="peak")


# ---------------------------------------------------------------------------
# real runs: papermill executes measure.ipynb for each entry


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    """`iolab batch` on three entries: two tiny good ones around one whose target is missing."""
    root = tmp_path_factory.mktemp("batch")
    (root / "disk-a").mkdir()
    (root / "disk-b").mkdir()
    defaults = json.dumps(TINY)
    write(root / "seq-read.yaml", """\
        name: seq-read
        description: one sequential read
        fio: {ioengine: libaio, direct: 1}
        tests: [{name: SEQ1M-Q1T1, rw: read, bs: 1M}]
    """)
    inventory = write(root / "inventory.yaml", f"""\
        defaults: {defaults}
        entries:
          - name: first
            target: disk-a
            label: Disk A
          - name: broken
            target: no-such-dir
          - name: second
            target: [disk-b]
            recipe: [quick, seq-read.yaml]
    """)
    data = root / "data"
    proc = subprocess.run(IOLAB + ["batch", str(inventory), "--data", str(data)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    return proc, root, data


def _lines(proc):
    return {line.split()[1]: line for line in proc.stdout.splitlines() if line.split()[:1] in (["completed"], ["failed"])}


@needs_fio
def test_batch_keeps_each_executed_notebook_in_its_run(batch_run):
    proc, root, data = batch_run
    lines = _lines(proc)
    assert set(lines) == {"first", "broken", "second"}, proc.stdout + proc.stderr
    runs = {name: [Path(p) for p in lines[name].split()[2:]] for name in ("first", "second")}
    assert len(runs["first"]) == 1 and len(runs["second"]) == 2  # one run per recipe of the entry
    for name, label, run_dir in [("first", "Disk A", runs["first"][0])] + [("second", "second", p) for p in runs["second"]]:
        assert lines[name].startswith("completed"), proc.stdout + proc.stderr
        assert run_dir.parent.parent == data.resolve()
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["label"] == label
        expected = ["SEQ1M-Q1T1"] if manifest["recipe"] == "seq-read" else ["SEQ1M-Q1T1-read", "SEQ1M-Q1T1-write"]
        assert [t["name"] for t in manifest["tests"]] == expected
        nb = nbformat.read(str(run_dir / "measure.ipynb"), as_version=4)
        injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
        assert injected and f"label = {label!r}".replace("'", '"') in injected[0].source
        outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert "quick: completed" in outputs
        assert ("seq-read: completed" in outputs) == (name == "second")
        markdown = "".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells
                           if c.cell_type == "code" for o in c.outputs)
        assert "## Findings" in markdown and "MB/s" in markdown
        # the notebook ran with the entry's parameters, not its own defaults
        assert manifest["targets"][0]["spec"] == str(root / ("disk-a" if name == "first" else "disk-b"))
    # the runs are ordinary runs for reports
    assert len(list(data.glob("*/*/manifest.json"))) == 3


@needs_fio
def test_failing_entry_fails_alone_with_clear_message(batch_run):
    proc, root, data = batch_run
    assert proc.returncode == 1
    line = _lines(proc)["broken"]
    assert line.split()[0] == "failed"
    assert f"--target {root / 'no-such-dir'}: no such file or directory" in line
    # checked before anything ran, reported at once, skipped
    assert proc.stderr.index("broken: cannot run, skipped") < proc.stderr.index("[1/2] first: running")
    assert "[2/2] second: running" in proc.stderr
    assert "1 of 3 entries failed: broken" in proc.stderr
    # the entry after the broken one still ran, and the summary says who did what
    summary = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())
    assert [(e["name"], e["status"]) for e in summary["entries"]] == [
        ("first", "completed"), ("broken", "failed"), ("second", "completed")]
    assert summary["entries"][1]["run_dirs"] == [] and "no such file" in summary["entries"][1]["error"]
    assert summary["ended"]


@needs_fio
def test_notebook_failing_before_a_run_is_kept_in_the_batch_directory(tmp_path):
    """When the notebook fails before any run exists, its executed copy (with the traceback) stays in the batch dir."""
    inv = batch.load_inventory(write(tmp_path / "inv.yaml", """\
        entries: [{name: gone, recipe: quick, target: vanished, tests: [SEQ1M-Q1T1]}]
    """))
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    result = batch.run_entry(inv.entries[0], data_dir=tmp_path / "data", batch_dir=batch_dir)
    assert result.status == "failed" and result.run_dirs == []
    assert result.error.startswith(f"--target {tmp_path / 'vanished'}: no such file or directory (cell ")
    assert result.notebooks == [batch_dir / "gone.ipynb"]
    nb = nbformat.read(str(result.notebooks[0]), as_version=4)
    assert any(o.get("output_type") == "error" and o.get("ename") == "IolabError"
               for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@needs_fio
def test_failed_run_inside_notebook_is_reported(tmp_path):
    """A run that starts but fails (fio refuses an option) still gets its notebook and fails the entry."""
    (tmp_path / "disk").mkdir()
    write(tmp_path / "bad.yaml", """\
        name: bad
        description: a job fio rejects at run time
        fio: {ioengine: nosuchengine}
        tests: [{name: T, rw: read, bs: 4k}]
    """)
    inv = batch.load_inventory(write(tmp_path / "inv.yaml", """\
        entries: [{name: e, recipe: bad.yaml, target: disk, size: 16M, runtime: 1}]
    """))
    outcome = batch.run_batch(inv, data_dir=tmp_path / "data")
    (entry,) = outcome.entries
    assert entry.status == "failed" and entry.error, entry
    assert entry.notebooks and all(p.is_file() for p in entry.notebooks)
    for run_dir in entry.run_dirs:  # if a run directory was made, it holds the notebook
        assert (run_dir / "measure.ipynb").is_file()


@needs_fio
def test_an_entrys_lang_makes_the_notebook_write_japanese(tmp_path):
    """`lang: ja` in a batch file: the executed measure notebook's headings and findings are Japanese."""
    from iolab.report import i18n
    (tmp_path / "disk").mkdir()
    inv = batch.load_inventory(write(tmp_path / "inv.yaml", f"""\
        entries: [{{name: ja, target: disk, lang: ja, recipe: quick, tests: [SEQ1M-Q1T1], size: 16M, runtime: 1}}]
    """))
    outcome = batch.run_batch(inv, data_dir=tmp_path / "data")
    (entry,) = outcome.entries
    assert entry.status == "completed", entry
    nb = nbformat.read(str(entry.run_dirs[0] / "measure.ipynb"), as_version=4)
    markdown = "\n".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells
                          if c.cell_type == "code" for o in c.outputs)
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert headings == ["## " + i18n.text(k, "ja") for k in ("headings.measured", "headings.results",
                                                             "headings.commentary")]
    assert "MB/秒" in markdown


def test_dry_run_creates_nothing(tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.chdir(ROOT)
    (tmp_path / "disk").mkdir()
    inventory = write(tmp_path / "inv.yaml", f"""\
        defaults: {json.dumps(TINY)}
        entries: [{{name: ok, target: disk}}, {{name: gone, target: nowhere}}]
    """)
    returncode, stdout, stderr = cli_main(capsys, caplog, "batch", inventory, "--data", tmp_path / "data", "--dry-run")
    assert returncode == 1, stderr
    assert "# ===== entry ok" in stdout and "rw=read" in stdout and "bs=1m" in stdout
    assert "failed    gone --target" in stdout
    assert stdout.strip().splitlines()[-1] == "dry run: nothing was created or run"
    assert not (tmp_path / "data").exists() and list((tmp_path / "disk").iterdir()) == []
    returncode, stdout, stderr = cli_main(capsys, caplog, "batch", inventory, "--dry-run", "--entry", "ok")
    assert returncode == 0 and "dry-run   ok" in stdout, stdout + stderr


def test_example_inventory_is_valid():
    inv = batch.load_inventory(ROOT / "examples" / "batch-inventory.yaml")
    assert [e.name for e in inv.entries] == ["ssd", "hdd", "emulated-hdd"]
    assert inv.entries[1].recipes == ["quick", "crystaldiskmark"] and inv.entries[1].repeat == 3


@pytest.mark.parametrize("raising, error", [
    ("raise RuntimeError('boom')", "RuntimeError: boom (cell 3)"),
    ("from iolab.core.errors import IolabError\nraise IolabError('gone', context='--target x')", "--target x: gone (cell 3)")])
def test_a_failing_notebook_fails_its_entry_in_one_line_and_is_kept(tmp_path, raising, error):
    """The batch runs notebooks through the report's executor; a failing cell is the entry's one-line error."""
    from iolab.core import notebook_execution
    from iolab.report import notebooks
    assert notebooks.execute is notebook_execution.execute
    broken = tmp_path / "broken.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("data_dir = None", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(raising)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(broken))
    inv = batch.load_inventory(write(tmp_path / "inv.yaml", "entries: [{name: e, recipe: quick, target: disk}]\n"))
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    result = batch.run_entry(inv.entries[0], data_dir=tmp_path / "data", batch_dir=batch_dir, notebook=broken)
    assert result.status == "failed" and result.error == error and result.run_dirs == []
    assert result.notebooks == [batch_dir / "e.ipynb"] and result.notebooks[0].is_file()
