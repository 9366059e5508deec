"""Build hook: a wheel (or ``pip install .``) carries the recipes, notebooks and reference figures.

They live at the top of the source tree (``recipes/``, ``notebooks/``, ``data/reference/``), where
users and the README find them; a built package copies them into ``iolab/_shipped/`` so that an
installed iolab finds them without the source tree (``iolab.core.paths.shipped``). An editable
install (``make setup``) reads them from the source tree instead. Everything else is in pyproject.toml.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = {"recipes": "recipes", "notebooks": "notebooks", "reference": "data/reference"}


class BuildWithShippedData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name, source in SHIPPED.items():
            target = Path(self.build_lib) / "iolab" / "_shipped" / name
            shutil.copytree(ROOT / source, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithShippedData})
