"""fio servers let in only their owner, across a machine boundary (issue 27, item 3).

The lab VM is the far machine: its one network device lets in only this machine's
``127.0.0.1:PORT``, forwarded to the guest's port 22 (``iolab lab --ssh-port``). The
tier (iolab/lab/tier.py) makes the key and the port and runs the two halves at once:

- the guest half (``lab``, in the VM): a throwaway sshd on the guest's address
  (its own host key; it authorizes the tier's key), ``iolab server`` as a real
  process on its *default* socket (``/run/iolab/servers/fio.sock``, confined by
  bubblewrap), and the guest's ``nobody`` failing to connect to that socket, so
  its ``exec_prerun=touch F`` job never runs; then it waits for the host half;
- the host half (``lab_hop``, on this machine, beside the VM): ``iolab run --hosts``
  (the CLI's main) reaching the guest's server by SSH forwarding of its socket,
  and this machine's ``nobody`` failing to connect to the forwarded socket.

They meet in the shared hop directory: the guest writes ``ready.json``; the host
tells the guest it is done over the same SSH (so no shared-file cache is trusted
for the way back); the tier writes ``vm-exited`` when the VM is gone. Outside
the tier the guest half skips and the host half is deselected (tests/conftest.py).
The same scenario on one machine, over its own loopback: tests/fleet/test_fleet_owner_only.py.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from iolab import cli
from iolab.lab import guest
from iolab.lab.tier import HOP_ENV, HOP_PORT_ENV, TIER_TIMEOUT
from sshd_fixtures import (check_server_socket, cli_server, fleet_run_over_ssh, nobody_is_refused, nobody_refused,
                           prerun_job, throwaway_sshd)

DEFAULT_SOCKET = "/run/iolab/servers/fio.sock"
GUEST_WAIT = 420.0  # seconds the guest waits for the host half (its fleet run takes ~1 min under TCG)


def _hop() -> tuple[Path, int]:
    where = os.environ.get(HOP_ENV)
    if not where:
        pytest.skip("the SSH hop runs under the lab tier only (python -m iolab.lab.tier), which runs its host half")
    return Path(where), int(os.environ[HOP_PORT_ENV])


@pytest.mark.lab
@pytest.mark.usefixtures("clean_after")
def test_the_guest_serves_its_owner_on_the_host_and_not_its_nobody(tmp_path):
    hop, _ = _hop()
    target = tmp_path / "target"
    target.mkdir()
    jobs = Path(tempfile.mkdtemp(prefix="iolab-nobody-job-"))
    marker, done = tmp_path / "F", tmp_path / "host-done"
    try:
        with cli_server("--allow-path", str(target)) as (server, first):
            sock = check_server_socket(server, first, target)
            assert sock == DEFAULT_SOCKET
            refused = nobody_refused(sock, prerun_job(jobs, marker))
            with throwaway_sshd(tmp_path / "sshd", address=guest.NET_ADDRESS, port=22,
                                authorized=hop / "user.pub") as sshd:
                ready = {"socket": sock, "target": str(target), "host_key": sshd["host_key"], "done": str(done),
                         "marker": str(marker)}
                (hop / "ready.json.part").write_text(json.dumps(ready))
                (hop / "ready.json.part").rename(hop / "ready.json")
                deadline = time.monotonic() + GUEST_WAIT
                while not done.exists():
                    assert time.monotonic() < deadline, f"the host half did not finish within {GUEST_WAIT:g} s: " \
                        + (sshd["work"] / "sshd.log").read_text()[-2000:]
                    time.sleep(0.5)
                log = (sshd["work"] / "sshd.log").read_text()
        told = json.loads(done.read_text())
        assert told["passed"], told
        assert list(target.iterdir()) == []  # the server removed iolab's test file
        assert "Accepted publickey for root" in log  # the host came in by the tier's key
    finally:
        shutil.rmtree(jobs)
    assert not marker.exists()
    print(f"\nguest: server socket {sock}; guest's nobody: {refused}; host: {told}")


def _wait_for_guest(hop: Path) -> dict:
    deadline = time.monotonic() + TIER_TIMEOUT
    while not (hop / "ready.json").exists():
        if (hop / "vm-exited").exists():
            pytest.fail("the lab VM exited before the guest half was ready (see the guest's "
                        "test_the_guest_serves_its_owner_on_the_host_and_not_its_nobody)")
        assert time.monotonic() < deadline, "the guest half was not ready within the tier's time"
        time.sleep(0.5)
    return json.loads((hop / "ready.json").read_text())


def _tell_guest(sshd: dict, path: str, told: dict) -> None:
    """Write ``told`` to ``path`` in the guest, over SSH (the guest half waits for it)."""
    subprocess.run(["ssh", "-p", str(sshd["port"]), "-i", sshd["identity"], "-o", "BatchMode=yes",
                    "-o", f"UserKnownHostsFile={sshd['known_hosts']}", "-o", "GlobalKnownHostsFile=/dev/null",
                    "-o", "StrictHostKeyChecking=yes", f"{sshd['user']}@127.0.0.1", f"cat > {path}"],
                   input=json.dumps(told), text=True, timeout=120, check=True, capture_output=True)


@pytest.mark.lab_hop
def test_the_host_runs_a_job_on_the_guest_over_ssh_and_its_nobody_cannot(tmp_path, capsys):
    hop, port = _hop()
    ready = _wait_for_guest(hop)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {ready['host_key']}\n")
    sshd = {"port": port, "identity": str(hop / "user"), "known_hosts": str(known), "user": "root"}

    def run_cli(*args):
        capsys.readouterr()
        rc = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    jobs = Path(tempfile.mkdtemp(prefix="iolab-nobody-job-"))  # a job this machine's nobody can read
    told = {"passed": False}
    try:
        # the owner here, to the guest's server on its default socket (the inventory names none)
        told["fleet"] = fleet_run_over_ssh(tmp_path, run_cli, sshd, None, ready["target"],
                                           expect_socket=ready["socket"])
        # nobody here, through a forwarded socket (the far side's marker: its fio server would run the prerun)
        told.update(nobody_is_refused(tmp_path, sshd, ready["socket"], ready["target"],
                                      prerun_job(jobs, Path(ready["marker"])), direct=False))
        told["passed"] = True
    finally:
        shutil.rmtree(jobs)
        _tell_guest(sshd, ready["done"], told)
    print(f"\nhost: {told}")
