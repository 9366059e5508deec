"""The job gate: what fio will open is checked before a run (issue 15, parts 1, 2, 7 and 8).

Option names and rw modes come from the fio installed here; the reproducers run
the real CLI against loop devices over scratch files (never a real disk).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import IOLAB, ROOT, iolab_cli, live_processes, needs_fio, needs_root
from device_fixtures import detach, make_loop, mounted_image, requires, scratch, sh, unmount  # noqa: F401
from iolab.devices import blockdev
from iolab.engine.jobfile import gate as jobgate
from iolab.core.errors import IolabError

pytestmark = [needs_fio]

SMALL = {"name": "small", "description": "one small job per direction", "isolation": "none",
         "defaults": {"size": "4M", "runtime": 1, "repeat": 1},
         "fio": {"ioengine": "psync"}}


def recipe_file(tmp_path: Path, rw: list, fio: dict | None = None, name: str = "small") -> Path:
    """A small recipe; ``fio`` are the test's own fio options (they follow ``rw`` in its job section)."""
    import yaml
    test = {"name": "t", "description": "t", "rw": rw, "bs": "64k"}
    if fio:
        test["fio"] = fio
    data = dict(SMALL, name=name, tests=[test])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def head_digest(path, size=16 << 20) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


def last_line(proc) -> Path:
    return Path(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------ reading jobs as fio does

def test_aliases_and_rw_modes_come_from_fio():
    found = jobgate.accesses("[a]\nfilename=/x/a\nreadwrite=randwrite:8\n"
                             "[b]\nfilename=/x/b\nrw=randtrim\n"
                             "[c]\nfilename=/x/c\nrw=read\nfill_fs=1\n", "t.fio")
    by_job = {a.job: a for a in found}
    assert by_job["a"].writes and "rw=randwrite:8" in by_job["a"].why
    assert by_job["b"].trims and not by_job["b"].writes
    assert not by_job["c"].destructive
    assert jobgate.canonical("readwrite") == "rw" and jobgate.canonical("fill_fs") == "fill_device"


def test_directory_and_filename_lists_are_combined_as_fio_does(tmp_path):
    text = f"[j]\ndirectory={tmp_path}/a:{tmp_path}/b\nfilename=x:y\\:z:/abs\nrw=write\n"
    paths = {a.path for a in jobgate.accesses(text) if a.option == "filename"}
    # fio prepends the directory even to an absolute file name
    assert paths == {f"{tmp_path}/{d}/{f}" for d in "ab" for f in ("x", "y:z", "abs")}
    generated = jobgate.accesses(f"[j]\ndirectory={tmp_path}/a:{tmp_path}/b\n")
    assert {a.path for a in generated if a.option == "directory"} == {f"{tmp_path}/a", f"{tmp_path}/b"}


def test_generated_names_follow_filename_format_for_every_clone():
    found = jobgate.accesses("[j]\nfilename_format=/dev/fake$jobnum.$filenum\nnumjobs=2\nnrfiles=2\nrw=write\n")
    assert {a.path for a in found} == {f"/dev/fake{j}.{f}" for j in (0, 1) for f in (0, 1)}
    default = jobgate.accesses("[seq]\nrw=read\n", target="/srv/t")
    assert [a.path for a in default] == ["/srv/t/seq.0.0"]


def test_a_later_global_section_applies_to_the_jobs_after_it():
    found = jobgate.accesses("[a]\nfilename=/x/a\n[global]\nrw=write\n[b]\nfilename=/x/b\n"
                             "; a comment\n[c]\nfilename=/x/c ; trailing\nrw=read\n")
    assert [(a.job, a.path, a.writes) for a in found] == [
        ("a", "/x/a", False), ("b", "/x/b", True), ("c", "/x/c", False)]


def test_includes_and_too_many_names_are_refused():
    with pytest.raises(IolabError, match="include"):
        jobgate.accesses("[a]\ninclude other.fio\n", "t.fio")
    with pytest.raises(IolabError, match="filename_format"):
        jobgate.accesses("[a]\nnumjobs=100000\nrw=write\n")


def test_outside_resolves_symlinks(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "escape").symlink_to("/dev")
    found = jobgate.accesses("[a]\nfilename=escape/null:inside\nrw=write\n", target=str(tmp_path / "root"))
    assert [a.path for a in jobgate.outside(found, [str(tmp_path / "root")])] == [f"{tmp_path}/root/escape/null"]


def test_logs_and_iologs_are_files_the_job_writes(tmp_path):
    """An iolog is read to see what it replays (a missing one cannot be judged: refused, see the J9b tests)."""
    (tmp_path / "log").write_text("fio version 2 iolog\nf add\nf open\nf read 0 4096\nf close\n")
    found = jobgate.accesses(f"[a]\nfilename=f\nwrite_bw_log={tmp_path}/bw\nread_iolog={tmp_path}/log\n", target="/t")
    logs = {(a.option, a.path): a for a in found}
    assert logs["write_bw_log", f"{tmp_path}/bw"].writes
    assert not logs["read_iolog", f"{tmp_path}/log"].writes and not logs["read_iolog", "/t/f"].writes


# ---------------------------------------------------------- the reproducers (CLI)

@needs_root
@requires("mkfs.ext4", "wipefs")
def test_a_job_file_cannot_write_a_device_outside_the_target(make_loop, tmp_path):
    victim = make_loop("64M")
    sh("mkfs.ext4", "-q", victim)
    (tmp_path / "dir").mkdir()
    job = tmp_path / "jd.fio"
    job.write_text(f"[w]\ndirectory=/dev\nfilename={Path(victim).name}\nrw=write\nbs=1M\nsize=8M\ndirect=1\n")
    before = head_digest(victim)
    for extra in ([], ["--dry-run"]):
        proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--no-progress", "--data", tmp_path / "data", *extra)
        assert proc.returncode == 2, proc.stdout
        assert victim in proc.stderr and "outside the targets" in proc.stderr and "--allow-path" in proc.stderr
    # allowed on purpose, the device rules still hold: the signature needs --confirm
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-path", victim, "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 2 and "ext4" in proc.stderr and f"--confirm {victim}" in proc.stderr
    assert head_digest(victim) == before
    assert "ext4" in sh("wipefs", "--no-act", victim).stdout
    assert not (tmp_path / "data").exists()


@needs_root
@requires("mkfs.ext4")
def test_allow_mounted_write_and_a_mounted_device_are_refused(make_loop, scratch, tmp_path):
    mounted, target = make_loop("64M"), make_loop("64M")
    sh("mkfs.ext4", "-q", mounted)
    (scratch / "mnt").mkdir()
    sh("mount", mounted, scratch / "mnt")
    job = tmp_path / "mw.fio"
    job.write_text(f"[w]\nfilename={mounted}\nallow_mounted_write=1\nrw=write\nbs=1M\nsize=4M\n")
    try:
        proc = iolab_cli("run", job, "--target", target, "--allow-path", mounted, "--confirm", mounted,
                         "--no-progress", "--data", tmp_path / "data")
        assert proc.returncode == 2 and "allow_mounted_write" in proc.stderr
        job.write_text(f"[w]\nfilename={mounted}\nrw=write\nbs=1M\nsize=4M\n")
        proc = iolab_cli("run", job, "--target", target, "--allow-path", mounted, "--confirm", mounted,
                         "--no-progress", "--data", tmp_path / "data")
        assert proc.returncode == 2 and "mounted at" in proc.stderr and mounted in proc.stderr
        assert not (tmp_path / "data").exists()  # refused before any run directory or fio
    finally:
        unmount(scratch / "mnt")
        detach(mounted)  # the kernel lets the loop go a while after the umount


def test_an_existing_file_is_not_overwritten_unasked(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_bytes(os.urandom(10 << 20))
    before = head_digest(precious)
    recipe = recipe_file(tmp_path, ["write"])
    proc = iolab_cli("run", recipe, "--target", precious, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2 and "existing file iolab did not create" in proc.stderr
    assert f"--confirm {precious}" in proc.stderr
    # a read recipe still writes when iolab must lay the file out to --size
    reads = recipe_file(tmp_path, ["read"], name="reads")
    proc = iolab_cli("run", reads, "--size", "16M", "--target", precious, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2 and "up to --size" in proc.stderr
    assert head_digest(precious) == before and not (tmp_path / "data").exists()
    proc = iolab_cli("run", recipe, "--target", precious, "--confirm", precious, "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((last_line(proc) / "manifest.json").read_text())
    assert manifest["safety"] == {"confirm": [str(precious)], "allow_paths": [], "allow_exec": False}
    assert head_digest(precious) != before


@needs_root
@requires("mkfs.ext4")
def test_a_file_backing_a_mounted_loop_device_is_that_device(scratch, tmp_path):
    image = scratch / "a.img"
    with mounted_image(image, scratch / "mnt") as loop:
        assert blockdev.loops_backed_by(image) == [loop]
        before = head_digest(image)
        proc = iolab_cli("run", recipe_file(tmp_path, ["write"]), "--target", image, "--confirm", image,
                         "--no-progress", "--data", tmp_path / "data")
        assert proc.returncode == 2 and f"it backs {loop}" in proc.stderr and "mounted at" in proc.stderr
        assert head_digest(image) == before


@needs_root
@requires("mkfs.ext4")
@pytest.mark.parametrize("rw, fio", [(["trim"], None), (["read"], {"readwrite": "write"})],
                         ids=["trim", "readwrite-alias"])
def test_what_a_recipe_does_is_read_from_its_options_not_its_rw_names(make_loop, tmp_path, rw, fio):
    device = make_loop("64M")
    sh("mkfs.ext4", "-q", device)
    before = head_digest(device)
    proc = iolab_cli("run", recipe_file(tmp_path, rw, fio), "--target", device, "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 2 and "refusing" in proc.stderr and "ext4" in proc.stderr, proc.stderr
    assert f"--confirm {device}" in proc.stderr
    assert head_digest(device) == before


def test_exec_hooks_need_allow_exec(tmp_path):
    """A hook runs only with --allow-exec, and then confined: by a relative name it writes in fio's working
    directory (the run's raw/), the one place besides the run's directory in the target it can write."""
    (tmp_path / "dir").mkdir()
    job = tmp_path / "hook.fio"
    job.write_text("[r]\nrw=read\nsize=1M\nexec_prerun=touch ran\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2 and "exec_prerun" in proc.stderr and "--allow-exec" in proc.stderr
    assert not list(tmp_path.rglob("ran"))
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-exec", "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert (last_line(proc) / "raw" / "ran").exists()
    assert json.loads((last_line(proc) / "manifest.json").read_text())["safety"]["allow_exec"] is True


def test_what_fio_writes_by_a_relative_name_stays_in_the_run_directory(tmp_path):
    """exec_prerun makes fio write <job>.prerun.txt in its working directory: the run's, not the caller's."""
    caller = tmp_path / "caller"
    (tmp_path / "dir").mkdir()
    caller.mkdir()
    job = tmp_path / "r.fio"
    job.write_text("[r]\nrw=read\nsize=1M\nexec_prerun=/bin/true\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-exec", "--no-progress",
                     "--data", "data", cwd=caller)  # a relative data directory: the job file is still found
    assert proc.returncode == 0, proc.stderr
    run_dir = caller / last_line(proc)
    assert sorted(p.name for p in caller.iterdir()) == ["data"]
    assert [p.relative_to(run_dir).parts[0] for p in run_dir.rglob("r.prerun.txt")] == ["raw"]
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


def test_a_job_file_inside_its_target_directory_runs(tmp_path):
    (tmp_path / "dir").mkdir()
    job = tmp_path / "ok.fio"
    job.write_text("[w]\nrw=write\nbs=64k\nsize=1M\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((last_line(proc) / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["safety"] == {"confirm": [], "allow_paths": [], "allow_exec": False}
    directory, = [a for a in manifest["commands"]["jobs/ok.fio"] if a.startswith("--directory=")]
    assert directory == f"--directory={tmp_path / 'dir'}" or directory.startswith(f"--directory={tmp_path / 'dir'}/")


# ------------------------------------------------------------------- smaller defects

def test_an_empty_target_and_an_empty_test_list_are_refused(tmp_path):
    proc = iolab_cli("run", "quick", "--target", "", "--dry-run")
    assert proc.returncode == 2 and "--target '': empty target" in proc.stderr
    proc = iolab_cli("run", "quick", "--target", tmp_path, "--tests", ",", "--dry-run")
    assert proc.returncode == 2 and "no test named in ','" in proc.stderr


@needs_root
def test_targets_on_one_file_system_share_its_free_space(scratch, tmp_path):
    fs = scratch / "fs"
    fs.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", fs)
    try:
        (fs / "a").mkdir()
        (fs / "b").mkdir()
        recipe = recipe_file(tmp_path, ["read"])
        one = iolab_cli("run", recipe, "--size", "30M", "--target", fs / "a", "--dry-run")
        assert one.returncode == 0, one.stderr
        both = iolab_cli("run", recipe, "--size", "30M", "--target", fs / "a", "--target", fs / "b", "--dry-run")
        assert both.returncode == 2 and "not enough free space" in both.stderr and "one file system" in both.stderr
    finally:
        unmount(fs)


def test_allow_path_lets_a_job_write_outside_and_is_recorded(tmp_path):
    (tmp_path / "dir").mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    job = tmp_path / "logged.fio"
    job.write_text(f"[w]\nrw=write\nbs=64k\nsize=1M\nwrite_bw_log={logs}/bw\n")
    refused = iolab_cli("run", job, "--target", tmp_path / "dir", "--no-progress", "--data", tmp_path / "data")
    assert refused.returncode == 2 and f"write_bw_log: {logs}/bw" in refused.stderr
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--allow-path", logs, "--no-progress",
                     "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((last_line(proc) / "manifest.json").read_text())["safety"]["allow_paths"] == [str(logs)]
    assert list(logs.glob("bw*.log"))


@needs_root
def test_a_device_reached_through_allow_path_is_held_exclusively_while_the_job_writes_it(make_loop, tmp_path):
    """As a written --target device is: nobody can mount or claim it (O_EXCL) while fio writes there."""
    victim = make_loop("64M")
    (tmp_path / "dir").mkdir()
    job = tmp_path / "held-device.fio"
    job.write_text(f"[w]\ndirectory=/dev\nfilename={Path(victim).name}\nrw=write\nbs=64k\nsize=8M\ndirect=1\ntime_based=1\nruntime=4\n")
    argv = [*IOLAB, "run", str(job), "--target", str(tmp_path / "dir"), "--allow-path", victim, "--no-progress",
            "--data", str(tmp_path / "data")]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not [p for p in live_processes(str(job.parent)) if "--output-format=" in p]:  # fio writing
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        with pytest.raises(OSError) as held:
            os.close(os.open(victim, os.O_RDONLY | os.O_EXCL))
        assert held.value.errno == errno.EBUSY
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    os.close(os.open(victim, os.O_RDONLY | os.O_EXCL))  # released when the run ends


@needs_root
@requires("mkswap", "swapon", "swapoff")
def test_an_active_swap_file_is_never_written(tmp_path):
    swap = tmp_path / "swapfile"
    sh("dd", "if=/dev/zero", f"of={swap}", "bs=1M", "count=16")
    swap.chmod(0o600)
    sh("mkswap", swap)
    if sh("swapon", swap, check=False).returncode != 0:
        pytest.skip("this kernel or file system cannot swap to a file")
    try:
        assert str(swap) in blockdev.swap_files()
        proc = iolab_cli("run", recipe_file(tmp_path, ["write"]), "--size", "4M", "--target", swap,
                         "--confirm", swap, "--dry-run")
        assert proc.returncode == 2 and "active swap file" in proc.stderr
    finally:
        sh("swapoff", swap)


@pytest.mark.parametrize("line, refusal, hint", [
    ("ioscheduler=none", "ioscheduler=none: refused: it switches the I/O scheduler", "/sys/block/DISK/queue/scheduler"),
    ("cgroup=mine", "cgroup=mine: refused: it moves fio out of the cgroup iolab runs it in", "--mem-limit"),
    ("cgroup_nodelete=1", "cgroup_nodelete=1: refused: it leaves a cgroup", "--mem-limit"),
    ("ioengine=net\nhostname=192.0.2.1\nport=8888", "ioengine=net: refused: it sends I/O to another machine",
     "--hosts"),
    ("ioengine=RBD", "ioengine=rbd: refused", "--hosts"),
])
def test_options_that_reach_beyond_the_targets_are_refused_naming_the_job(tmp_path, line, refusal, hint):
    from iolab.engine import runner
    (tmp_path / "dir").mkdir()
    job = tmp_path / "outside.fio"
    job.write_text(f"[global]\nrw=read\nbs=64k\nsize=1M\n[reader]\n{line}\n")
    with pytest.raises(IolabError) as refused:
        runner.plan(str(job), [str(tmp_path / "dir")])
    assert refusal in refused.value.message and "outside: [reader]" in str(refused.value)  # the job file, the job
    assert hint in (refused.value.hint or "")


def test_one_list_of_options_reaching_outside_the_targets_for_the_local_and_the_fleet_gate(tmp_path):
    """jobgate.outside_problems is the one reading of OUTSIDE_OPTIONS and the network ioengines: the local gate
    refuses its first, the fleet's gate all of them, each in its own words; ioengine is read as fio reads it
    (quotes, spaces and case dropped) by jobcheck.engine_name, which jobcheck's exec-engine check uses too."""
    from iolab.engine.jobfile import check as jobcheck
    from iolab.fleet import gate
    text = f"[reader]\ndirectory={tmp_path}\nrw=read\nsize=1M\nioscheduler=none\ncgroup=mine\nioengine= 'RBD' \n"
    job, = jobgate.parse(text, "t.fio")
    found = jobgate.outside_problems(job)
    assert [(option, value) for option, value, _, _ in found] == [
        ("ioscheduler", "none"), ("cgroup", "mine"), ("ioengine", "rbd")]
    assert all(why and hint for _, _, why, hint in found)
    assert jobgate.outside_problems(jobgate.parse("[plain]\nrw=read\nioengine=libaio\n", "t.fio")[0]) == []
    fleet = {r.option: r.reason for r in gate.refusals(text, "t.fio", root=str(tmp_path))}
    assert fleet["ioscheduler"].endswith("on the fio server") and fleet["cgroup"].startswith("it moves fio out")
    assert fleet["ioengine"] == "it sends I/O from the fio server to another machine or service"
    assert jobcheck.engine_name(" \"External:/opt/x.so\" ") == "external:/opt/x.so"
    assert jobcheck.engine_name(None) == ""
    assert [p.category for p in jobcheck.problems("[x]\nioengine= 'EXEC'\n")] == ["exec"]


def test_the_gate_names_the_directory_fio_really_gets_the_runs_own(tmp_path):
    """fio gets ``--directory=<target>/iolab-<run_id>`` (the run's own directory, iolab.engine.workdirs),
    not the target: the gate reads a job file's relative names there, and finds iolab's test file there."""
    from iolab.engine import recipes, targets
    target = targets.Target(spec=str(tmp_path), kind="dir", path=str(tmp_path), name="t")
    jobfile = recipes.jobfile_recipe(tmp_path / "w.fio", "[w]\nrw=write\nsize=1M\nfilename=a.dat\n")
    found, _ = jobgate.target_accesses(jobfile, target)
    assert [a.path for a in found] == [f"{tmp_path}/iolab-<run_id>/a.dat"]
    builtin = recipes.load_file(recipe_file(tmp_path, ["write"]))
    found, _ = jobgate.target_accesses(builtin, target)
    assert {a.path for a in found} == {f"{tmp_path}/iolab-<run_id>/{targets.TEST_FILE}"}
