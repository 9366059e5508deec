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

The fleet test crosses a machine boundary (:data:`HOP_TEST`): the VM gets one
network device whose only way in is this machine's ``127.0.0.1:PORT`` forwarded
to the guest's port 22 (``iolab lab --ssh-port``). Its guest half starts sshd
(authorizing a key the tier makes here) and ``iolab server`` in the guest; its
host half (marker ``lab_hop``) runs HERE, in a pytest beside the VM, and reaches
that server with ``iolab run --hosts`` over SSH. The two meet in the shared
``hop`` directory (the guest writes ``ready.json``; the host tells the guest it
is done over SSH, and the tier writes ``vm-exited`` when the VM is gone); the
tier fails unless the host half passed.
"""
from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from iolab.core import processes
from iolab.lab.vm import CHECKOUT, DEFAULT_DISK_DIR, availability

TIER_TIMEOUT = 1500.0  # seconds for python images, boot and the whole lab suite under TCG (it takes ~10-11 min)
PYTEST_NO_TESTS = 5
GUEST_MARKERS = "lab or stock_kernel"
# the files outside tests/lab with `stock_kernel` tests: passed by name (collecting all of tests/
# costs a minute of imports under TCG); tests/conftest.py refuses a marked test in a file not listed
STOCK_KERNEL_TESTS = ("tests/devices/test_devices.py", "tests/devices/test_setup_plan.py",
                      "tests/isolation/test_blockstat.py", "tests/isolation/test_cgroups.py")
HOP_TEST = "tests/lab/test_lab_fleet_ssh.py"  # its `lab_hop` half runs on this machine, beside the VM
HOP_MARKER = "lab_hop"
HOP_ENV, HOP_PORT_ENV = "IOLAB_LAB_HOP", "IOLAB_LAB_HOP_PORT"
HOP_GRACE = 300.0  # seconds the host half may take after the VM is gone (it stops waiting at once then)


def guest_command(results: Path, extra: list[str]) -> str:
    # no cache provider (read-only root), no nbval (its jupyter imports cost seconds under TCG), no xdist (one
    # worker: the lab's tests measure against time);
    # -rP shows what each test printed (the measured figures), --durations where the time went
    argv = [str(CHECKOUT / ".venv" / "bin" / "python"), "-m", "pytest", "-m", GUEST_MARKERS,
            "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:xdist", f"--junitxml={results / 'junit.xml'}",
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


def tier_argv(results: Path, extra: list[str], timeout: float, hop: tuple[Path, int] | None = None) -> list[str]:
    """The tier boots through ``iolab lab`` (so every ``make test`` proves that command on a real
    boot), runs ``iolab recipes`` inside (its output comes back through the shared directory),
    then the lab tests; ``hop`` (directory, port): the guest is reached from here over SSH."""
    hop_env, hop_args = "", []
    if hop is not None:
        hop_env = f"export {HOP_ENV}={shlex.quote(str(hop[0]))} {HOP_PORT_ENV}={hop[1]}; "
        hop_args = ["--ssh-port", str(hop[1])]
    # `iolab recipes` runs beside pytest's start-up: both are mostly imports, one vCPU each
    inside = (f"export IOLAB_LAB_RESULTS={shlex.quote(str(results))}; " + hop_env +
              f"iolab recipes > {shlex.quote(str(results / 'recipes.txt'))} 2>&1 & recipes=$!; "
              + guest_command(results, extra) + "; rc=$?; wait $recipes; exit $rc")
    return [sys.executable, "-m", "iolab", "lab", "--scratch", "8G", "--disk", "1G", "--disk", "1G", "--nvme", "256M",
            "--sata", "256M", "--memory", "2G", "--cpus", "2", "--data", str(results / "data"), "--rwdir", str(results),
            *hop_args, "--timeout", f"{timeout:g}", "--", "sh", "-c", inside]


def hop_wanted(extra: list[str]) -> bool:
    """Whether the guest runs the hop's guest half: the default files, or :data:`HOP_TEST` named."""
    return not extra or any(arg.split("::")[0].rstrip("/") in (HOP_TEST, "tests/lab") for arg in extra)


