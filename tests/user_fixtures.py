"""Another local user for the tests that check what iolab lets them do: ``nobody`` (uid 65534).

Import the fixture into a test module with ``from user_fixtures import NOBODY, nobody_home  # noqa: F401``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

NOBODY = 65534


@pytest.fixture
def nobody_home():
    """A home directory of user nobody that nobody can reach (pytest's temp dirs are root's, 0700)."""
    base = tempfile.mkdtemp(prefix="iolab-nobody-home-", dir="/var/tmp")
    os.chmod(base, 0o755)
    home = Path(base) / "home"
    home.mkdir(mode=0o755)
    os.chown(home, NOBODY, NOBODY)
    yield home
    shutil.rmtree(base)
