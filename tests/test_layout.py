"""The package's shape: every import one its layer may make, no cycle, small modules and functions,
notebooks that call the package.

The layers, lowest first (each ``iolab/<layer>/__init__.py`` says what it owns)::

    core < analysis < isolation < devices < engine < classic < fleet < interop < report < explorer < lab < cli

Each layer's ``__init__.py`` declares ``MAY_IMPORT``, the layers below it its modules may import (their own
layer always): every import is checked against it, absolute, relative and any ``importlib.import_module`` or
``__import__`` call (those only where :data:`DYNAMIC_IMPORTS` names them with a reason). A layer that declares
``READS_ONLY`` (analysis, report) never imports a module that runs a program or needs root: those are found
from what each module really does (:func:`runs_things`), not from a list kept by hand. The engines and undo
functions are found by name in ``iolab.engine.registry``, filled by explicit imports in
``iolab.classic.registered`` (which the ``iolab`` package imports).

The notebooks call the package: their imports are the public API of report, explorer and analysis
(:data:`NOTEBOOK_API`), never a ``_private`` name, never what runs fio but the explorer's run panel; and no
code cell defines a function of more than :data:`MAX_NOTEBOOK_DEF_LINES` lines (logic lives in the package,
where it is tested and translated).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "iolab"
NOTEBOOKS = PACKAGE.parent / "notebooks"
LAYERS = ["core", "analysis", "isolation", "devices", "engine", "classic", "fleet", "interop", "report", "explorer",
          "lab", "cli"]
MAX_MODULE_LINES = 520
MAX_FUNCTION_LINES = 80

#: module -> why it imports by a computed name (every other module imports by a written one)
DYNAMIC_IMPORTS = {
    "iolab.cli": "commands are discovered: every module of iolab.cli is a command, found with pkgutil",
}
#: what a module of a READS_ONLY layer imports that runs things -> why (each one a debt, not a rule)
READS_ONLY_EXCEPTIONS = {
    ("iolab.report.ceilings", "iolab.devices.emulated"):
        "runs stored before manifests recorded targets[].emulated.declared: only load_profiles (a YAML read) is called",
}
#: a module that starts or ends a process (a program, fio, a shell) by itself
PROCESS = re.compile(r"^\s*(import|from)\s+(subprocess|multiprocessing|pty)\b"
                     r"|\bos\.(exec\w*|spawn\w*|fork|posix_spawn\w*|system|popen|kill|killpg)\(", re.M)

#: what a notebook may import of iolab: the public API of these (and ``iolab``'s own ``__all__``)
NOTEBOOK_API = ("iolab.report", "iolab.explorer", "iolab.analysis")
#: the longest function a notebook cell may define (a one-line helper, a filter): logic lives in the package
MAX_NOTEBOOK_DEF_LINES = 6
#: (notebook, imported module) -> why that notebook imports it anyway
NOTEBOOK_IMPORTS = {
    ("measure.ipynb", "iolab.engine.runner"): "the notebook that measures: `iolab batch` runs it once per server",
    ("measure.ipynb", "iolab.engine.dryrun"): "the measure notebook's dry_run parameter shows the jobs, runs nothing",
    ("measure.ipynb", "iolab.fleet.batch"): "the measure notebook checks its tests and hands `iolab batch` its runs",
}
#: (notebook, function) -> why a notebook keeps a function longer than MAX_NOTEBOOK_DEF_LINES
NOTEBOOK_FUNCTIONS = {
    ("compare.ipynb", "generic"): "outside this change: its statistic choice moves with issue 22 item 3",
    ("compare.ipynb", "chart"): "outside this change: the compare report's figure with its caption and note",
}


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def layer_name(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "iolab" and parts[1] in LAYERS else None


def layer_of(module: str) -> int | None:
    name = layer_name(module)
    return None if name is None else LAYERS.index(name)


def declared(layer: str, name: str, default=None):
    """A constant of ``iolab/<layer>/__init__.py`` (``MAY_IMPORT``, ``READS_ONLY``), read without importing it."""
    for node in ast.parse((PACKAGE / layer / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    return default


def dotted(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    root = PACKAGE.parent
    return (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists()


def absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module ``from ... import`` names, relative ones (``from .common import x``) resolved from ``path``."""
    if not node.level:
        return node.module
    package = dotted(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_in(tree: ast.AST, path: Path | None = None):
    """(line, module, names) for every import in ``tree``, at any depth; ``from pkg import mod`` names the module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = absolute(node, path) if path else node.module
            names = [a.name for a in node.names]
            subs = [f"{module}.{n}" for n in names if is_module(f"{module}.{n}")]
            for name in subs or [module]:
                yield node.lineno, name, names
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def imported(path: Path):
    """(line, module) for every import of ``path``, relative ones resolved."""
    for line, module, _ in imports_in(ast.parse(path.read_text()), path):
        yield line, module


def dynamic_imports(tree: ast.AST):
    """Lines calling ``importlib.import_module``, ``__import__`` or ``importlib.util``'s spec loaders."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("import_module", "__import__", "spec_from_file_location", "module_from_spec"):
                yield node.lineno, name


def graph() -> dict[str, set[str]]:
    return {dotted(p): {m for _, m in imported(p) if m.startswith("iolab.")} for p in modules()}


def runs_things() -> set[str]:
    """Modules that start or end a process, belong to a layer that changes the kernel's state (``NEEDS_ROOT``),
    or import such a module (the ``iolab`` package itself, whose ``__init__`` imports the engines, aside; and the
    imports :data:`READS_ONLY_EXCEPTIONS` explains, which are known to call nothing that runs)."""
    edges = graph()
    for module, dep in READS_ONLY_EXCEPTIONS:
        edges[module] = edges[module] - {dep}
    found = {dotted(p) for p in modules()
             if PROCESS.search(p.read_text()) or declared(layer_name(dotted(p)) or "core", "NEEDS_ROOT", False)}
    while True:
        more = {m for m, deps in edges.items() if m not in found and deps & found}
        if not more:
            return found
        found |= more


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules outside a layer subpackage: {loose}"
    layers = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert layers == sorted(LAYERS), "LAYERS lists every subpackage of iolab"
    for layer in LAYERS:
        init = PACKAGE / layer / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init}: the docstring says what the layer owns"
        may = declared(layer, "MAY_IMPORT")
        assert isinstance(may, tuple), f"{init}: MAY_IMPORT, the layers below it its modules may import"
        above = [m for m in may if m not in LAYERS or LAYERS.index(m) >= LAYERS.index(layer)]
        assert above == [], f"{init}: MAY_IMPORT names layers that are not below it: {above}"


