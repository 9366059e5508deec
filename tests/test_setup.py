"""The set-up scripts: each command demands only what it needs, normal users get the right answer,
and the package lists (tools/packages.txt) name every program the iolab package runs.

The set-up check runs for real, as root and as ``nobody`` with a PATH without /usr/sbin (what a
normal user has). The install path cannot run for real in a test (it would install packages on
this machine): there ``apt-get`` is a stand-in on PATH that records what the policy said while
it ran, so the service hold around it (a temporary policy-rc.d) is checked for real.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from iolab.core import commands
from iolab.core.errors import IolabError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "install-system-deps.sh"
PACKAGE_LIST = ROOT / "tools" / "packages.txt"
USER_PATH = "/usr/local/bin:/usr/bin:/bin"  # a normal user's PATH: no sbin

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs the set-up as root and as nobody (needs root)")


def package_lines() -> list[tuple[str, str, list[str]]]:
    """``(set, package, checks)`` for every line of tools/packages.txt."""
    rows = []
    for line in PACKAGE_LIST.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        set_name, package, *checks = line.split()
        rows.append((set_name, package, checks))
    return rows


def listed_programs() -> dict[str, tuple[str, str]]:
    """program -> (set, package): the programs of the list (a path check names its file's program)."""
    programs = {}
    for set_name, package, checks in package_lines():
        for check in checks:
            if not check.startswith("@"):
                programs[os.path.basename(check)] = (set_name, package)
    return programs


@pytest.fixture
def public_dir():
    """A copy of the set-up script and its list that ``nobody`` can read (a checkout under /root is not)."""
    directory = Path(tempfile.mkdtemp(prefix="iolab-setup-"))
    try:
        directory.chmod(0o755)
        for source in (SCRIPT, PACKAGE_LIST):
            shutil.copy(source, directory / source.name)
            (directory / source.name).chmod(0o644)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def setup_check(directory: Path, *args: str, user: str | None = None, env: dict | None = None):
    environment = {"PATH": USER_PATH if user else os.environ.get("PATH", USER_PATH), "LANG": "C.UTF-8",
                   "HOME": "/nonexistent" if user else os.environ.get("HOME", "/root"), **(env or {})}
    argv = ["bash", str(directory / SCRIPT.name), *args]
    if user:
        argv = ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *argv]
        environment = None
    # stdin is not a terminal: the script must never stop to ask for a sudo password
    return subprocess.run(argv, capture_output=True, text=True, env=environment, stdin=subprocess.DEVNULL,
                          timeout=300)


def missing_named(stderr: str) -> list[str]:
    match = re.search(r"these packages are missing(?: and I am not root)?: (.*)", stderr)
    return match.group(1).split() if match else []


@needs_root
def test_normal_user_gets_roots_answer(public_dir):
    """Every package installed here is found by nobody too (mkfs.ext4, sshd, mdadm... are in /usr/sbin)."""
    for set_name in ("demo", "test"):
        as_root = setup_check(public_dir, "--check", set_name)
        as_user = setup_check(public_dir, "--check", set_name, user="nobody")
        assert as_user.returncode == as_root.returncode, (set_name, as_root.stderr, as_user.stderr)
        assert missing_named(as_user.stderr) == missing_named(as_root.stderr), (set_name, as_user.stderr)


@needs_root
def test_normal_user_demo_setup_asks_for_nothing(public_dir):
    """What `make demo` runs, as a normal user on a machine with the demo's packages: silent, exit 0."""
    proc = setup_check(public_dir, "demo", user="nobody")
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", "")


@needs_root
def test_normal_user_is_told_only_what_is_missing(public_dir):
    demo = [line for line in PACKAGE_LIST.read_text().splitlines() if line.startswith("demo ")]
    (public_dir / "packages.txt").write_text("\n".join(demo + ["demo  iolab-absent-package  iolab-absent-program",
                                                                "test  iolab-test-only-package  iolab-absent-2"])
                                             + "\n")
    proc = setup_check(public_dir, "demo", user="nobody")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == "iolab setup: these packages are missing and I am not root: iolab-absent-package", proc.stderr
    assert "apt-get install --no-install-recommends iolab-absent-package" in lines[1]
    # the test set adds its own, never the demo's installed ones
    proc = setup_check(public_dir, "--check", "test", user="nobody")
    assert missing_named(proc.stderr) == ["iolab-absent-package", "iolab-test-only-package"], proc.stderr


