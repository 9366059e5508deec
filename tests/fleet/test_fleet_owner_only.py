"""The owner-only chain on this host, through the real CLI: ``iolab server`` (confined, private socket),
a throwaway sshd on 127.0.0.1, ``iolab run --hosts`` through SSH's forwarding of the socket, and
``nobody`` locked out of both sockets (the lab VM runs the same scenario: tests/lab/test_lab_fleet_ssh.py)."""
import os

from iolab.fleet import privatedir

from cli_helpers import iolab_cli, needs_fio, needs_root
from sshd_fixtures import owner_only_fleet_run

pytestmark = [needs_fio, needs_root]


def run_cli(*args):
    proc = iolab_cli(*args, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def test_owner_only_fleet_run_through_ssh_on_this_host(tmp_path):
    # root's server directory; a socket name of this test's own (fio.sock may be in use on a shared host)
    sock = f"{privatedir.server_socket_dir()}/test-{os.getpid()}.sock"
    seen = owner_only_fleet_run(tmp_path, run_cli, socket_path=sock)
    print(seen)
