"""The engines a recipe can name and the undo functions a ledger record can name, registered by name.

Both tables are filled in one place, :mod:`iolab.classic.registered`, the first time one is read
(a run, the recipe listing, the reaper): the ``iolab`` package hands :func:`fill_on_first_use` the
import of it, so ``import iolab`` loads no engine and the tables are full whichever module a caller
imported first. It sits in the classic layer because it names the classic engines and the classic
undo providers (PostgreSQL clusters, MariaDB servers), which this layer may not import. Nothing is
ever imported by a name read from a recipe or a record: an unknown name is an
:class:`~iolab.core.errors.IolabError` naming it.

* ``engine: NAME`` in a recipe -> :func:`engine_class` (the :class:`~iolab.engine.interface.Engine`
  subclass :func:`iolab.engine.runner.run` builds) and :func:`describe_tests` (how ``iolab recipes
  NAME`` lists its tests, when the engine has its own way);
* ``undone_by: NAME`` in an ownership record -> :func:`undo_function` (the reaper's undo of it;
  the table is :mod:`iolab.core.ownership`'s, where records are read and checked).
"""
from __future__ import annotations

import threading
from typing import Callable

from iolab.core import ownership
from iolab.core.errors import IolabError
from iolab.engine.interface import Engine

_ENGINES: dict[str, type[Engine]] = {}
_DESCRIBERS: dict[str, Callable] = {}
_FILLERS: list[Callable[[], None]] = []
_FILLING = threading.RLock()  # a run panel's thread and the kernel's may ask at once


def fill_on_first_use(filler: Callable[[], None]) -> None:
    """Run ``filler`` (it registers engines and undo functions) before the tables are first read."""
    with _FILLING:
        _FILLERS.append(filler)


def _full() -> None:
    with _FILLING:
        while _FILLERS:
            _FILLERS.pop(0)()


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
    _full()
    return sorted(_ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The class that runs recipes saying ``engine: name``."""
    _full()
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
    _full()
    found = ownership.undo_function(name)
    if found is None:
        raise IolabError(f"the record names {name!r} to undo it, which is no registered undo: left alone",
                         context=context)
    return found


def has_undo(name: str) -> bool:
    """Whether an undo is registered as ``name`` (a ledger record naming another is left alone)."""
    _full()
    return ownership.undo_function(name) is not None
