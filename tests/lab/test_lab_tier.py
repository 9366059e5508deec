"""iolab.lab.tier on the host: what the guest's pytest is asked to run."""
import shlex
from pathlib import Path

from iolab.lab import tier

REPO = Path(__file__).resolve().parents[2]


def guest_argv(extra: list[str]) -> list[str]:
    command = tier.guest_command(Path("/var/tmp/results"), extra)
    assert command.startswith("MPLBACKEND=Agg ")
    return shlex.split(command.removeprefix("MPLBACKEND=Agg "))


def markers(argv: list[str]) -> str:
    return argv[argv.index("-m", argv.index("pytest")) + 1]  # pytest's -m, not python's


def test_guest_runs_lab_and_stock_kernel_tests_of_the_listed_files():
    argv = guest_argv([])
    assert markers(argv) == "lab or stock_kernel"
    # tests/lab and each file with stock_kernel tests, by name (not all of tests/: imports under TCG)
    assert argv[-1 - len(tier.STOCK_KERNEL_TESTS):] == ["tests/lab", *tier.STOCK_KERNEL_TESTS]
    for name in tier.STOCK_KERNEL_TESTS:
        assert "@pytest.mark.stock_kernel" in (REPO / name).read_text(), f"{name} has no stock_kernel test"


def test_explicit_files_replace_the_default_and_keep_the_markers():
    argv = guest_argv(["tests/isolation/test_cgroups.py", "-k", "v2"])
    assert argv[-3:] == ["tests/isolation/test_cgroups.py", "-k", "v2"]
    assert "tests/lab" not in argv and markers(argv) == "lab or stock_kernel"


def test_the_ssh_hop_runs_with_the_default_files_or_its_own_and_not_otherwise():
    assert tier.hop_wanted([]) and tier.hop_wanted([tier.HOP_TEST]) and tier.hop_wanted(["tests/lab/"])
    assert tier.hop_wanted([f"{tier.HOP_TEST}::test_the_guest_serves_its_owner_on_the_host_and_not_its_nobody"])
    assert not tier.hop_wanted(["tests/isolation/test_cgroups.py", "-k", "v2"])


def test_the_hop_forwards_a_port_and_tells_both_halves_where_they_meet(tmp_path):
    argv = tier.tier_argv(tmp_path, [], 60.0, (tmp_path / "hop", 40001))
    assert argv[argv.index("--ssh-port") + 1] == "40001" and argv.index("--ssh-port") < argv.index("--")
    inside = argv[-1]
    assert f"export {tier.HOP_ENV}={tmp_path / 'hop'} {tier.HOP_PORT_ENV}=40001;" in inside
    assert "--ssh-port" not in tier.tier_argv(tmp_path, [], 60.0)
    host = tier.host_half_argv(tmp_path / "hop")
    # the host half runs only the marked test of the hop's file, its results beside the guest's
    assert markers(host) == tier.HOP_MARKER and host[-1] == tier.HOP_TEST
    assert f"--junitxml={tmp_path / 'hop' / 'host-junit.xml'}" in host
