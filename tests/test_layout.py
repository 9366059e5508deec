"""The package's shape: layers import only downwards, no cycle, small modules and functions.

The layers, lowest first (each ``iolab/<layer>/__init__.py`` says what it owns)::

    core < analysis < isolation < devices < engine < classic < fleet < interop < report < explorer < lab < cli

A module may import from its own layer and the ones below it, with no upward lookup: the engines
and undo functions are found by name in ``iolab.engine.registry``, filled by explicit imports in
``iolab.classic.registered`` (which the ``iolab`` package imports).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "iolab"
LAYERS = ["core", "analysis", "isolation", "devices", "engine", "classic", "fleet", "interop", "report", "explorer", "lab", "cli"]
MAX_MODULE_LINES = 520
MAX_FUNCTION_LINES = 80


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "iolab":
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


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


def imported(path: Path):
    """(line, module) for every iolab import; ``from pkg import mod`` names the module itself."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names if is_module(f"{node.module}.{a.name}")]
            for name in subs or [node.module]:
                yield node.lineno, name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules outside a layer subpackage: {loose}"
    for layer in LAYERS:
        init = PACKAGE / layer / "__init__.py"
        assert init.exists(), init
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc, f"{init}: the docstring says what the layer owns and may import"


def test_imports_point_down_the_layers():
    wrong = []
    for path in modules():
        here = layer_of(dotted(path))
        if here is None:
            continue
        for line, module in imported(path):
            there = layer_of(module)
            if there is not None and there > here:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert wrong == []


def test_no_import_cycle_between_modules():
    graph = {}
    for path in modules():
        graph[dotted(path)] = {m for _, m in imported(path) if m.startswith("iolab.")}
    names = set(graph)

    def target(module):  # `from iolab.x import y` may name a module or an attribute
        return module if module in names else None

    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(filter(None, map(target, graph.get(node, ())))):
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue  # a package and its own modules
            if state.get(dep) == "open":
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
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
