"""``iolab lab`` on the host: help, and clear errors before anything boots.

(A real boot through ``iolab lab`` runs in every ``make test``: the lab tier
itself boots with it and runs ``iolab recipes`` inside, see iolab/lab/tier.py.)
"""
import os

from cli_helpers import iolab_cli


def test_help_names_the_disks_the_command_and_the_install():
    proc = iolab_cli("lab", "--help")
    assert proc.returncode == 0
    for text in ("--disk SIZE", "-- COMMAND", "iolab lab --disk 2G --disk 2G -- iolab setup",
                 "tools/install-lab-deps.sh", "cpu_bound"):
        assert text in proc.stdout, text
    assert "lab" in iolab_cli("--help").stdout


def test_a_bad_disk_size_is_refused_naming_the_option():
    proc = iolab_cli("lab", "--disk", "2X", "--", "true")
    assert proc.returncode == 2
    assert "--disk 2X: not a size" in proc.stderr
    proc = iolab_cli("lab", "--disk", "1K", "--", "true")
    assert proc.returncode == 2 and "--disk 1K: a lab disk must be between 16M and 64T" in proc.stderr


def test_more_sata_drives_than_ports_are_refused_before_anything_is_made(tmp_path):
    argv = ["lab", "--data", "made-by-lab"] + ["--sata", "16M"] * 7 + ["--", "true"]
    proc = iolab_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2
    assert "7 SATA drives: q35's AHCI controller has 6 ports" in proc.stderr
    assert "booting" not in proc.stdout + proc.stderr and list(tmp_path.iterdir()) == []


def test_no_command_is_an_error_with_an_example():
    proc = iolab_cli("lab", "--disk", "1G")
    assert proc.returncode == 2
    assert "no command to run inside the VM" in proc.stderr and "iolab lab -- iolab recipes" in proc.stderr


def test_without_qemu_it_says_what_to_install():
    env = dict(os.environ, PATH="/nonexistent")  # the real lookup, on a PATH where qemu is not
    proc = iolab_cli("lab", "--", "iolab", "recipes", env=env)
    assert proc.returncode == 2
    assert "no qemu-system-x86_64 (Debian package qemu-system-x86)" in proc.stderr
    assert "tools/install-lab-deps.sh" in proc.stderr
