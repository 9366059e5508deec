"""Optional dependencies, imported in one place with an error that says how to get them."""
from __future__ import annotations

from iolab.core.errors import IolabError

NOTEBOOK_EXTRA = "pip install 'iolab[notebook]'"


def pyplot():
    """``matplotlib.pyplot``, or an :class:`IolabError` naming the extra to install."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is in the notebook extra
        raise IolabError("matplotlib is needed to draw plots", hint=NOTEBOOK_EXTRA) from exc
    return plt


def labels(defaults: dict, overrides: dict | None) -> dict:
    """A plot's texts: its defaults with the caller's ``labels=`` (e.g. Japanese) on top."""
    merged = dict(defaults)
    if overrides:
        unknown = set(overrides) - set(defaults)
        if unknown:
            raise IolabError(f"unknown label key(s) {', '.join(sorted(unknown))}", context="labels",
                             hint=f"keys are: {', '.join(defaults)}")
        merged.update(overrides)
    return merged
