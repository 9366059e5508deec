"""Where the data that ships with iolab lives: recipes, notebooks and reference figures.

In a source checkout (``make setup``'s editable install) they are the top-level folders
``recipes/``, ``notebooks/`` and ``data/reference/``. A wheel or ``pip install .`` copies the
same folders into the package as ``iolab/_shipped/<name>`` (see ``setup.py``), so an installed
iolab finds them with no environment variable. ``IOLAB_RECIPES``, ``IOLAB_NOTEBOOKS`` and
``IOLAB_REFERENCE`` still override either place.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
#: name -> (environment override, folder in the source tree)
SHIPPED = {
    "recipes": ("IOLAB_RECIPES", "recipes"),
    "notebooks": ("IOLAB_NOTEBOOKS", "notebooks"),
    "reference": ("IOLAB_REFERENCE", "data/reference"),
}


def shipped(name: str) -> Path:
    """The directory of the shipped data ``name`` (one of :data:`SHIPPED`)."""
    env, source = SHIPPED[name]
    if os.environ.get(env):
        return Path(os.environ[env])
    installed = PACKAGE / "_shipped" / name
    if installed.is_dir():
        return installed
    return PACKAGE.parent / source
