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
