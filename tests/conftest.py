"""Shared test set-up: the iolab command of this checkout, and which tests run in the lab VM."""
import os
import shutil
import signal
from pathlib import Path

import pytest

from alone_tests import alone
from cli_helpers import IN_LAB, iolab_cli, live_processes

# A suite started with SIGINT ignored (`make test &` in a script: POSIX shells ignore SIGINT in
# background jobs) passes SIG_IGN to every iolab it starts, and the tests that press Ctrl-C on one
# would see it shrug. Python only turns SIGINT into KeyboardInterrupt when it starts with the
# default action, so give the suite (and through exec, its children) the default back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_itemcollected(item):
    """Marker ``alone`` on the tests that measure against time (tests/alone_tests.py)."""
    if alone(item.path, item.config.rootpath):
        item.add_marker("alone")


def pytest_collection_modifyitems(config, items):
    """Outside the lab VM, deselect (not skip) the tests that run inside it: ``lab`` (written for the
    VM) and ``stock_kernel`` (need md, dm, cgroup v2 or loop partition scan, which the stock kernel
    has). ``-m stock_kernel`` on a host that has them runs the latter here too."""
    if IN_LAB:
        return
    _check_tier_passes(config, [item for item in items if item.get_closest_marker("stock_kernel")])
    markexpr = config.getoption("markexpr") or ""
    markers = ("lab",) if "stock_kernel" in markexpr else ("lab", "stock_kernel")
    if "lab_hop" not in markexpr:  # the host half of a lab test: only beside the VM (iolab/lab/tier.py)
        markers += ("lab_hop",)
    inside = [item for item in items if any(item.get_closest_marker(m) for m in markers)]
    if inside:
        config.hook.pytest_deselected(items=inside)
        items[:] = [item for item in items if item not in inside]


def _check_tier_passes(config, marked) -> None:
    """A stock_kernel test in a file the lab tier does not pass to the guest would run nowhere."""
    if not marked:
        return
    from iolab.lab.tier import STOCK_KERNEL_TESTS
    root = Path(config.rootpath)
    files = {str(Path(item.path).relative_to(root)) for item in marked}
    unlisted = sorted(files - set(STOCK_KERNEL_TESTS))
    if unlisted:
        raise pytest.UsageError(f"stock_kernel tests in {', '.join(unlisted)}, a file the lab tier does not run: "
                                "add it to STOCK_KERNEL_TESTS in iolab/lab/tier.py")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In the lab VM a stock_kernel test may not skip: its kernel has every part they need."""
    outcome = yield
    report = outcome.get_result()
    if IN_LAB and report.skipped and item.get_closest_marker("stock_kernel") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a stock_kernel test skipped in the lab VM, whose kernel must run it: {reason}"


@pytest.fixture(scope="session", autouse=True)
def iolab_cache_dir(tmp_path_factory):
    """One $IOLAB_CACHE_DIR for the whole session, removed at its end: tests never write the user's
    ~/.cache, and the sqlbench tests after the first copy its pristine MariaDB data directory instead of
    running mariadb-install-db again. Under pytest's basetemp, which is writable in the lab VM too
    (/var/tmp/pytest; the host root is read-only there). The iolab processes the tests start inherit it."""
    path = tmp_path_factory.mktemp("iolab-cache")
    before = os.environ.get("IOLAB_CACHE_DIR")
    os.environ["IOLAB_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop("IOLAB_CACHE_DIR", None)
        else:
            os.environ["IOLAB_CACHE_DIR"] = before
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def iolab():
    return iolab_cli


@pytest.fixture(scope="session")
def cdm_demo_mix_run(tmp_path_factory):
    """One real crystaldiskmark run shared by the preset tests and the export/report tests of its mix row:
    demo + --mix R70, two passes of 0.5 s on an 8 MiB file: SEQ1M read, write, then its mix (~15 s).
    Returns (run dir, target directory)."""
    root = tmp_path_factory.mktemp("cdm-mix")
    target = root / "target"
    target.mkdir()
    proc = iolab_cli("run", "crystaldiskmark", "--target", target, "--preset", "demo", "--mix", "R70",
                     "--size", "8M", "--runtime", "0.5", "--repeat", "2", "--pause", "0",
                     "--data", root / "data", "--no-progress", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1]), target


@pytest.fixture(scope="session")
def steady_hdd_run(tmp_path_factory):
    """One real steady-state run, shared by the recipe's and the section's tests: hdd's constant throttle is
    steady at round 5 (~13 s; tests/steady_fixtures.py)."""
    from steady_fixtures import steady_run
    return steady_run(tmp_path_factory.mktemp("steady"), "emulated:hdd", "16M", "--label", "hdd", "--max-rounds", "8")


@pytest.fixture(scope="session")
def unsteady_hdd_run(tmp_path_factory):
    """--max-time 6 and --precondition-size 24M (under the PTS's 32M): preconditioning and rounds cut short
    by the time bound, fewer rounds than a window, not steady and why (~6 s)."""
    from steady_fixtures import steady_run
    return steady_run(tmp_path_factory.mktemp("unsteady"), "emulated:hdd", "16M", "--label", "hdd",
                      "--max-time", "6", "--precondition-size", "24M")


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
    # a confined socket server's fio names its staging socket, not the endpoint: look for what it ran
    # as (its --server= argument) and for every process it had, whatever their command lines say
    before = [(server, server.members(), next(a for a in server.argv if a.startswith("--server="))) for server in started]
    for server in started:
        server.stop()
    from iolab.core.procstat import processes
    alive = {p.pid for p in processes() if p.state not in ("Z", "X")}
    for server, members, spec in before:
        assert live_processes(spec) == [] and sorted(alive & set(members)) == [], (server, members)
