"""Shared test set-up: the iolab command of this checkout."""
import os
import shutil
import signal

import pytest

from cli_helpers import iolab_cli, live_processes

# A suite started with SIGINT ignored (`make test &` in a script: POSIX shells ignore SIGINT in
# background jobs) passes SIG_IGN to every iolab it starts, and the tests that press Ctrl-C on one
# would see it shrug. Python only turns SIGINT into KeyboardInterrupt when it starts with the
# default action, so give the suite (and through exec, its children) the default back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
