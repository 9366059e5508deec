"""The kernel's boundary (issue 27, items 1 and 9): a hostile job file can at worst fail its own test.

Every reproducer of issue 27 runs as the real job under real fio inside the
confinement a run gets (:mod:`iolab.isolation.confine`), against a real
ext4-signed loop device that is NOT a target: the device (its head's digest),
the file on it and every precious file beside the target survive. The gate is
not asked here: these are the jobs it once misread, handed straight to fio.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import needs_fio, needs_root
from device_fixtures import mounted_image, requires, sh
from iolab.isolation import confine

pytestmark = [needs_fio, needs_root, requires("bwrap", "mkfs.ext4", "debugfs", "losetup")]

#: fio's path walks up from its directory: ../../../.. to /, then into /dev
UP = "../" * 12


def digest(path, size=8 << 20) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


def marker(device: str) -> str:
    """The text of the file on the victim's ext4 (read without mounting it)."""
    return sh("debugfs", "-R", "cat /marker.txt", device).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A victim (ext4 with a marker file, never named), a named raw device, a target directory
    holding precious files and the run's own directory in it."""
    root = tmp_path_factory.mktemp("confine")
    loops = []

    def loop(name: str, size: str = "32M") -> str:
        image = root / f"{name}.img"
        sh("truncate", "--size", size, image)
        device = sh("losetup", "--find", "--show", image).stdout.strip()
        loops.append(device)
        return device

    try:
        victim = loop("victim")
        sh("mkfs.ext4", "-q", "-F", victim)
        (root / "marker.src").write_text("precious data\n")
        sh("debugfs", "-w", "-R", f"write {root / 'marker.src'} marker.txt", victim)
        named = loop("named")
        target = root / "target"
        run_dir = target / "iolab-run"
        run_dir.mkdir(parents=True)
        outside = root / "outside"
        outside.mkdir()
        ncpus = os.cpu_count()
        precious = {target / "precious.dat": b"p" * 4096, target / "short.dat": b"s" * 1024,
                    target / f"disk{ncpus}.img": b"d" * 8192, outside / "keep.txt": b"k" * 100}
        for path, data in precious.items():
            path.write_bytes(data)
        yield {"root": root, "victim": victim, "named": named, "target": target, "run_dir": run_dir,
               "outside": outside, "precious": precious}
    finally:
        for device in loops:
            sh("losetup", "--detach", device, check=False)


def confined_fio(lab, text: str, *, name: str = "job.fio", timeout: float = 120) -> subprocess.CompletedProcess:
    """fio on a job file, confined as a run on the lab's named device and run directory is, started in
    the run directory (relative names land there; a run's ``--directory`` would also move absolute
    names into it, which is not what these jobs test)."""
    job = lab["root"] / name
    job.write_text(text)
    box = confine.Confinement(writable=(str(lab["run_dir"]),), devices=(lab["named"],))
    argv = box.wrap(["fio", "--output-format=json", str(job)])
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout,
                          cwd=lab["run_dir"])


def failed(proc) -> bool:
    """fio said a job failed: an exit status, an ``err=`` line, or a job's error in the JSON."""
    if proc.returncode != 0 or "err=" in proc.stdout + proc.stderr or "got signal" in proc.stderr:
        return True
    start = proc.stdout.find("{")
    if start < 0:
        return True
    data = json.loads(proc.stdout[start:])
    return any(job.get("error") for job in data.get("jobs", []))


def intact(lab, before: str) -> None:
    assert digest(lab["victim"]) == before, "the device nobody named was written"
    assert marker(lab["victim"]) == "precious data\n"
    for path, data in lab["precious"].items():
        assert path.read_bytes() == data, f"{path} was changed"


