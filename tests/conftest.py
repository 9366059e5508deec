"""Shared test set-up: the iolab command of this checkout."""
import os
import shutil

import pytest

from cli_helpers import iolab_cli, live_processes


@pytest.fixture
def iolab():
    return iolab_cli


def pytest_report_header(config):
    return [f"iolab tests: fio={shutil.which('fio')}, root={os.geteuid() == 0}"]


@pytest.fixture
def servers():
    """Start fio servers through this factory; all are stopped and checked gone, even if the test fails."""
    from iolab.fleet import fioserver
    started = []

    def start(**kwargs):
        server = fioserver.start(**kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    for server in started:
        assert live_processes(f"--server={server.endpoint.client_spec}") == []
