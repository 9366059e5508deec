"""The lab test tier: ``python -m iolab.lab.tier [PYTEST ARGS]``.

Boots the lab VM once through ``iolab lab`` (so every ``make test`` proves that
command on a real boot) and runs inside it ``iolab recipes`` (its listing must
come back through the shared result directory) beside ``pytest -m "lab or
stock_kernel" tests/lab`` and the :data:`STOCK_KERNEL_TESTS` files with the
checkout's own ``.venv`` (no cache provider: the root is read-only there; junit
XML and what the tests printed go to the shared result directory, pytest's
temporary files to the scratch disk). ``lab`` tests are written for the VM;
``stock_kernel`` tests are ordinary host tests that need a part of the kernel
this host may lack (md, dm, cgroup v2, loop partition scan): the host deselects
both (tests/conftest.py), the VM runs them, and a ``stock_kernel`` test that
skips there fails (the stock kernel has every part they need). Prints pytest's output,
a closing summary line from the junit XML with the tier's wall time, and exits
non-zero when a test failed, when none ran (pytest's exit 5), when the recipe
listing did not come back or when the VM did not finish. When the lab cannot be
made on this machine it prints ONE line saying why and exits 0.
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from iolab.lab.vm import CHECKOUT, DEFAULT_DISK_DIR, availability

TIER_TIMEOUT = 1500.0  # seconds for python images, boot and the whole lab suite under TCG (it takes ~10-11 min)
PYTEST_NO_TESTS = 5
GUEST_MARKERS = "lab or stock_kernel"
# the files outside tests/lab with `stock_kernel` tests: passed by name (collecting all of tests/
# costs a minute of imports under TCG); tests/conftest.py refuses a marked test in a file not listed
STOCK_KERNEL_TESTS = ("tests/devices/test_devices.py", "tests/devices/test_setup_plan.py",
                      "tests/isolation/test_blockstat.py", "tests/isolation/test_cgroups.py")


def guest_command(results: Path, extra: list[str]) -> str:
    # no cache provider (read-only root), no nbval (its jupyter imports cost seconds under TCG);
    # -rP shows what each test printed (the measured figures), --durations where the time went
    argv = [str(CHECKOUT / ".venv" / "bin" / "python"), "-m", "pytest", "-m", GUEST_MARKERS,
            "-p", "no:cacheprovider", "-p", "no:nbval", f"--junitxml={results / 'junit.xml'}",
            "--basetemp=/var/tmp/pytest", "-o", "addopts=-ra -rP --durations=8",
            *(extra or ["tests/lab", *STOCK_KERNEL_TESTS])]
    return "MPLBACKEND=Agg " + shlex.join(argv)


def summarize(junit: Path) -> tuple[dict, str]:
    """Counts from pytest's junit XML and a closing line 'lab: N passed, N failed, ...'."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    line = f"lab: {passed} passed, {counts['failures']} failed"
    if counts["skipped"]:
        line += f", {counts['skipped']} skipped"
    if counts["errors"]:
        line += f", {counts['errors']} errors"
    return counts, line


def tier_argv(results: Path, extra: list[str], timeout: float) -> list[str]:
    """The tier boots through ``iolab lab`` (so every ``make test`` proves that command on a real
    boot), runs ``iolab recipes`` inside (its output comes back through the shared directory),
    then the lab tests."""
    # `iolab recipes` runs beside pytest's start-up: both are mostly imports, one vCPU each
    inside = (f"export IOLAB_LAB_RESULTS={shlex.quote(str(results))}; "
              f"iolab recipes > {shlex.quote(str(results / 'recipes.txt'))} 2>&1 & recipes=$!; "
              + guest_command(results, extra) + "; rc=$?; wait $recipes; exit $rc")
    return [sys.executable, "-m", "iolab", "lab", "--scratch", "8G", "--disk", "1G", "--disk", "1G", "--nvme", "256M",
            "--memory", "2G", "--cpus", "2", "--data", str(results / "data"), "--rwdir", str(results),
            "--timeout", f"{timeout:g}", "--", "sh", "-c", inside]


def _recipes_came_back(results: Path) -> str | None:
    listing = results / "recipes.txt"
    text = listing.read_text() if listing.exists() else ""
    if "quick" in text and "cachecheck" in text:
        return None
    return f"`iolab lab -- iolab recipes` brought back no recipe list: {text.strip()[-300:] or 'no output'}"


def run_tier(extra: list[str], *, timeout: float = TIER_TIMEOUT) -> int:
    results = Path(tempfile.mkdtemp(prefix="iolab-lab-results-", dir=DEFAULT_DISK_DIR))
    try:
        started = time.monotonic()
        try:
            rc = subprocess.run(tier_argv(results, extra, timeout), cwd=CHECKOUT, timeout=timeout + 120).returncode
        except subprocess.TimeoutExpired:
            print(f"iolab test: lab tier failed: iolab lab outlived {timeout + 120:g} s", file=sys.stderr)
            return 1
        junit = results / "junit.xml"
        if rc == PYTEST_NO_TESTS:
            print("iolab test: the lab tier collected no test; that is a broken suite, not a pass", file=sys.stderr)
            return 1
        if not junit.exists():
            print(f"iolab test: the lab VM exited with {rc} and wrote no test results", file=sys.stderr)
            return rc or 1
        _, line = summarize(junit)
        print(f"{line} in {time.monotonic() - started:.0f} s (python images, boot and tests)", flush=True)
        missing = _recipes_came_back(results)
        if missing:
            print(f"iolab test: lab tier failed: {missing}", file=sys.stderr)
            return rc or 1
        return rc
    finally:
        shutil.rmtree(results, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    why_not = availability()
    if why_not:
        print(f"iolab test: lab tier skipped: {why_not}", flush=True)
        return 0
    return run_tier(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
