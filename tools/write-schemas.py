#!/usr/bin/env python3
"""Write the JSON Schemas of recipes, setup plans, fleet inventories and batch files (schemas/*.schema.json).

    .venv/bin/python tools/write-schemas.py [DIR]     # default: schemas/ of this checkout

Run it after changing a schema model (iolab/engine/recipe_schema.py, iolab/devices/plan/schema.py,
iolab/fleet/inventory_schema.py, iolab/fleet/batch_schema.py); tests/interop/test_editor_schemas.py
fails while the committed files differ from what the models give.
"""
import logging
import sys

from iolab.interop import editor_schemas

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    editor_schemas.write(sys.argv[1] if len(sys.argv) > 1 else None)