def test_usage_error():
    proc = subprocess.run(["bash", str(SCRIPT), "everything"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("usage:")


@needs_root
def test_root_with_everything_installed_changes_nothing():
    """What `make test` runs first, in this checkout: nothing to install, no policy file made or removed."""
    policy = Path("/usr/sbin/policy-rc.d")
    before = policy.read_bytes() if policy.exists() else None
    proc = subprocess.run(["bash", str(SCRIPT), "test"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=300)
    assert (proc.returncode, proc.stderr) == (0, ""), "make test's packages must be installed here: " + proc.stderr
    assert (policy.read_bytes() if policy.exists() else None) == before


@pytest.fixture
def apt_stand_in():
    """A directory with an ``apt-get`` that asks the policy (as invoke-rc.d does) and then fails."""
    directory = Path(tempfile.mkdtemp(prefix="iolab-apt-"))
    try:
        apt = directory / "bin" / "apt-get"
        apt.parent.mkdir()
        apt.write_text('#!/bin/sh\n[ "$1" = update ] && exit 0\n'
                       '"$IOLAB_POLICY_RC_D" ssh start; echo "policy $?" >>"$APT_LOG"\n'
                       'for last; do :; done; echo "E: Unable to locate package $last" >&2; exit 100\n')
        apt.chmod(0o755)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_install(directory: Path, policy: Path):
    (directory / "packages.txt").write_text("test  iolab-absent-package  iolab-absent-program\n")
    env = dict(os.environ, PATH=f"{directory / 'bin'}:{os.environ['PATH']}", IOLAB_POLICY_RC_D=str(policy),
               IOLAB_PACKAGES=str(directory / "packages.txt"), APT_LOG=str(directory / "apt.log"))
    return subprocess.run(["bash", str(SCRIPT), "test"], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=120)


@needs_root
def test_install_denies_service_starts_and_removes_its_policy_after_a_failure(apt_stand_in):
    policy = apt_stand_in / "policy-rc.d"
    proc = run_install(apt_stand_in, policy)
    assert proc.returncode == 1
    assert "apt-get failed: E: Unable to locate package iolab-absent-package" in proc.stderr
    assert (apt_stand_in / "apt.log").read_text() == "policy 101\n"  # every start denied while apt ran
    assert not policy.exists()


@needs_root
def test_install_leaves_an_existing_policy_alone(apt_stand_in):
    policy = apt_stand_in / "policy-rc.d"
    policy.write_text("#!/bin/sh\n# the administrator's own\nexit 0\n")
    policy.chmod(0o755)
    proc = run_install(apt_stand_in, policy)
    assert proc.returncode == 1
    assert f"{policy} exists" in proc.stderr
    assert policy.read_text() == "#!/bin/sh\n# the administrator's own\nexit 0\n"
    assert stat.S_IMODE(policy.stat().st_mode) == 0o755
    assert (apt_stand_in / "apt.log").read_text() == "policy 0\n"


@needs_root
def test_install_takes_over_the_policy_a_killed_set_up_left(apt_stand_in):
    dead = subprocess.Popen(["true"])
    dead.wait()
    policy = apt_stand_in / "policy-rc.d"
    policy.write_text(f"#!/bin/sh\n# held by iolab's tools/install-system-deps.sh\n# pid {dead.pid}\nexit 101\n")
    proc = run_install(apt_stand_in, policy)
    assert proc.returncode == 1 and "exists" not in proc.stderr, proc.stderr
    assert (apt_stand_in / "apt.log").read_text() == "policy 101\n"
    assert not policy.exists()


@needs_root
def test_install_waits_for_a_live_set_up(apt_stand_in):
    policy = apt_stand_in / "policy-rc.d"
    text = f"#!/bin/sh\n# held by iolab's tools/install-system-deps.sh\n# pid {os.getpid()}\nexit 101\n"
    policy.write_text(text)
    proc = run_install(apt_stand_in, policy)
    assert proc.returncode == 1 and f"another set-up (pid {os.getpid()})" in proc.stderr, proc.stderr
    assert not (apt_stand_in / "apt.log").exists() and policy.read_text() == text


# ---- the lists against the code

#: calls whose first argument is an argv, and calls that look a program up
ARGV_CALLS = {"run", "Popen", "check_output", "check_call", "call", "popen", "wrap", "start"}
FINDERS = {"which", "_which"}
PROGRAM = re.compile(r"^[a-z][a-z0-9._+-]*$")
SYSTEM_PATH = re.compile(r"^/(usr/)?s?bin/([^/]+)$")


def _name(node) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _heads(node) -> list[str]:
    """The program of an argv expression: ``["prog", ...]``, ``[...] + rest``, ``a if c else b``."""
    if isinstance(node, (ast.List, ast.Tuple)):
        first = node.elts[0] if node.elts else None
        return [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
    if isinstance(node, ast.BinOp):
        return _heads(node.left)
    if isinstance(node, ast.IfExp):
        return _heads(node.body) + _heads(node.orelse)
    return []


def _argv_shaped(node) -> bool:
    """``["prog", "-x", ...]``: a name first, an option (a string starting with "-") after it."""
    if not isinstance(node, ast.List) or len(node.elts) < 2:
        return False
    strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return (isinstance(node.elts[0], ast.Constant) and isinstance(node.elts[0].value, str)
            and any(len(s) > 1 and s.startswith("-") for s in strings[1:]))


def programs_in_code(root: Path) -> dict[str, set[str]]:
    """Every external program the package names where it runs or looks one up: program -> places."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))

        def add(values, node):
            for value in values:
                if isinstance(value, str) and PROGRAM.match(value):
                    found[value].add(f"{path.relative_to(ROOT)}:{node.lineno}")

        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SYSTEM_PATH.match(node.value):
                add([SYSTEM_PATH.match(node.value).group(2)], node)
            if isinstance(node, ast.Call):
                name = _name(node.func)
                finder = name in FINDERS or (name == "find" and _name(getattr(node.func, "value", None)) == "commands")
                if finder and node.args and isinstance(node.args[0], ast.Constant):
                    add([node.args[0].value], node)
                if name in ARGV_CALLS and node.args:
                    add(_heads(node.args[0]), node)
                if name == "append" and node.args and re.search("argv|cmd", _name(node.func.value), re.I):
                    add(_heads(node.args[0]), node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = [_name(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
                if any(re.search("argv|cmd", t, re.I) for t in targets):
                    add(_heads(node.value), node)
                if any(t.endswith("PROGRAMS") for t in targets) and isinstance(node.value, (ast.Tuple, ast.List)):
                    add([e.value for e in node.value.elts if isinstance(e, ast.Constant)], node)
                if any(t.endswith("NAMES") for t in targets):  # alternatives: the first is the one installed
                    add(_heads(node.value), node)
            elif isinstance(node, ast.List) and node.elts and not any(isinstance(e, ast.Constant) for e in node.elts):
                for element in node.elts:  # a list of argvs
                    if isinstance(element, ast.List):
                        add(_heads(element), node)
            if _argv_shaped(node):
                add(_heads(node), node)
    return found


def test_scan_finds_the_programs_it_should():
    """The scanner itself: programs run in each of the ways the package runs them."""
    found = programs_in_code(ROOT / "iolab")
    for program in ("fio", "losetup", "mkfs.ext4", "mkfs.xfs", "mdadm", "sgdisk", "wipefs", "hdparm", "bonnie++",
                    "dmsetup", "mariadbd", "initdb", "pgbench", "ssh", "systemd-run"):
        assert program in found, program


def test_every_program_the_package_runs_is_in_a_list():
    listed = listed_programs()
    unlisted = {p: sorted(places)[:3] for p, places in programs_in_code(ROOT / "iolab").items() if p not in listed}
    assert not unlisted, f"programs iolab runs that tools/packages.txt does not name: {unlisted}"


def test_install_hints_name_the_listed_package():
    listed = listed_programs()
    for program, package in commands.PACKAGES.items():
        assert program in listed, program
        assert listed[program][1] == package, (program, package, listed[program])


def test_demo_set_holds_no_server():
    """make demo installs no database server, no sshd, nothing of the tests'."""
    demo = {package for set_name, package, _ in package_lines() if set_name == "demo"}
    assert demo == {"fio", "bubblewrap", "mount", "python3-venv", "fonts-ipaexfont-gothic"}


def _dpkg_owner(program: str) -> str | None:
    """The Debian package holding ``program`` on this machine (usr-merged paths tried both ways)."""
    path = commands.find(program)
    if path is None:
        return None
    name = os.path.basename(path)
    for candidate in dict.fromkeys([path, os.path.realpath(path)] + [f"{d}/{name}" for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")]):
        proc = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if not line.startswith("diversion ") and ":" in line:
                return line.split(":")[0].split(",")[0].strip()
    return None


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg-query: not a Debian system")
def test_listed_packages_hold_their_programs():
    """Where a program is installed here, dpkg says it comes from the package the list names."""
    wrong = {}
    for program, (set_name, package) in listed_programs().items():
        if package.startswith("pypi:") or program in ("initdb", "pg_ctl", "postgres", "pgbench", "psql", "vmlinuz-*"):
            continue  # from PyPI; PostgreSQL's are in postgresql-N (the list names the metapackage)
        owner = _dpkg_owner(program)
        if owner is not None and owner != package:
            wrong[program] = (package, owner)
    assert not wrong, f"program: (listed package, dpkg's owner): {wrong}"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg-query: not a Debian system")
def test_base_packages_are_never_missing():
    """The base set is not installed by iolab: Essential packages, or systemd (used only where it runs)."""
    for set_name, package, _ in package_lines():
        if set_name != "base" or package == "systemd":
            continue
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Essential}", package], capture_output=True, text=True)
        assert proc.stdout == "yes", f"{package} is not Essential: put it in the test set"


def test_which_finds_sbin_programs_without_sbin_on_path(monkeypatch):
    """A normal user's PATH has no /usr/sbin: which() and run() find losetup there all the same."""
    if not any(os.access(f"{d}/losetup", os.X_OK) for d in ("/usr/sbin", "/sbin")):
        pytest.skip("losetup is not installed in /usr/sbin or /sbin")
    monkeypatch.setenv("PATH", USER_PATH)
    assert shutil.which("losetup") is None or "/sbin/" not in shutil.which("losetup")
    assert commands.which("losetup").endswith("sbin/losetup")
    assert "losetup from util-linux" in commands.run(["losetup", "--version"]).stdout


def test_which_names_the_package_when_missing():
    with pytest.raises(IolabError) as info:
        commands.which("iolab-absent-program")
    assert "iolab-absent-program is not installed" in str(info.value)