def test_every_import_is_one_its_layer_may_make():
    wrong = []
    for path in modules():
        here = layer_name(dotted(path))
        if here is None:
            continue
        may = {here, *declared(here, "MAY_IMPORT")}
        for line, module, names in imports_in(ast.parse(path.read_text()), path):
            there = layer_name(module)
            if module == "iolab" and names == ["__version__"]:
                continue  # the version string, set before the package imports its layers
            if module == "iolab" or (module.startswith("iolab.") and there not in may):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module} (not in {here}'s MAY_IMPORT)")
    assert wrong == [], "\n".join(wrong)


def test_imports_by_a_computed_name_only_where_named():
    found = {}
    for path in modules():
        for line, name in dynamic_imports(ast.parse(path.read_text())):
            found.setdefault(dotted(path), []).append(f"{path.relative_to(PACKAGE.parent)}:{line} {name}")
    unexplained = [where for module, lines in found.items() if module not in DYNAMIC_IMPORTS for where in lines]
    assert unexplained == [], "import by a written name, or say why in DYNAMIC_IMPORTS"
    assert sorted(found) == sorted(DYNAMIC_IMPORTS), "DYNAMIC_IMPORTS names a module that no longer needs it"


def test_what_runs_things_is_found_from_what_modules_do():
    runs = runs_things()
    assert {"iolab.engine.runner", "iolab.engine.fio.process", "iolab.engine.fio", "iolab.isolation.cgroups",
            "iolab.isolation.hugepages", "iolab.devices.loopdev", "iolab.devices.plan.steps", "iolab.fleet.batch",
            "iolab.explorer.runpanel"} <= runs
    assert not {"iolab.engine.store", "iolab.engine.recipes", "iolab.report.notebooks", "iolab.report.sections",
                "iolab.explorer.views"} & runs


def test_read_only_layers_never_import_what_runs_things():
    runs, wrong = runs_things(), []
    for path in modules():
        here = layer_name(dotted(path))
        if here is None or not declared(here, "READS_ONLY", False):
            continue
        for line, module in imported(path):
            if module in runs and layer_name(module) != here and (dotted(path), module) not in READS_ONLY_EXCEPTIONS:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}, which runs things")
    assert wrong == [], "\n".join(wrong)
    stale = [pair for pair in READS_ONLY_EXCEPTIONS
             if pair[1] not in runs or pair[1] not in {m for _, m in imported(PACKAGE.parent / module_path(pair[0]))}]
    assert stale == [], "READS_ONLY_EXCEPTIONS names an import that no longer runs things or no longer is"


