"""Fixtures of the MariaDB tests (sql-bench, the server's install)."""
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def target():
    """A directory the mysql account can reach; any server directory left in it is the test's failure."""
    path = Path(tempfile.mkdtemp(prefix="iolab-sqltest-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
