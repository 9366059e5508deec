"""The command line as a whole: help for every command, errors on one line, pipes."""
import os
import subprocess

from cli_helpers import IOLAB, ROOT, iolab_cli
from iolab.cli import _commands


def test_every_command_has_help():
    names = set(_commands())
    assert {"recipes", "run", "report", "devices", "setup", "teardown", "batch", "server"} <= names
    top = iolab_cli("--help")
    assert top.returncode == 0
    for name in names:
        assert name in top.stdout
        sub = iolab_cli(name, "--help")
        assert sub.returncode == 0 and "usage: iolab " + name in sub.stdout, name


def test_recipes_lists_every_recipe_with_a_description():
    proc = iolab_cli("recipes")
    lines = proc.stdout.strip().splitlines()
    names = {line.split()[0] for line in lines}
    assert {"quick", "crystaldiskmark", "crystaldiskmark3", "tiobench", "qd-sweep", "cachecheck"} <= names
    assert all(len(line.split(None, 1)) == 2 for line in lines)


def test_a_recipe_whose_tests_are_not_fio_jobs_lists_them_by_what_they_do():
    """bonnie's putc is 1-byte write() calls from Python: 'rw=write bs=1' would say fio runs it."""
    proc = iolab_cli("recipes", "bonnie")
    assert proc.returncode == 0, proc.stderr
    listing = proc.stdout.rstrip().split("\n\n")[-1].splitlines()
    assert [line.split()[0] for line in listing] == ["putc", "put_block", "rewrite", "getc", "get_block", "seeks"]
    assert not any("rw=" in line for line in listing)
    assert "Sequential Output Per-Chr (1-byte write calls)" in listing[0]


def test_a_closed_pipe_is_not_an_error():
    """`iolab recipes | head -1`: the reader is gone before iolab writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.run(IOLAB + ["recipes"], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    os.close(write_end)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_no_command_prints_help_and_exits_2():
    proc = iolab_cli()
    assert proc.returncode == 2 and "usage: iolab" in proc.stdout
