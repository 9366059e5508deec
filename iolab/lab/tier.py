"""The lab test tier: ``python -m iolab.lab.tier [PYTEST ARGS]``.

Boots the lab VM once and runs ``pytest -m lab tests/lab`` inside with the
checkout's own ``.venv`` (both visible read-only in the guest: no cache
provider, no bytecode; junit XML goes to a shared result directory, pytest's
temporary files to the scratch disk). Prints pytest's output as it comes and a
closing summary line from the junit XML, and exits non-zero when a test failed,
when none ran (pytest's exit 5) or when the VM did not finish. When the lab
cannot be made on this machine it prints ONE line saying why and exits 0.
"""
from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.lab.vm import CHECKOUT, DEFAULT_DISK_DIR, LabConfig, availability, run_in_vm

TIER_TIMEOUT = 1200.0  # seconds for boot + the whole lab suite under TCG
PYTEST_NO_TESTS = 5


def guest_command(results: Path, extra: list[str]) -> str:
    argv = [str(CHECKOUT / ".venv" / "bin" / "python"), "-m", "pytest", "-m", "lab", "-p", "no:cacheprovider",
            f"--junitxml={results / 'junit.xml'}", "--basetemp=/var/tmp/pytest", "-o", "addopts=-ra",
            *(extra or ["tests/lab"])]
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


def run_tier(extra: list[str], *, timeout: float = TIER_TIMEOUT) -> int:
    results = Path(tempfile.mkdtemp(prefix="iolab-lab-results-", dir=DEFAULT_DISK_DIR))
    try:
        config = LabConfig(memory="2G", cpus=2, scratch="8G", disks=["1G", "1G"], rwdirs=[results],
                           timeout=timeout, env={"IOLAB_LAB_RESULTS": str(results)})
        try:
            rc = run_in_vm(guest_command(results, extra), config)
        except IolabError as exc:
            print(f"iolab test: lab tier failed: {exc}", file=sys.stderr)
            return 1
        junit = results / "junit.xml"
        if rc == PYTEST_NO_TESTS:
            print("iolab test: the lab tier collected no test; that is a broken suite, not a pass", file=sys.stderr)
            return 1
        if not junit.exists():
            print(f"iolab test: the lab VM exited with {rc} and wrote no test results", file=sys.stderr)
            return rc or 1
        _, line = summarize(junit)
        print(line, flush=True)
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
