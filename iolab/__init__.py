"""iolab: reproducible storage benchmarks with fio, cache isolation and reports.

The package is layered, lowest first: ``core`` < ``analysis`` < ``isolation`` < ``devices`` <
``engine`` < ``classic`` < ``fleet`` < ``interop`` < ``report`` < ``explorer`` < ``lab`` < ``cli``; each
subpackage's docstring says what it owns, its ``MAY_IMPORT`` the layers below it that it may import. The public
API kept at the top: :func:`load`, :func:`manifests`, :class:`IolabError` and ``iolab.fio.parse_output``.
"""
from __future__ import annotations

__version__ = "0.1.0"

from iolab.core.errors import IolabError  # noqa: E402
from iolab.engine import fio  # noqa: E402  (contract: iolab.fio.parse_output)
from iolab.engine.store import load, manifests  # noqa: E402
from iolab.engine import registry as _registry  # noqa: E402


def _register_engines() -> None:
    """Fill :mod:`iolab.engine.registry` (engines, undo functions) when a run, the recipe listing or the reaper
    first reads it, not at ``import iolab``."""
    from iolab.classic import registered  # noqa: F401


_registry.fill_on_first_use(_register_engines)

__all__ = ["IolabError", "fio", "load", "manifests", "__version__"]
