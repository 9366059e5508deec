"""JSON Schemas of the YAML files people write, for editors: ``schemas/<kind>.schema.json``.

Each is written from the pydantic model the loader checks the file against
(:class:`~iolab.engine.recipe_schema.RecipeFile`,
:class:`~iolab.devices.plan.schema.PlanFile`,
:class:`~iolab.fleet.inventory_schema.InventoryFile`,
:class:`~iolab.fleet.batch_schema.BatchFile`), so an editor with a YAML
language server (VS Code's ``yaml.schemas``, a ``# yaml-language-server: $schema=``
line) completes and checks the same fields iolab reads. What spans fields (names
used once, sizes that fit) is iolab's own check at load time. The committed
files are regenerated with ``python tools/write-schemas.py`` (a test fails when
they are stale).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from iolab.core import paths
from iolab.devices.plan.schema import PlanFile
from iolab.engine.recipe_schema import RecipeFile
from iolab.fleet.batch_schema import BatchFile
from iolab.fleet.inventory_schema import InventoryFile

log = logging.getLogger(__name__)

#: kind -> (model, what it describes)
MODELS = {
    "recipe": (RecipeFile, "an iolab recipe (recipes/*.yaml): a declarative benchmark suite"),
    "plan": (PlanFile, "an iolab setup plan (iolab setup PLAN): loop devices, arrays, dm devices, file systems"),
    "inventory": (InventoryFile, "an iolab fleet inventory (iolab run --hosts FILE): the fio servers"),
    "batch": (BatchFile, "an iolab batch file (iolab batch FILE): entries of the measure notebook"),
}


def json_schema(kind: str) -> dict:
    """The JSON Schema (draft 2020-12) of a ``kind`` of file (a key of :data:`MODELS`)."""
    model, description = MODELS[kind]
    body = {k: v for k, v in model.model_json_schema().items() if k not in ("title", "description")}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"iolab {kind}",
            "description": description, **body}


def text(kind: str) -> str:
    """The schema as it is committed: indented JSON, one trailing newline (the models' docstrings'
    reStructuredText ``literals`` as Markdown `literals`, which editors show)."""
    return json.dumps(json_schema(kind), indent=2, ensure_ascii=False).replace("``", "`") + "\n"


def default_dir() -> Path:
    """``schemas/`` of this checkout (editors read them there; they are not installed with the package)."""
    return paths.PACKAGE.parent / "schemas"


def write(directory: str | os.PathLike | None = None) -> list[Path]:
    """Write ``<kind>.schema.json`` for every kind into ``directory`` (default: :func:`default_dir`)."""
    directory = Path(directory) if directory is not None else default_dir()
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in MODELS:
        path = directory / f"{kind}.schema.json"
        path.write_text(text(kind), encoding="utf-8")
        log.info("wrote %s", path)
        written.append(path)
    return written