#: issue 27's reproducers: {victim} is the device nobody named, {named} the target device
HOSTILE = {
    "J1 global file added to the job's": "[global]\nrw=write\nsize=1m\nfilename={up}{victim}\n"
                                         "[job]\nfilename={named}\n",
    "J2 two filename lines": "[job]\nrw=write\nsize=1m\nfilename={named}\nfilename={up}{victim}\n",
    "J4 section without ]": "[job]\nrw=read\nsize=1m\nfilename={named}\n[job2\nrw=write\n"
                            "filename={up}{victim}\n",
    "J5 carriage return after ;": "[job]\nrw=write\nsize=1m\nfilename={up}{victim} ;\rfilename=ok5.dat\n",
    "J5 form feed after ;": "[job]\nrw=write\nsize=1m\nfilename={up}{victim} ;\ffilename=ok5.dat\n",
    "[globalX] is global to fio": "[globalX]\nfilename={up}{victim}\n[job]\nrw=write\nsize=1m\n",
    "$ncpus names a file beside the target": "[job]\nrw=write\nsize=8k\nfilename=../disk$ncpus.img\n",
    "opendir writes every file under it": "[job]\nrw=write\nsize=64k\nopendir={target}\n",
    "a read of a short file rewrites it": "[job]\nrw=read\nsize=1m\nfilename=../short.dat\n",
    "the job's own directory= outside": "[job]\nrw=write\nsize=64k\ndirectory={outside}\nfilename=keep.txt\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_job_fails_its_own_test_and_nothing_unnamed_changes(lab, case):
    before = digest(lab["victim"])
    text = HOSTILE[case].format(up=UP, victim=lab["victim"], named=lab["named"], target=lab["target"],
                                outside=lab["outside"])
    proc = confined_fio(lab, text)
    assert failed(proc), f"fio reported success for {case}: {proc.stdout[-500:]} {proc.stderr[-500:]}"
    intact(lab, before)


def test_an_included_exec_prerun_cannot_write_outside(lab):
    """J6: fio includes any line starting with 'include'; what the included file runs is confined too."""
    before = digest(lab["victim"])
    pwned = lab["outside"] / "pwned"
    inc = lab["root"] / "evil.inc"
    inc.write_text(f"exec_prerun=touch {pwned}\nfilename={UP}{lab['victim']}\n")
    proc = confined_fio(lab, f"[job]\nrw=write\nsize=1m\ninclude={inc}\n")
    assert failed(proc)
    assert not pwned.exists(), "exec_prerun wrote outside the run's directory"
    intact(lab, before)


def test_a_read_iolog_replaying_writes_on_another_device_fails(lab):
    """J9b: read_iolog on a read job replays the writes its trace names, on the device the trace names."""
    before = digest(lab["victim"])
    trace = lab["root"] / "trace.log"
    victim = lab["victim"]
    trace.write_text(f"fio version 2 iolog\n{victim} add\n{victim} open\n"
                     + "".join(f"{victim} write {n * 65536} 65536\n" for n in range(16)) + f"{victim} close\n")
    proc = confined_fio(lab, f"[job]\nrw=read\nread_iolog={trace}\n")
    assert failed(proc)
    intact(lab, before)


def test_a_symlink_to_a_mounted_device_cannot_reach_it(lab, tmp_path):
    """J13: a symlink elsewhere naming a mounted device: the name resolves to a node the sandbox lacks."""
    mountpoint = tmp_path / "mnt"
    with mounted_image(tmp_path / "mounted.img", mountpoint, size="32M") as device:
        (mountpoint / "data.txt").write_text("mounted and precious\n")
        sh("sync")
        link = tmp_path / "looks-harmless"
        link.symlink_to(device)
        head = digest(device, 4 << 20)
        proc = confined_fio(lab, f"[job]\nrw=write\nsize=1m\nfilename={link}\n")
        assert failed(proc)
        assert digest(device, 4 << 20) == head, "the mounted device's superblock was written"
        assert (mountpoint / "data.txt").read_text() == "mounted and precious\n"


def test_the_named_device_and_the_run_directory_are_writable(lab):
    """The control: what the user named is reachable, so the failures above are the boundary's."""
    before = digest(lab["named"], 1 << 20)
    proc = confined_fio(lab, f"[dev]\nrw=write\nsize=1m\nfilename={lab['named']}\nbuffer_pattern=0xab\n"
                             f"[file]\nrw=write\nsize=1m\nfilename=inside.dat\n")
    assert not failed(proc), proc.stdout[-800:] + proc.stderr[-800:]
    assert digest(lab["named"], 1 << 20) != before
    assert (lab["run_dir"] / "inside.dat").stat().st_size == 1 << 20


def test_an_unknown_device_name_fails_instead_of_becoming_a_file(lab):
    """/dev is read-only inside: a name that is no bound device can never turn into a file in RAM."""
    proc = confined_fio(lab, "[job]\nrw=write\nsize=1m\nfilename=/dev/iolab-nonexistent\n")
    assert failed(proc)
    assert "Read-only file system" in proc.stdout + proc.stderr or "No such file" in proc.stdout + proc.stderr


def test_sigint_reaches_confined_fio_and_it_writes_its_results(lab):
    """The watchdog's and Ctrl-C's SIGINT goes to fio inside (bwrap forwards nothing): fio stops and
    prints its JSON with what it measured."""
    job = lab["root"] / "long.fio"
    job.write_text(f"[long]\nrw=read\nbs=4k\nsize=1m\ntime_based=1\nruntime=300\nfilename={lab['named']}\n")
    box = confine.Confinement(devices=(lab["named"],))
    proc = confine.ConfinedProcess(box.wrap(["fio", "--output-format=json", str(job)]), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, **confine.popen_kwargs())
    try:
        deadline = time.monotonic() + 60
        while not confine.confined_pids(proc.pid):
            assert time.monotonic() < deadline, "fio did not start inside"
            time.sleep(0.1)
        time.sleep(2)  # let it read something
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = json.loads(out[out.index("{"):])
    assert data["jobs"][0]["read"]["io_bytes"] > 0


def test_confined_fio_dies_with_a_killed_iolab(lab, tmp_path):
    """kill -9 of the process that started it: fio does not run on, reparented to PID 1."""
    job = tmp_path / "orphan.fio"
    job.write_text(f"[orphan]\nrw=read\nbs=4k\nsize=1m\ntime_based=1\nruntime=300\nfilename={lab['named']}\n")
    box = confine.Confinement(devices=(lab["named"],))
    script = ("import subprocess, sys, time\n"
              "from iolab.isolation import confine\n"
              f"p = confine.ConfinedProcess({box.wrap(['fio', str(job)])!r}, stdout=subprocess.DEVNULL,"
              " **confine.popen_kwargs())\n"
              "print(p.pid, flush=True)\n"
              "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    outer = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    while not confine.confined_pids(outer):
        assert time.monotonic() < deadline, "fio did not start inside"
        time.sleep(0.1)
    inside = confine.confined_pids(outer)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in inside + [outer]):
        assert time.monotonic() < deadline, f"still running after iolab was killed: {inside}"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "gone zombie"


def test_wrap_refuses_places_that_are_not_there_or_are_links(tmp_path):
    from iolab.core.errors import IolabError
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(IolabError, match="symbolic link"):
        confine.Confinement(writable=(str(link),)).wrap(["true"])
    with pytest.raises(IolabError, match="does not exist"):
        confine.Confinement(writable=(str(tmp_path / "missing"),)).wrap(["true"])
    with pytest.raises(IolabError, match="not a block device"):
        confine.Confinement(devices=(str(tmp_path),)).wrap(["true"])


def test_a_reader_runs_confined_with_nothing_writable_no_device_no_network(tmp_path):
    """fio --parse-only and --showcmd (check_job, the job reader) run this way: they only read."""
    script = f"touch {tmp_path}/x; ls /dev; echo --; tail -n +3 /proc/net/dev | cut -d: -f1"
    argv = confine.reader_argv(["sh", "-c", script])
    assert argv[0] == confine.bwrap_binary() and argv[-4:] == ["--", "sh", "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert "Read-only file system" in proc.stderr and not (tmp_path / "x").exists()
    devices, interfaces = proc.stdout.split("--\n")
    assert set(devices.split()) == {"null", "zero", "random", "urandom"}
    assert interfaces.split() in (["lo"], [])


def test_an_allow_path_that_does_not_exist_is_refused_not_widened_to_its_directory(tmp_path):
    """Binding the directory of a file fio would create lets the run write everything beside it: refused,
    naming the path, before any run directory exists; an existing file is bound as itself, nothing more."""
    from cli_helpers import iolab_cli
    from iolab.core.errors import IolabError
    (tmp_path / "dir").mkdir()
    beside = tmp_path / "beside.txt"
    beside.write_text("not allowed\n")
    new = tmp_path / "new.dat"
    with pytest.raises(IolabError, match="does not exist") as refused:
        confine.allowed([str(new)])
    assert refused.value.context == str(new) and not new.exists()
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert confine.allowed([str(beside)]) == ([str(beside)], [])
    with pytest.raises(IolabError, match="symbolic link"):  # a dangling link is there: never followed
        confine.for_run([], raw_dir=str(tmp_path / "dir"), allowed_paths=[str(dangling)])[0].arguments()
    job = tmp_path / "w.fio"
    job.write_text(f"[w]\nrw=write\nbs=64k\nsize=1M\ndirectory={tmp_path}\nfilename={new.name}\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-path", new, "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 2 and str(new) in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    assert not new.exists() and not (tmp_path / "data").exists()
    assert f"--allow-path {tmp_path}" in proc.stderr and f"--confirm {new}" in proc.stderr  # the ways out
    new.write_bytes(bytes(1 << 20))  # at its size: fio would unlink a shorter file, which a bound file cannot be
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-path", new, "--confirm", new,
                     "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert new.read_bytes() != bytes(1 << 20) and beside.read_text() == "not allowed\n"