def prepare_hop(results: Path) -> tuple[Path, int] | None:
    """The hop's directory (with the key the guest's sshd authorizes) and a free port on 127.0.0.1 here;
    None, with one line, when this machine has no OpenSSH client to make the key and use it."""
    if shutil.which("ssh-keygen") is None or shutil.which("ssh") is None:
        print("iolab test: the lab's SSH hop is skipped: no OpenSSH client here (openssh-client)", flush=True)
        return None
    hop = results / "hop"
    hop.mkdir(mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "iolab-lab-hop", "-f", str(hop / "user")],
                   check=True, stdin=subprocess.DEVNULL)
    with socket.socket() as probe:  # qemu binds it a minute later; a port taken meanwhile fails the boot, loudly
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return hop, port


def host_half_argv(hop: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", HOP_MARKER, "-p", "no:cacheprovider", "-p", "no:nbval",
            f"--junitxml={hop / 'host-junit.xml'}", "-o", "addopts=-ra -rP", HOP_TEST]


def start_host_half(hop: Path, port: int) -> subprocess.Popen:
    """The hop's host half: a pytest here, beside the VM; its output in ``hop/host.log``."""
    log = open(hop / "host.log", "wb")
    try:
        return subprocess.Popen(host_half_argv(hop), cwd=CHECKOUT, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, **{HOP_ENV: str(hop), HOP_PORT_ENV: str(port)}))
    finally:
        log.close()


def finish_host_half(hop: Path, proc: subprocess.Popen) -> str | None:
    """After the VM: tell the host half (``vm-exited``), wait for it, print its output; None when it
    passed, else why the tier fails."""
    (hop / "vm-exited").touch()
    processes.end(proc, grace=HOP_GRACE, first=None, group=True)  # its own time to end, then SIGKILL
    log = hop / "host.log"
    print("iolab test: the SSH hop's host half (pytest here, beside the VM):", flush=True)
    print(log.read_text(errors="replace") if log.exists() else "(no output)", flush=True)
    junit = hop / "host-junit.xml"
    if not junit.exists():
        return f"the SSH hop's host half exited with {proc.returncode} and wrote no test results"
    counts, line = summarize(junit)
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return None if passed == 1 and counts["tests"] == 1 else f"the SSH hop's host half: {line.removeprefix('lab: ')}"


def _recipes_came_back(results: Path) -> str | None:
    listing = results / "recipes.txt"
    text = listing.read_text() if listing.exists() else ""
    if "quick" in text and "cachecheck" in text:
        return None
    return f"`iolab lab -- iolab recipes` brought back no recipe list: {text.strip()[-300:] or 'no output'}"


def run_tier(extra: list[str], *, timeout: float = TIER_TIMEOUT) -> int:
    results = Path(tempfile.mkdtemp(prefix="iolab-lab-results-", dir=DEFAULT_DISK_DIR))
    host_half = None
    try:
        started = time.monotonic()
        hop = prepare_hop(results) if hop_wanted(extra) else None
        if hop is not None:
            host_half = start_host_half(*hop)
        try:
            rc = subprocess.run(tier_argv(results, extra, timeout, hop), cwd=CHECKOUT,
                                timeout=timeout + 120).returncode
        except subprocess.TimeoutExpired:
            print(f"iolab test: lab tier failed: iolab lab outlived {timeout + 120:g} s", file=sys.stderr)
            return 1
        hop_failed = finish_host_half(hop[0], host_half) if host_half is not None else None
        host_half = None
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
        if missing or hop_failed:
            print(f"iolab test: lab tier failed: {missing or hop_failed}", file=sys.stderr)
            return rc or 1
        return rc
    finally:
        if host_half is not None:  # interrupted: the host half goes too
            processes.end(host_half, first=[], group=True)
        shutil.rmtree(results, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    why_not = availability()
    if why_not:
        print(f"iolab test: lab tier skipped: {why_not}", flush=True)
        return 0
    return run_tier(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
