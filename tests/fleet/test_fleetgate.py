"""Fleet path gate: a job sent to a fio server opens nothing outside the inventory entry's target.

The reproducer of issue 15 (7) runs against a real local fio server; the
option-by-option cases check :func:`iolab.fleet.gate.refusals` on job texts
(fio's option table is read from the installed fio).
"""
import hashlib
import os

import pytest

from iolab.fleet import fioserver, gate as fleetgate

from cli_helpers import iolab_cli, needs_fio, needs_root
from device_fixtures import make_loop, requires, scratch, sh  # noqa: F401  (fixtures)
from test_fleet import inventory_file, tcp_host

pytestmark = needs_fio

EVIL = """[w]
directory={elsewhere}
filename=profile.sh
buffer_pattern="echo PWNED"0x0a
rw=write
bs=4k
size=16k
"""


def test_job_writing_a_script_outside_the_target_is_refused_before_connecting(servers, tmp_path):
    server = servers(port=0, writable=[tmp_path])
    target, elsewhere = tmp_path / "t", tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = tmp_path / "evil.fio"
    job.write_text(EVIL.format(elsewhere=elsewhere))
    inv = inventory_file(tmp_path, [tcp_host("h1", server, target)])
    data = tmp_path / "data"
    proc = iolab_cli("run", job, "--hosts", inv, "--data", data, "--no-progress", timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "h1: jobs/evil.fio: refused: [w] " in lines[0]
    assert f"{elsewhere}/profile.sh on the fio server, outside the target {target}" in lines[0]
    assert list(elsewhere.iterdir()) == [] and list(target.iterdir()) == []
    assert not data.exists()
    assert len(server.members()) == (3 if server.confinement["confined"] else 1)  # no job ever reached it


def test_the_same_pattern_inside_the_target_runs(servers, tmp_path):
    """Control: a quoted buffer_pattern is data, not a file; the gate refuses places, not patterns."""
    server = servers(port=0, writable=[tmp_path])
    target = tmp_path / "t"
    job = tmp_path / "inside.fio"
    job.write_text(EVIL.replace("directory={elsewhere}\n", ""))
    inv = inventory_file(tmp_path, [tcp_host("h1", server, target)])
    proc = iolab_cli("run", job, "--hosts", inv, "--data", tmp_path / "data", "--no-progress", timeout=120)
    assert proc.returncode == 0, proc.stderr
    written = list(target.iterdir())
    assert len(written) == 1 and written[0].name.endswith("profile.sh")  # fio prefixes the client address
    assert written[0].read_bytes().startswith(b"echo PWNED\necho PWNED\n")


def _refused(text, root, local=False):
    return [(r.job, r.option, r.reason) for r in fleetgate.refusals(text, "jobs/x.fio", root=str(root), local=local)]


def _dir_job(root, body):
    return f"[global]\ndirectory={root}\n\n[j]\nrw=write\nsize=1m\n{body}\n"


@pytest.mark.parametrize("body, option, words", [
    ("filename=../outside.dat", "filename", "'..' component"),
    ("filename=a.dat:../b.dat", "filename", "'..' component"),
    ("directory={root}/../else", "directory", "'..' component"),
    ("directory=/var/tmp", "directory", "outside the target"),
    ("directory=sub", "directory", "fio server's working directory"),
    ("directory={root}:/var/tmp", "directory", "outside the target"),
    ("opendir=/etc", "opendir", "outside the target"),
    ("write_iolog=/var/tmp/iolog", "write_iolog", "outside the target"),
    ("read_iolog=trace.log", "read_iolog", "fio server's working directory"),
    ("replay_redirect=/dev/sda", "replay_redirect", "outside the target"),
    ("merge_blktrace_file=/var/tmp/merged", "merge_blktrace_file", "outside the target"),
    ("buffer_pattern='/etc/shadow'", "buffer_pattern", "reads /etc/shadow on the fio server"),
    ("buffer_pattern=0x0a'/etc/shadow'", "buffer_pattern", "reads /etc/shadow"),
    ("verify=pattern\nverify_pattern='pattern.bin'", "verify_pattern", "fio server's working directory"),
    ("iomem=mmaphuge:/dev/hugepages/x", "mem", "creates /dev/hugepages/x"),
    ("write_bw_log=/root/.bashrc", "write_bw_log", "fio's client writes this log on this machine"),
    ("write_iops_log=../up", "write_iops_log", "fio's client writes this log on this machine"),
    ("directory=${{HOME}}", "directory", "expanded from the fio server's environment"),
    ("ioscheduler=none", "ioscheduler", "switches the I/O scheduler of the disk holding the file"),
    ("cgroup=elsewhere", "cgroup", "moves fio out of the cgroup"),
    ("ioengine=net\nhostname=192.0.2.1", "ioengine", "sends I/O from the fio server to another machine"),
])
def test_paths_outside_the_target_are_refused(tmp_path, body, option, words):
    root = tmp_path / "t"
    refused = _refused(_dir_job(root, body.format(root=root)), root)
    assert any(o == option and words in why for _, o, why in refused), refused


def test_default_names_and_file_targets(tmp_path):
    root = tmp_path / "t"
    # no filename: fio names the file after the job, inside iolab's directory
    assert _refused(_dir_job(root, ""), root) == []
    assert _refused(_dir_job(root, "filename=sub/a.dat:b.dat\nwrite_iolog=" + str(root / "io.log")), root) == []
    assert _refused(_dir_job(root, 'buffer_pattern="echo PWNED"0x0a\nwrite_iops_log=h1'), root) == []
    refused = _refused("[global]\ndirectory=" + str(root) + "\n[../../x]\nrw=write\nsize=1m\n", root)
    assert any(o == "filename_format" and "'..'" in why for _, o, why in refused), refused
    # a file target: a job without directory would write into the server's working directory
    device = tmp_path / "disk.img"
    refused = _refused("[j]\nrw=write\nsize=1m\n", device)
    assert refused and "in the fio server's working directory" in refused[0][2]
    assert _refused(f"[j]\nrw=write\nsize=1m\nfilename={device}\n", device) == []
    assert _refused(f"[j]\nrw=write\nsize=1m\nfilename={device}:/var/tmp/other\n", device)


def test_symlinks_are_followed_for_a_server_on_this_machine(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (tmp_path / "else").mkdir()
    os.symlink(tmp_path / "else", root / "link")
    text = _dir_job(root, "filename=link/x.dat")
    refused = _refused(text, root, local=True)
    assert refused and refused[0][1] == "filename" and "outside the target" in refused[0][2]
    # far away the link cannot be looked at: the text is inside (documented), '..' is what is refused
    assert _refused(text, root, local=False) == []


def test_pattern_files():
    assert fleetgate.pattern_files('"echo PWNED"0x0a') == []
    assert fleetgate.pattern_files("0xdead'/a/b'\"it's\"'c'") == ["/a/b", "c"]


@needs_root
@requires("mkfs.ext4")
@pytest.mark.parametrize("job_text", [
    "[global]\nrw=write\nsize=2m\nfilename={up}{dev}\n[job]\nfilename=ok1.dat\n",  # J1: the global's file is added
    "[job]\nrw=write\nsize=2m\nfilename={up}{dev} ;\rfilename=ok5.dat\n",  # J5: one line to fio, cut at ';'
], ids=["J1", "J5"])
def test_a_job_sent_to_a_server_cannot_write_a_device_nobody_named(servers, make_loop, tmp_path, job_text):
    """Issue 27: J1 through --hosts wiped the device (and fio unlinked its node with unique_filename)."""
    victim = make_loop("64M")
    sh("mkfs.ext4", "-q", victim)
    before = hashlib.sha256(open(victim, "rb").read(4 << 20)).hexdigest()
    target = tmp_path / "t"
    job = tmp_path / "j.fio"
    job.write_text(job_text.format(up="../" * 12, dev=victim.lstrip("/")))
    inv = inventory_file(tmp_path, [tcp_host("h1", servers, target)])
    proc = iolab_cli("run", job, "--hosts", inv, "--data", tmp_path / "data", "--no-progress", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "refused" in proc.stderr and "Traceback" not in proc.stderr
    assert os.path.exists(victim) and hashlib.sha256(open(victim, "rb").read(4 << 20)).hexdigest() == before
    assert not (tmp_path / "data").exists()
