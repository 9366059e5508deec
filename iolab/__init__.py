"""iolab: reproducible storage benchmarks with fio, cache isolation and reports."""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import IolabError  # noqa: E402
from .store import load, manifests  # noqa: E402

__all__ = ["IolabError", "load", "manifests", "__version__"]
