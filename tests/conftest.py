"""Shared test set-up: the iolab command of this checkout."""
import os
import shutil

import pytest

from cli_helpers import iolab_cli


@pytest.fixture
def iolab():
    return iolab_cli


def pytest_report_header(config):
    return [f"iolab tests: fio={shutil.which('fio')}, root={os.geteuid() == 0}"]