def module_path(module: str) -> Path:
    rel = Path(*module.split("."))
    return rel.with_suffix(".py") if (PACKAGE.parent / rel.with_suffix(".py")).exists() else rel / "__init__.py"


def notebook_cells():
    """(notebook name, cell index, parsed code) of every code cell of notebooks/*.ipynb (IPython magics left out)."""
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for index, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
                yield path.name, index, ast.parse(code)


def test_notebooks_import_the_public_report_explorer_and_analysis_api():
    runs, public, wrong, bound = runs_things(), set(declared_all()), [], {}
    for name, index, tree in notebook_cells():
        bound.setdefault(name, set())
        for line, module, names in imports_in(tree):
            if not (module == "iolab" or module.startswith("iolab.")):
                continue
            where = f"{name} cell {index} line {line}: {module}"
            if (name, module) in NOTEBOOK_IMPORTS:
                continue
            if any(part.startswith("_") for part in module.split(".") + names):
                wrong.append(f"{where}: a private name")
            elif module == "iolab":
                if set(names) - public:
                    wrong.append(f"{where}: only iolab.__all__ is public at the top")
            elif not module.startswith(tuple(p + "." for p in NOTEBOOK_API) + NOTEBOOK_API):
                wrong.append(f"{where}: not the report, explorer or analysis API")
            elif module in runs and layer_name(module) != "explorer":
                wrong.append(f"{where}: runs things (only the explorer's run panel may)")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iolab"):
                bound[name] |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                bound[name] |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("iolab")}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in bound[name]):
                wrong.append(f"{name} cell {index} line {node.lineno}: {node.value.id}.{node.attr}, a private name")
    assert wrong == [], "\n".join(wrong)
    used = {(name, m) for name, _, tree in notebook_cells() for _, m, _ in imports_in(tree)}
    assert set(NOTEBOOK_IMPORTS) <= used, "NOTEBOOK_IMPORTS names an import no notebook makes"


def declared_all() -> list[str]:
    for node in ast.parse((PACKAGE / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return ast.literal_eval(node.value)
    return []


def test_notebooks_define_no_function_with_logic():
    long, kept = [], set()
    for name, index, tree in notebook_cells():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_NOTEBOOK_DEF_LINES:
                    kept.add((name, node.name))
                    if (name, node.name) not in NOTEBOOK_FUNCTIONS:
                        long.append(f"{name} cell {index}: {node.name}, {length} lines (move it into the package)")
    assert long == [], "\n".join(long)
    assert set(NOTEBOOK_FUNCTIONS) <= kept, "NOTEBOOK_FUNCTIONS names a function no notebook keeps"


def test_no_import_cycle_between_modules():
    edges = graph()
    names = set(edges)

    def target(module):  # `from iolab.x import y` may name a module or an attribute
        return module if module in names else None

    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(filter(None, map(target, edges.get(node, ())))):
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue  # a package and its own modules
            if state.get(dep) == "open":
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_modules_and_functions_are_small():
    big_modules, big_functions = [], []
    for path in modules():
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            big_modules.append(f"{path.relative_to(PACKAGE.parent)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    big_functions.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: {length}")
    assert big_modules == [] and big_functions == [], "\n".join(big_modules + big_functions)
