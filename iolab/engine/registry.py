"""The engines a recipe can name and the undo functions a ledger record can name, registered by name.

Both tables are filled in one place, :mod:`iolab.classic.registered` (imported by the ``iolab``
package itself, so they are full whichever module a caller imports first): it sits in the
classic layer because it names the classic engines and the classic undo providers (PostgreSQL
clusters, MariaDB servers), which this layer may not import. Nothing is ever imported by a name
read from a recipe or a record: an unknown name is an :class:`~iolab.core.errors.IolabError`
naming it.

* ``engine: NAME`` in a recipe -> :func:`engine_class` (the :class:`~iolab.engine.interface.Engine`
  subclass :func:`iolab.engine.runner.run` builds) and :func:`describe_tests` (how ``iolab recipes
  NAME`` lists its tests, when the engine has its own way);
* ``undone_by: NAME`` in an ownership record -> :func:`undo_function` (the reaper's undo of it;
  the table is :mod:`iolab.core.ownership`'s, where records are read and checked).
"""
from __future__ import annotations

from typing import Callable

from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.engine.interface import Engine

_ENGINES: dict[str, type[Engine]] = {}
_DESCRIBERS: dict[str, Callable] = {}


def register_engine(name: str, cls: type[Engine], *, describe: Callable | None = None) -> None:
    """Register ``cls`` as the engine of recipes saying ``engine: name``; ``describe(recipe)``, when
    given, returns the lines ``iolab recipes NAME`` prints for its tests."""
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise IolabError(f"{cls!r} is not an iolab.engine.interface.Engine", context=f"engine {name!r}")
    _ENGINES[name] = cls
    if describe is not None:
        _DESCRIBERS[name] = describe


def engine_names() -> list[str]:
    """Every registered engine name, sorted."""
    return sorted(_ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The class that runs recipes saying ``engine: name``."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise IolabError(f"no engine named {name!r}", context="recipe: engine",
                         hint=f"the engines are: {', '.join(engine_names())}") from None


def describe_tests(name: str) -> Callable | None:
    """The engine's own ``describe_tests(recipe) -> list[str]``, or None (its tests are listed as the
    recipe writes them). An unknown engine is refused as by :func:`engine_class`."""
    engine_class(name)
    return _DESCRIBERS.get(name)


def register_undo(name: str, undo: Callable) -> None:
    """Register ``undo(id, details, *, dry_run) -> str | None`` for records made with ``undone_by=name``
    (the name of the module that makes such objects)."""
    ownership.register_undo(name, undo)


def undo_function(name: str, *, context: str = "ownership record: undone_by") -> Callable:
    """The undo registered as ``name``; an unknown name is refused (never imported)."""
    found = ownership.undo_function(name)
    if found is None:
        raise IolabError(f"the record names {name!r} to undo it, which is no registered undo: left alone",
                         context=context)
    return found
