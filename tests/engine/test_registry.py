"""Engines and undo functions are found by name in one registry: every recipe's engine is registered and
implements the Engine interface, an unknown name is refused with an error naming it, nothing is imported
by a name read from a recipe or a ledger record, and no engine calls another module's private method."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import iolab
from iolab.core import owner, ownership
from iolab.core.errors import IolabError
from iolab.engine import dryrun, reaper, recipes, registry
from iolab.engine.interface import Engine
from iolab.engine.runner import FioEngine, plan
from iolab.engine.targets import TEST_FILE
from iolab.fleet.fleetrun import FleetRun

PACKAGE = Path(__file__).resolve().parents[2] / "iolab"
STEPS = ("prepare", "measure_step", "annotate", "store", "execute")


def test_every_recipe_names_a_registered_engine_that_implements_the_interface():
    found = {}
    for name, path in recipes.available().items():
        recipe = recipes.load_file(path)
        engine = registry.engine_class(recipe.engine)
        assert issubclass(engine, Engine) and not inspect.isabstract(engine), (name, engine)
        found[recipe.engine] = engine
    # the recipes use the fio engine and every classic one
    assert set(found) == set(registry.engine_names()), (sorted(found), registry.engine_names())
    assert found["fio"] is FioEngine
    assert found["steadystate"].__module__ == "iolab.classic.steadystate"


@pytest.mark.parametrize("cls", [*(registry.engine_class(n) for n in registry.engine_names()), FleetRun],
                         ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_each_engine_has_the_public_steps(cls):
    assert issubclass(cls, Engine) and not inspect.isabstract(cls)
    for step in STEPS:
        assert callable(getattr(cls, step)), (cls, step)
        assert not getattr(cls, step).__name__.startswith("_")


def test_fio_engines_are_confined_and_database_engines_are_not():
    confined = {name: registry.engine_class(name).confined for name in registry.engine_names()}
    assert confined == {"fio": True, "bonnie": True, "gnomedisks": True, "hdparm": True, "steadystate": True,
                        "sustained": True, "pgbench": False, "sqlbench": False}


def test_an_engine_describes_its_tests_when_it_registered_how():
    sql = recipes.load("sqlbench")
    lines = registry.describe_tests("sqlbench")(sql)
    assert len(lines) >= len(sql.tests) and all(isinstance(line, str) for line in lines)
    assert registry.describe_tests("pgbench") is not None
    assert registry.describe_tests("fio") is None and registry.describe_tests("bonnie") is None


def test_an_unknown_engine_is_refused_by_name():
    with pytest.raises(IolabError, match="no engine named 'iolab.classic.nosuch'") as caught:
        registry.engine_class("iolab.classic.nosuch")
    assert "fio" in caught.value.hint and "sqlbench" in caught.value.hint
    with pytest.raises(IolabError, match="'nosuch'"):
        registry.describe_tests("nosuch")
    with pytest.raises(IolabError, match="not an iolab.engine.interface.Engine"):
        registry.register_engine("plain", dict)
    assert "plain" not in registry.engine_names()


def _not_imported(where, monkeypatch) -> str:
    """An iolab module that exists (importable: a directory added to the package's path) and registers no
    undo; importing it would leave a mark beside it. Not one of the package's own modules: the whole
    suite's collection imports every one of them, the lab's too."""
    name = f"undo_probe_{os.getpid()}"
    (where / f"{name}.py").write_text("import pathlib\npathlib.Path(__file__).with_suffix('.imported').touch()\n")
    monkeypatch.setattr(iolab, "__path__", [*iolab.__path__, str(where)])
    return f"iolab.{name}"


def test_an_unknown_undo_is_refused_by_name_and_never_imported(tmp_path, monkeypatch):
    """A record naming a real module that registers no undo: the reaper says so and imports nothing."""
    unregistered = _not_imported(tmp_path, monkeypatch)
    with pytest.raises(IolabError, match=f"'{unregistered}'"):
        registry.undo_function(unregistered)
    monkeypatch.setenv(ownership.ENV, str(tmp_path / "owned"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    by = ownership.Owner(gone.pid, 0, owner.boot_id(), owner.pid_namespace())
    thing = str(tmp_path / "thing")
    path = ownership.record("file", thing, undo="undo it", by=by, undone_by=unregistered, size=1)
    found = reaper.survey()  # the ledger's check: an entry naming no registered undo is damaged, left alone
    assert [line for line in found.damaged if str(path) in line and f"{unregistered!r}, which registers no undo"
            in line], found.damaged
    assert not [s for s in found.stale if s.record is not None]
    rec = ownership.Record("file", thing, by, "undo it", {"size": 1}, path=path, undone_by=unregistered)
    with pytest.raises(IolabError, match=f"'{unregistered}'") as caught:  # and the undo itself refuses it
        reaper._undo(reaper.Stale("file", thing, gone.pid, {"size": 1}, rec), dry_run=True)  # noqa: SLF001
    assert caught.value.context == str(path) and path.exists()
    assert importlib.util.find_spec(unregistered) is not None  # it could have been imported ...
    assert unregistered not in sys.modules and not list(tmp_path.glob("*.imported"))  # ... and never was


def test_the_ledger_undo_providers_are_registered_under_their_module_names():
    for name in ("iolab.engine.workdirs", "iolab.devices.iscsi", "iolab.classic.pgcluster", "iolab.classic.mariadb"):
        undo = registry.undo_function(name)
        assert undo.__module__ == name and undo.__name__ == "undo_stale"


def _sources():
    paths = [*sorted((PACKAGE / "engine").glob("*.py")), PACKAGE / "cli" / "recipes.py",
             PACKAGE / "classic" / "registered.py"]
    return {path: ast.parse(path.read_text()) for path in paths}


def test_no_module_is_imported_by_a_name_in_the_engine_the_reaper_or_the_recipe_listing():
    found = []
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "importlib" for a in node.names):
                found.append(f"{path.name}:{node.lineno} import importlib")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("importlib"):
                found.append(f"{path.name}:{node.lineno} from importlib")
            elif isinstance(node, ast.Name) and node.id == "__import__":
                found.append(f"{path.name}:{node.lineno} __import__")
    assert len(_sources()) > 20 and found == []


def _private_uses(path: Path) -> list[str]:
    """``self._name`` used in ``path`` but defined in no class or function of it (inherited from elsewhere),
    and ``from iolab... import _name``."""
    tree = ast.parse(path.read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.attr for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Attribute)}
    uses = [f"{path.name}:{n.lineno} self.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "super")
            and n.attr.startswith("_") and not n.attr.startswith("__") and n.attr not in defined]
    uses += [f"{path.name}:{n.lineno} imports {a.name}" for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("iolab.engine")
             for a in n.names if a.name.startswith("_")]
    return uses


def test_no_engine_calls_a_private_method_of_another_module():
    engines = {inspect.getsourcefile(registry.engine_class(n)) for n in registry.engine_names()}
    engines |= {inspect.getsourcefile(FleetRun), str(PACKAGE / "classic" / "originals.py"),
                str(PACKAGE / "classic" / "dbengine.py"), str(PACKAGE / "engine" / "dryrun.py")}
    found = [use for path in sorted(engines) for use in _private_uses(Path(path))]
    assert len(engines) >= 11 and found == []


def test_the_dry_run_shows_the_job_files_the_engine_writes(tmp_path):
    """The dry run renders through FioEngine.job_text, as the run's prepare() does: same text per step."""
    shown = dryrun.dry_run("quick", [str(tmp_path)])
    recipe, targets = plan("quick", [str(tmp_path)])
    targets[0].test_file = str(tmp_path / "iolab-<run_id>" / TEST_FILE)
    engine = FioEngine(recipe, targets, None, mem_limit=None, progress=False, scratch_dir=None)
    for step in recipe.steps():
        text = engine.job_text(step, targets[0], force_direct=False)
        assert f"[{step.id}]" in text and text in shown, step.id


def test_import_iolab_loads_no_engine_and_the_first_read_fills_the_registry():
    code = ("import sys, iolab; before = sorted(m for m in sys.modules if m.startswith('iolab.classic')); "
            "from iolab.engine import registry; names = registry.engine_names(); "
            "print(before, 'iolab.classic.pgbench' in sys.modules, names == sorted(names) and 'sqlbench' in names)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent)
    assert proc.stdout.split() == ["[]", "True", "True"], proc.stderr
