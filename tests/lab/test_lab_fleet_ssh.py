"""fio servers let in only their owner, on the distribution's kernel and userland (the lab VM).

Inside the guest: a throwaway sshd on the guest's 127.0.0.1 (its own host key and
authorized key, started by the test, no service), ``iolab server`` as a real
process on its *default* socket (``/run/iolab/servers/fio.sock``, confined by
bubblewrap), ``iolab run --hosts`` (through the CLI's main in this process: a new
iolab process costs ~20 s of imports under TCG) reaching it by SSH forwarding of
that socket, and the guest's ``nobody`` failing to connect to the server's socket
and to a forwarded one, so its ``exec_prerun=touch F`` job never runs. The lab VM
has no network path to the host, so the SSH hop is the guest's own loopback;
the host runs the same scenario against its own throwaway sshd
(tests/fleet/test_fleet_owner_only.py).
"""
import pytest

from iolab import cli
from sshd_fixtures import owner_only_fleet_run

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("clean_after")]


def test_owner_only_fleet_run_through_ssh_in_the_guest(tmp_path, capsys):
    def run_cli(*args):
        capsys.readouterr()
        rc = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    seen = owner_only_fleet_run(tmp_path, run_cli)  # iolab server's default socket
    assert seen["socket"] == "/run/iolab/servers/fio.sock"
    print(f"\nguest: server socket {seen['socket']}; fleet row {seen['fleet']['rows']}")
    for key, value in seen.items():
        if key.startswith("sock:"):
            print(f"guest: nobody on {key}: {value}")
