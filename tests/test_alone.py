"""tools/test.sh runs the host tests on two pytest-xdist workers, except the ones that measure against time
(marker ``alone``: tests/alone_tests.py), which run after them with nothing beside them."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from alone_tests import ALONE, alone

ROOT = Path(__file__).resolve().parents[1]

#: the tests' helpers that compare a measurement with a throttle's rate or time a second writer against it
TIMING_HELPERS = re.compile(r"\b(within|under_throttle|at_throttle|throttle_slack|with_second_writer)\(")


def host_test_files() -> list[Path]:
    return sorted(p for p in (ROOT / "tests").rglob("test_*.py") if "lab" not in p.relative_to(ROOT).parts[:2])


def test_every_entry_of_alone_is_a_test_directory_or_file():
    for entry in ALONE:
        path = ROOT / entry
        assert path.is_dir() if entry.endswith("/") else path.is_file() and path.name.startswith("test_"), entry


def test_a_file_that_measures_against_a_throttle_runs_alone():
    beside = [str(p.relative_to(ROOT)) for p in host_test_files()
              if TIMING_HELPERS.search(p.read_text()) and not alone(p, ROOT)]
    assert beside == [], f"add to ALONE in tests/alone_tests.py: {beside}"


def test_minus_m_alone_selects_the_files_of_alone_and_no_other():
    """What tools/test.sh's second pytest runs, and its first leaves out."""
    def collected(marker):
        proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-m", marker, "tests/engine/test_faults.py", "tests/engine/test_fioparse.py"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}
    assert collected("alone") == {"tests/engine/test_faults.py"}
    assert collected("not alone") == {"tests/engine/test_fioparse.py"}


def test_ctrl_c_during_the_tests_beside_each_other_ends_the_suite():
    """An interrupted first pytest (status 2) must not go on to the tests that run alone."""
    proc = subprocess.Popen(["bash", "tools/test.sh"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True,
                            env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
                                 "IOLAB_LAB": "skip", "PYTEST_ADDOPTS": "-p no:cacheprovider"})
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "test session starts" in line:
                time.sleep(2)  # into the first pytest's collection, before any test has set anything up
                os.killpg(proc.pid, signal.SIGINT)
                break
        for line in proc.stdout:
            lines.append(line)
            if "test session starts" in line:  # the second pytest started: stop it too, then fail
                os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = "".join(lines)
    assert output.count("test session starts") == 1, output[-3000:]
    assert rc != 0, output[-3000:]  # pytest's 2 (interrupted), passed on
