"""Coordinated runs on real fio servers (loopback, Unix socket, SSH tunnel, a network namespace).

Every fio server, sshd, SSH tunnel and network namespace started here is
stopped in a fixture finaliser, and the tests check that none is left.
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from iolab.fleet import fioserver, inventory as fleet_inventory, privatedir, runs as fleet, scaling
from iolab.fleet.tunnel import Tunnel
from iolab.core.errors import IolabError
from iolab.engine.fio.parse import documents

from cli_helpers import IOLAB, ROOT, iolab_cli, live_processes, needs_fio
from sshd_fixtures import throwaway_sshd

pytestmark = needs_fio

RECIPE = """
name: fleet-tiny
description: two short O_DIRECT tests for fleet checks
isolation: direct
defaults: {size: 16M, runtime: %(runtime)s, repeat: 1}
fio: {ioengine: libaio, direct: 1, norandommap: 1, randrepeat: 0}
tests:
  - name: SEQ1M-Q4T1
    rw: read
    bs: 1M
    iodepth: 4
  - name: RND4K-Q8T1
    rw: randwrite
    bs: 4k
    iodepth: 8
"""


def recipe_file(tmp_path, runtime=1, tests=2) -> Path:
    """The two-test recipe above, or only its first test (``tests=1``) where one is enough."""
    path = tmp_path / "fleet-tiny.yaml"
    text = RECIPE % {"runtime": runtime}
    if tests == 1:
        text = text[: text.index("  - name: RND4K-Q8T1")]
    path.write_text(text)
    return path


def inventory_file(tmp_path, hosts, **top) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({**top, "hosts": hosts}, sort_keys=False))
    return path


def tcp_host(name, servers, target) -> dict:
    """A fio server on loopback TCP (on purpose: any local user could reach it), confined to ``target``
    (``servers``: the fixture's factory, or a server already started)."""
    target.mkdir(exist_ok=True)
    server = servers if isinstance(servers, fioserver.FioServer) else servers(port=0, writable=[target])
    return {"name": name, "address": "127.0.0.1", "port": server.endpoint.port, "target": str(target)}


@pytest.fixture(scope="module")
def socket_root():
    """Where :func:`sockets` are made; removed after the module's tests, whose servers are stopped by then."""
    path = Path(tempfile.mkdtemp(prefix="iolab-sock-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sockets(socket_root):
    """A directory with a short path for a test's server sockets: a Unix socket's path has 108 bytes, and
    pytest-xdist's worker directory (popen-gw0) lengthens ``tmp_path``."""
    return Path(tempfile.mkdtemp(dir=socket_root))


def unix_host(name, servers, target, sockets) -> dict:
    """A fio server on a private Unix socket (iolab server's default kind) under ``sockets``, confined to
    ``target``."""
    target.mkdir(exist_ok=True)
    sock = Path(privatedir.ensure(sockets / f"srv-{name}")) / "fio.sock"
    servers(socket=sock, writable=[target])
    return {"name": name, "socket": str(sock), "target": str(target)}


# =========================================================================== simultaneous run

def test_three_servers_at_once_per_host_rows_aggregate_and_start_times(servers, tmp_path):
    hosts = [tcp_host(f"node{i}", servers, tmp_path / f"t{i}") for i in (1, 2, 3)]
    inventory = inventory_file(tmp_path, hosts)
    data = tmp_path / "data"
    proc = iolab_cli("run", recipe_file(tmp_path), "--hosts", inventory, "--data", data,
                     "--no-progress", timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed = [Path(line) for line in proc.stdout.strip().splitlines()]
    fleet_dir = printed[-1]
    assert fleet_dir.parent == data / "_fleet"
    fleet_id = fleet_dir.name
    assert printed[:3] == [data / f"node{i}" / f"{fleet_id}-node{i}" for i in (1, 2, 3)]

    manifest = json.loads((fleet_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    assert manifest["completed_hosts"] == ["node1", "node2", "node3"] and manifest["failed_hosts"] == {}
    assert manifest["fleet"]["mode"] == "simultaneous" and manifest["security"]["insecure_network"] is False
    # ONE fio client drove all three servers per test
    argv = manifest["commands"]["SEQ1M-Q4T1"]
    assert sum(a.startswith("--client=ip:127.0.0.1,") for a in argv) == 3
    combined = documents((fleet_dir / "raw" / "SEQ1M-Q4T1-1.json").read_text())[-1]  # fio's own output
    assert len([e for e in combined["client_stats"] if e["jobname"] != "All clients"]) == 3

    hosts_rows = []
    for i, run_dir in enumerate(printed[:3], start=1):
        m = json.loads((run_dir / "manifest.json").read_text())
        assert m["status"] == "completed" and m["host"] == f"node{i}" and m["run_id"] == f"{fleet_id}-node{i}"
        assert m["fleet"]["id"] == fleet_id and m["fleet"]["role"] == "host"
        job = (run_dir / "jobs" / "SEQ1M-Q4T1.fio").read_text()
        assert f"filename={tmp_path}/t{i}/iolab-{fleet_id}-node{i}.dat" in job  # its own target
        raw = json.loads((run_dir / "raw" / "SEQ1M-Q4T1-1.json").read_text())
        assert raw["jobs"][0]["read"]["io_bytes"] > 0  # a standalone fio document
        assert raw["global options"]["filename"].endswith(f"-node{i}.dat")
        rows = pd.read_csv(run_dir / "results.csv")
        assert set(rows["host"]) == {f"node{i}"} and len(rows) == 2
        assert (rows["bw_mbps"] > 0).all() and rows["error"].isna().all()
        hosts_rows.append(rows)
        assert list((tmp_path / f"t{i}").iterdir()) == []  # test file removed
    per_host = pd.concat(hosts_rows)

    agg = pd.read_csv(fleet_dir / "results.csv")
    assert set(agg["host"]) == {"all"} and len(agg) == 2
    for _, row in agg.iterrows():
        parts = per_host[(per_host.test == row.test) & (per_host.direction == row.direction)]
        assert len(parts) == 3
        assert row["io_bytes"] == parts["io_bytes"].sum()
        for column in ("bw_mbps", "iops"):  # the hosts' I/O over the longest host's runtime (analysis.together)
            together = (parts[column] * parts["runtime_s"]).sum() / parts["runtime_s"].max()
            assert row[column] == pytest.approx(together, rel=1e-9)
            assert row[column] <= parts[column].sum() * (1 + 1e-9)
        assert row["n_hosts"] == 3 and row["hosts_measured"] == 3 and row["valid"]
        # fio's client starts all jobs together: by the IOPS logs, every host started before the
        # first one ended (spread below one job's runtime: they overlapped; one after another would
        # be at least a runtime apart) -- a bound set by the recipe, not by the machine's speed
        starts = parts["start_ms"]
        assert starts.notna().all()
        assert starts.max() - starts.min() < 1000 * parts["runtime_s"].min(), parts[["host", "start_ms", "runtime_s"]]
        assert row["start_spread_ms"] == starts.max() - starts.min()

    # iolab.load sees host rows and the aggregate; fleet.load filters by fleet id
    loaded = scaling.load(data, fleet_id)
    assert set(loaded["host"]) == {"node1", "node2", "node3", "all"}


# =========================================================================== security

def test_unspecified_and_network_addresses_are_refused_without_connecting(tmp_path, monkeypatch):
    target = tmp_path / "t"
    target.mkdir()
    data = tmp_path / "data"
    recipe = recipe_file(tmp_path)
    zero = inventory_file(tmp_path, [{"name": "a", "address": "0.0.0.0", "port": 8765, "target": str(target)}])
    proc = iolab_cli("run", recipe, "--hosts", zero, "--data", data)
    assert proc.returncode == 2
    assert f"{zero}: hosts[0] (a).address: 0.0.0.0 means 'every interface'" in proc.stderr
    assert "--insecure-network" not in proc.stderr  # no way around it
    proc = iolab_cli("run", recipe, "--hosts", zero, "--data", data, "--insecure-network")
    assert proc.returncode == 2 and "every interface" in proc.stderr

    remote = inventory_file(tmp_path, [{"name": "b", "address": "192.0.2.7", "port": 8765, "target": "/srv"}])
    proc = iolab_cli("run", recipe, "--hosts", remote, "--data", data)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(f"iolab: error: {remote}: hosts[0] (b).address: 192.0.2.7 is not a loopback address")
    assert "no authentication" in line and "ssh: user@192.0.2.7" in line and "--insecure-network" in line
    assert "forwards the server's Unix socket" in line
    assert not data.exists()

    # in-process: the refusal comes before any socket or process
    def forbidden(*args, **kwargs):
        raise AssertionError("a connection or process was attempted")
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    for inv in (remote, inventory_file(tmp_path, [{"name": "c", "ssh": "me@db.example.net",
                                                    "remote_address": "10.1.1.1", "target": "/srv"}])):
        with pytest.raises(IolabError, match="not a loopback address|reached at its Unix socket"):
            fleet.run(recipe, inv, data_dir=data)
    assert not data.exists()


@pytest.fixture
def netns():
    """A network namespace with a veth pair: 10.213.0.1 here, 10.213.0.2 inside (no other network)."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed (apt-get install iproute2)")
    name, here, there = f"iolabt{os.getpid()}", f"iolv{os.getpid() % 100000}a", f"iolv{os.getpid() % 100000}b"
    setup = [["ip", "netns", "add", name],
             ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
             ["ip", "link", "set", there, "netns", name],
             ["ip", "addr", "add", "10.213.0.1/30", "dev", here], ["ip", "link", "set", here, "up"],
             ["ip", "-n", name, "addr", "add", "10.213.0.2/30", "dev", there],
             ["ip", "-n", name, "link", "set", there, "up"], ["ip", "-n", name, "link", "set", "lo", "up"]]
    try:
        for argv in setup:
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                pytest.skip(f"cannot set up a network namespace: {' '.join(argv)}: {proc.stderr.strip()}")
        yield name
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_insecure_network_is_explicit_and_recorded(netns, tmp_path):
    """A real non-loopback fio server (inside our own namespace): refused, then allowed and recorded."""
    port = 18600 + os.getpid() % 1000
    target = tmp_path / "t"
    target.mkdir()
    server = subprocess.Popen(["ip", "netns", "exec", netns, "fio", f"--server=ip:10.213.0.2,{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while fioserver.probe(fioserver.Endpoint("tcp", address="10.213.0.2", port=port), timeout=1) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        inv = inventory_file(tmp_path, [{"name": "nsbox", "address": "10.213.0.2", "port": port,
                                         "target": str(target), "target_kind": "dir"}])
        data = tmp_path / "data"
        recipe = recipe_file(tmp_path, tests=1)
        proc = iolab_cli("run", recipe, "--hosts", inv, "--data", data)
        assert proc.returncode == 2 and "10.213.0.2 is not a loopback address" in proc.stderr
        assert not data.exists()
        proc = iolab_cli("run", recipe, "--hosts", inv, "--data", data, "--insecure-network", "--no-progress",
                         timeout=120)
        assert proc.returncode == 0, proc.stderr
        fleet_dir = Path(proc.stdout.strip().splitlines()[-1])
        for manifest_path in [fleet_dir / "manifest.json", *data.glob("nsbox/*/manifest.json")]:
            m = json.loads(manifest_path.read_text())
            assert m["security"]["insecure_network"] is True and m["security"]["hosts_over_network"] == ["nsbox"]
            assert m["status"] == "completed"
        assert "system" in json.loads(next(data.glob("nsbox/*/manifest.json")).read_text())
    finally:
        fioserver.stop_group(server)
    assert live_processes(f"--server=ip:10.213.0.2,{port}") == []


# =========================================================================== failures

def test_a_server_killed_mid_run_and_one_that_never_answers(servers, tmp_path):
    dead_port = fioserver.free_port()  # nothing listens there
    targets = {n: tmp_path / n for n in ("a", "b", "victim", "dead")}
    started = []
    def keep(**kwargs):
        started.append(servers(**kwargs))
        return started[-1]
    hosts = [tcp_host("a", servers, targets["a"]), tcp_host("b", servers, targets["b"]),
             tcp_host("victim", keep, targets["victim"]),
             {"name": "dead", "address": "127.0.0.1", "port": dead_port, "target": str(targets["dead"])}]
    victim = started[0]
    targets["dead"].mkdir()
    inventory = inventory_file(tmp_path, hosts)

    def kill_when_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if list(targets["victim"].glob("iolab-*.dat")):  # its job has laid out its file
                time.sleep(0.8)
                for pid in victim.members():  # the confined fio too (its own session under bwrap)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_running, daemon=True)
    killer.start()
    result = fleet.run(recipe_file(tmp_path, runtime=2), inventory, data_dir=tmp_path / "data", progress=False)
    killer.join(5)

    m = result.manifest
    assert m["status"] == "failed"
    assert m["completed_hosts"] == ["a", "b"]
    assert set(m["failed_hosts"]) == {"victim", "dead"}
    assert "did not answer" in m["failed_hosts"]["dead"] and "Connection refused" in m["failed_hosts"]["dead"]
    assert "disconnected mid-run" in m["failed_hosts"]["victim"]
    assert m["host_runs"]["victim"]["failed_at"] == "SEQ1M-Q4T1 rep 1"
    assert m["host_runs"]["dead"]["failed_at"] == "connect"
    assert "2 of 4 hosts did not complete" in m["reason"]

    victim_manifest = json.loads((result.hosts["victim"] / "manifest.json").read_text())
    assert victim_manifest["status"] == "failed" and "disconnected" in victim_manifest["reason"]
    assert [t["status"] for t in victim_manifest["tests"]] == ["failed", "pending"]
    for name in ("a", "b"):  # the others' results are kept, for both tests
        hm = json.loads((result.hosts[name] / "manifest.json").read_text())
        assert hm["status"] == "completed"
        rows = pd.read_csv(result.hosts[name] / "results.csv")
        assert len(rows) == 2 and (rows["bw_mbps"] > 0).all()
    agg = pd.read_csv(result.path / "results.csv")
    first, second = agg.iloc[0], agg.iloc[1]
    assert "partial_fleet" in first["flags"] and not first["valid"] and "victim" in first["error"]
    assert first["hosts"] == "a,b" and first["n_hosts"] == 3
    assert second["hosts"] == "a,b" and second["n_hosts"] == 2 and second["valid"]


def test_sigterm_stops_the_fleet_run_and_keeps_the_record(servers, tmp_path):
    hosts = [tcp_host(f"n{i}", servers, tmp_path / f"t{i}") for i in (1, 2)]
    data = tmp_path / "data"
    proc = subprocess.Popen(IOLAB + ["run", str(recipe_file(tmp_path, runtime=20, tests=1)), "--hosts",
                                     str(inventory_file(tmp_path, hosts)), "--data", str(data), "--no-progress"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not list((tmp_path / "t1").glob("iolab-*.dat")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    fleet_manifest = json.loads(next(data.glob("_fleet/*/manifest.json")).read_text())
    assert fleet_manifest["status"] == "interrupted" and "SIGTERM" in fleet_manifest["reason"]
    for name in ("n1", "n2"):
        m = json.loads(next(data.glob(f"{name}/*/manifest.json")).read_text())
        assert m["status"] == "interrupted" and m["tests"][0]["status"] == "interrupted"
        assert list((tmp_path / f"t{name[1]}").glob("iolab-*.dat")) == []  # local test files removed
    assert live_processes(str(data)) == []  # no fio client left behind


# =========================================================================== sequential, scaling, plots

def test_sequential_runs_hosts_one_after_another(servers, tmp_path, sockets):
    hosts = [tcp_host("tcp1", servers, tmp_path / "t"), unix_host("unix1", servers, tmp_path / "u", sockets)]
    result = fleet.run(recipe_file(tmp_path, tests=1), inventory_file(tmp_path, hosts), sequential=True,
                       data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed" and result.manifest["fleet"]["mode"] == "sequential"
    assert not (result.path / "results.csv").exists()  # no aggregate: the hosts did not run together
    rows = result.results
    assert set(rows["host"]) == {"tcp1", "unix1"} and (rows["n_hosts"] == 1).all()
    first = rows.groupby("host")["start_ms"].min()
    assert first["unix1"] - first["tcp1"] > 1000  # unix1 started after tcp1's 1 s test


def test_scale_hosts_gives_throughput_vs_hosts_and_tail_latency(servers, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from iolab.report import fleetplots
    hosts = [tcp_host(f"s{i}", servers, tmp_path / f"t{i}") for i in (1, 2)]
    data = tmp_path / "data"
    proc = iolab_cli("run", recipe_file(tmp_path, tests=1), "--hosts", inventory_file(tmp_path, hosts), "--data", data,
                     "--scale-hosts", "--no-progress", timeout=120)
    assert proc.returncode == 0, proc.stderr
    fleet_dirs = [Path(l) for l in proc.stdout.split() if "/_fleet/" in l]
    assert [d.name[-3:] for d in fleet_dirs] == ["-n1", "-n2"]
    assert fleet_dirs[0].name[:-3] == fleet_dirs[1].name[:-3]  # same fleet id prefix

    rows = scaling.load(data)
    table = scaling.scaling_table(rows)
    assert list(table.columns[:5]) == ["n_hosts", "test", "direction", "fleet_id", "total"]
    seq = table[table.test == "SEQ1M-Q4T1"].set_index("n_hosts")
    assert list(seq.index) == [1, 2]
    two = rows[(rows.fleet_id.str.endswith("-n2")) & (rows.test == "SEQ1M-Q4T1") & (rows.host != "all")]
    assert seq.loc[2, "total"] == pytest.approx(two["bw_mbps"].sum())
    assert seq.loc[1, "speedup"] == 1 and seq.loc[2, "per_host"] == pytest.approx(seq.loc[2, "total"] / 2)

    tails = scaling.tail_latency(rows)
    assert set(tails["percentile"]) == {"p50", "p99", "p99.9", "max"}
    assert set(tails["host"]) == {"s1", "s2"}
    one = tails[(tails.test == "SEQ1M-Q4T1") & (tails.n_hosts == 2)]
    p = one.set_index(["host", "percentile"])["latency_us"]
    # fio's percentiles are histogram buckets (1/64 of a power of two wide): p99 may sit one
    # bucket above the exact maximum
    assert p.loc[("s1", "p50")] <= p.loc[("s1", "p99")] <= p.loc[("s1", "max")] * (1 + 2 / 64)

    ax = fleetplots.scaling_plot(table, x="n_hosts", y="total", hue="test")
    assert [tuple(line.get_xdata()) for line in ax.get_lines()][0] == (1.0, 2.0)
    assert ax.get_lines()[1].get_linestyle() == "--"  # linear-scaling reference
    assert ax.get_xlabel() == "Hosts running at once" and ax.get_ylabel() == "Aggregate throughput (MB/s)"
    ax2 = fleetplots.tail_latency_plot(one, x="host", y="latency_us", hue="percentile")
    assert len(ax2.patches) == 8 and [t.get_text() for t in ax2.get_xticklabels()] == ["s1", "s2"]
    assert ax2.get_yscale() == "log"
    with pytest.raises(IolabError, match="filter to one test"):
        fleetplots.tail_latency_plot(tails)


# =========================================================================== SSH tunnel

@pytest.fixture
def sshd(tmp_path_factory):
    """sshd on a free loopback port with a throw-away host key and authorized key; stopped afterwards."""
    with throwaway_sshd(tmp_path_factory.mktemp("sshd")) as info:
        yield info


def ssh_host(name, sshd, remote_socket, target, identity=None) -> dict:
    target.mkdir(exist_ok=True)
    return {"name": name, "ssh": f"{sshd['user']}@127.0.0.1", "ssh_port": sshd["port"],
            "remote_socket": str(remote_socket), "identity": identity or sshd["identity"], "target": str(target),
            "target_kind": "dir",
            "ssh_options": {"UserKnownHostsFile": sshd["known_hosts"], "StrictHostKeyChecking": "yes",
                            "GlobalKnownHostsFile": "/dev/null"}}


def private_server(servers, sockets, name, target):
    """A confined fio server on a socket in a 0700 directory of its own under ``sockets``, writing only
    ``target``."""
    target.mkdir(exist_ok=True)
    return servers(socket=Path(privatedir.ensure(sockets / f"srv-{name}")) / "fio.sock", writable=[target])


def test_ssh_forwards_the_far_side_socket(servers, sshd, tmp_path, sockets):
    server = private_server(servers, sockets, "far", tmp_path / "t1")
    other = private_server(servers, sockets, "other", tmp_path / "t2")
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    hosts = [ssh_host("tunnelled", sshd, server.endpoint.path, tmp_path / "t1"),
             ssh_host("badkey", sshd, other.endpoint.path, tmp_path / "t2", identity=str(stranger))]
    result = fleet.run(recipe_file(tmp_path, tests=1), inventory_file(tmp_path, hosts), data_dir=tmp_path / "data",
                       progress=False)
    m = result.manifest
    assert m["completed_hosts"] == ["tunnelled"]
    assert "SSH tunnel to" in m["failed_hosts"]["badkey"] and "Permission denied" in m["failed_hosts"]["badkey"]
    assert m["security"]["tunnelled"] == ["tunnelled", "badkey"] and m["security"]["insecure_network"] is False
    hm = json.loads((result.hosts["tunnelled"] / "manifest.json").read_text())
    assert hm["status"] == "completed"
    tunnel = hm["connection"]["tunnel"]
    assert tunnel["ssh"] == f"{sshd['user']}@127.0.0.1" and tunnel["remote"] == f"unix:{server.endpoint.path}"
    assert "-N" in tunnel["argv"] and "BatchMode=yes" in tunnel["argv"]
    assert tunnel["argv"][tunnel["argv"].index("-L") + 1] == f"{tunnel['local_socket']}:{server.endpoint.path}"
    assert hm["connection"]["endpoint"]["kind"] == "unix"
    rows = pd.read_csv(result.hosts["tunnelled"] / "results.csv")
    assert len(rows) == 1 and (rows["iops"] > 0).all()
    # the tunnel is closed and its socket gone
    assert live_processes(f":{server.endpoint.path} -- ") == []
    assert not os.path.exists(tunnel["local_socket"])


@pytest.mark.skipif(shutil.which("runuser") is None, reason="runuser (util-linux) is not installed")
def test_another_local_user_cannot_use_the_forwarded_socket(servers, sshd, tmp_path, sockets):
    server = private_server(servers, sockets, "far", tmp_path / "t")
    host = fleet_inventory.parse_inventory(
        {"hosts": [ssh_host("far", sshd, server.endpoint.path, tmp_path / "t")]}, "inv").hosts[0]
    workdir = Path(privatedir.ensure(tmp_path / "near"))
    jobs = Path(tempfile.mkdtemp(prefix="iolab-nobody-job-"))
    marker = tmp_path / "F"
    try:
        jobs.chmod(0o755)
        job = jobs / "prerun.fio"
        job.write_text(f"[p]\nioengine=null\nsize=1m\nrw=read\nexec_prerun=touch {marker}\n")
        job.chmod(0o644)
        idle = len(server.members())
        with Tunnel(host, workdir) as tunnel:
            mode = os.stat(tunnel.path).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
            assert stat.S_IMODE(os.stat(workdir).st_mode) == 0o700
            for spec in (f"sock:{tunnel.path}", f"sock:{server.endpoint.path}"):
                proc = subprocess.run(["runuser", "-u", "nobody", "--", "fio", f"--client={spec}", str(job)],
                                      capture_output=True, text=True, timeout=120, cwd="/")
                assert proc.returncode != 0 and "Permission denied" in proc.stderr, proc.stderr
            assert not marker.exists()
            assert len(server.members()) == idle  # nothing reached it (fio forks one child per connection)
            assert fioserver.probe(tunnel.endpoint) is None  # while the owner gets through
    finally:
        shutil.rmtree(jobs)
    assert not marker.exists()


def test_old_ssh_entries_with_a_tcp_port_are_refused_with_the_way_forward(tmp_path):
    for field, value in (("port", 8765), ("remote_address", "127.0.0.1")):
        inv = inventory_file(tmp_path, [{"name": "db1", "ssh": "root@db1.example.net", field: value,
                                         "target": "/srv"}])
        proc = iolab_cli("run", recipe_file(tmp_path), "--hosts", inv, "--dry-run")
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"iolab: error: {inv}: hosts[0] (db1).{field}: "
                                                       "a fio server reached over SSH is reached at its Unix socket")
        assert "remote_socket: PATH" in lines[0] and "/run/iolab/servers/fio.sock" in lines[0]
    # a default port is for TCP hosts: an ssh host under it keeps working, at the default socket
    inv = fleet_inventory.load_inventory(inventory_file(
        tmp_path, [{"name": "db1", "ssh": "root@db1.example.net"}], defaults={"port": 8765, "target": "/srv"}))
    assert inv.hosts[0].remote_socket == "/run/iolab/servers/fio.sock"


# =========================================================================== inventory and job files

@pytest.mark.parametrize("hosts, message", [
    ([{"name": "a", "address": "127.0.0.1"}], "hosts[0] (a): missing required field 'target'"),
    ([{"name": "a", "address": "127.0.0.1", "socket": "/x.sock", "target": "/t"}],
     "hosts[0] (a): give exactly one of 'address' (with 'port'), 'socket' or 'ssh' (got address, socket)"),
    ([{"name": "a", "target": "/t"}], "give exactly one of"),
    ([{"name": "a", "address": "127.0.0.1", "port": 70000, "target": "/t"}], "hosts[0] (a).port: must be a port"),
    ([{"name": "a b", "address": "127.0.0.1", "target": "/t"}], "hosts[0].name: 'a b' is not usable"),
    ([{"name": "all", "address": "127.0.0.1", "target": "/t"}], "hosts[0].name: 'all' is reserved"),
    ([{"name": "a", "address": "127.0.0.1", "target": "/t"}, {"name": "a", "socket": "/s", "target": "/t"}],
     "hosts[1].name: duplicate host name 'a'"),
    ([{"name": "a", "address": "127.0.0.1", "target": "/t"}, {"name": "b", "address": "127.0.0.1", "target": "/u"}],
     "hosts[1] (b): the same fio server as 'a'"),
    ([{"name": "a", "ssh": "-oProxyCommand=touch /tmp/x", "target": "/t"}], "hosts[0] (a).ssh: '-oProxyCommand"),
    ([{"name": "a", "ssh": "me@h", "target": "relative"}], "hosts[0] (a).target: must be an absolute path"),
    ([{"name": "a", "address": "127.0.0.1", "target": "/t", "colour": "red"}], "hosts[0]: unknown field 'colour'"),
    ([{"name": "a", "socket": "/s", "target": "/t", "ssh_port": 22}], "hosts[0] (a).ssh_port: only for hosts"),
    ([{"name": "a", "socket": "rel.sock", "target": "/t"}], "hosts[0] (a).socket: must be an absolute path"),
    ([], "hosts: must be a non-empty list"),
])
def test_inventory_errors_name_file_and_field(tmp_path, hosts, message):
    path = inventory_file(tmp_path, hosts)
    with pytest.raises(IolabError) as err:
        fleet_inventory.load_inventory(path)
    assert str(err.value).startswith(f"{path}: "), str(err.value)
    assert message in str(err.value)


def test_inventory_defaults_and_example(tmp_path):
    inv = fleet_inventory.load_inventory(ROOT / "examples" / "inventory.yaml")
    assert [h.connection for h in inv.hosts] == ["tcp", "unix", "ssh", "ssh"]
    assert inv.hosts[1].target == "/mnt/nvme" and inv.hosts[0].label == "this box (SATA SSD)"
    assert inv.hosts[3].target == "/dev/sdb" and inv.hosts[3].confirm == "/dev/sdb"
    assert not any(h.over_network for h in inv.hosts)
    path = inventory_file(tmp_path, [{"name": "x", "address": "127.0.0.1"}], defaults={"port": 9000, "target": "/d"},
                          allow_job_options=["exec"])
    inv = fleet_inventory.load_inventory(path)
    assert inv.hosts[0].port == 9000 and inv.hosts[0].target == "/d" and inv.allow_job_options == {"exec"}
    with pytest.raises(IolabError, match="allow_job_options: unknown allowance 'shell'"):
        fleet_inventory.load_inventory(inventory_file(tmp_path, [{"name": "x", "socket": "/s", "target": "/t"}],
                                            allow_job_options=["shell"]))


def test_unsafe_job_files_are_refused_before_anything_is_created(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    job = tmp_path / "evil.fio"
    job.write_text("[global]\nrw=read\nsize=1m\nioengine=null\n[probe]\nexec_prerun=/usr/bin/touch /tmp/pwned\n")
    port = fioserver.free_port()  # nobody listens: nothing may connect anyway
    inv = inventory_file(tmp_path, [{"name": "h", "address": "127.0.0.1", "port": port, "target": str(target)}])
    data = tmp_path / "data"
    proc = iolab_cli("run", job, "--hosts", inv, "--data", data)
    assert proc.returncode == 2
    assert "h: jobs/evil.fio:" in proc.stderr and "[probe] exec_prerun: refused" in proc.stderr
    assert not data.exists()
    # allowed on purpose in the inventory: the dry run shows the job, still without connecting
    inv = inventory_file(tmp_path, [{"name": "h", "address": "127.0.0.1", "port": port, "target": str(target)}],
                         allow_job_options=["exec"])
    proc = iolab_cli("run", job, "--hosts", inv, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "exec_prerun=/usr/bin/touch /tmp/pwned" in proc.stdout and f"directory={target}" in proc.stdout


def test_dry_run_and_option_conflicts(tmp_path):
    (tmp_path / "t").mkdir()
    inv = inventory_file(tmp_path, [{"name": "h", "address": "127.0.0.1", "port": 1, "target": str(tmp_path / "t")},
                                    {"name": "far", "ssh": "me@far.example.net", "target": "/srv/t"}])
    proc = iolab_cli("run", recipe_file(tmp_path), "--hosts", inv, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "[SEQ1M-Q4T1]" in proc.stdout and "filename=/srv/t/iolab-<run_id>.dat" in proc.stdout
    assert "ssh tunnel to me@far.example.net -> unix:/run/iolab/servers/fio.sock" in proc.stdout
    assert "--client=<h>" in proc.stdout
    for extra, message in ((["--target", str(tmp_path)], "--target does not go with --hosts"),
                           (["--mem-limit", "1G"], "--mem-limit does not go with --hosts"),
                           (["--sequential", "--scale-hosts"], "drop --sequential")):
        proc = iolab_cli("run", recipe_file(tmp_path), "--hosts", inv, *extra)
        assert proc.returncode == 2 and message in proc.stderr
    proc = iolab_cli("run", recipe_file(tmp_path))
    assert proc.returncode == 2 and "give --target PATH (or --hosts INVENTORY)" in proc.stderr
    far = inventory_file(tmp_path, [{"name": "far", "ssh": "me@far.example.net", "target": "/dev/sdz"}])
    proc = iolab_cli("run", recipe_file(tmp_path), "--hosts", far, "--dry-run")
    assert proc.returncode == 2 and "confirm: /dev/sdz" in proc.stderr
