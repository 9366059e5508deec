"""No private name crosses a module boundary in the iolab package (issue 22 item 5): what several modules share
is public and named for what it does; a ``_name`` is its own module's business. Another library's names
(``os._exit``, ``sys._getframe``) are its own API and not looked at.

Read from the source with ``ast``: ``from M import _name`` and ``m._name`` where ``m`` is a module the file
imported. Dunder names (``__all__``, ``__version__``) are not private.
"""
import ast
from pathlib import Path

import iolab

PACKAGE = Path(iolab.__file__).resolve().parent


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str | None) -> bool:
    """An iolab module (a relative import is one too: see its ``level``)."""
    return module is not None and (module == "iolab" or module.startswith("iolab."))


def private_uses(source: str) -> list[str]:
    """``module:name`` for each private name ``source`` takes from another module."""
    tree = ast.parse(source)
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names if _ours(a.name))
        elif isinstance(node, ast.ImportFrom) and (node.level or _ours(node.module)):
            for alias in node.names:
                # "from iolab.report import commentary" binds a module too: its attributes are checked below
                modules.add(alias.asname or alias.name)
                if _private(alias.name):
                    found.append(f"{node.module}:{alias.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append(f"{node.value.id}:{node.attr}")
    return found


def test_the_scan_finds_both_forms():
    source = ("from iolab.report.sections.common import Section, _fmt\n"
              "from iolab.report import tables\n"
              "import iolab.report.i18n as i18n\n"
              "import os\n"
              "from .sibling import _helper\n"
              "x = tables._digits(3) + i18n.__name__ + os._exit.__name__\n"
              "self._own = 1\n")
    assert private_uses(source) == ["iolab.report.sections.common:_fmt", "sibling:_helper", "tables:_digits"]


def test_no_private_name_is_imported_across_iolab_modules():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 150  # the scan reads the package, not an empty folder
    crossing = {str(p.relative_to(PACKAGE)): uses for p in files if (uses := private_uses(p.read_text("utf-8")))}
    assert crossing == {}
