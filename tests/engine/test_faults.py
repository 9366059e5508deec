"""Faults end cleanly: fio refusing a job, fio killed from outside, a hung fio, bad input.

Real fio on scratch files and loop devices; the hang is made by SIGSTOP of
fio (the test controls it), and the watchdog's margin is set small in the
recipe so the test needs no wall-clock bound tighter than "it ended".
"""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import iolab
from iolab.core.procstat import children
from iolab.engine import fio, runner
from iolab.engine.fio import outcome as fiooutcome
from iolab.core.errors import IolabError

from cli_helpers import IOLAB, ROOT, cli_main, live_processes, needs_fio, needs_root
from device_fixtures import make_loop, scratch, sh  # noqa: F401  (fixtures)
from kernel_fixtures import mounted

pytestmark = needs_fio


def _recipe(tmp_path, text: str) -> str:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


def _main(capsys, caplog, *args) -> tuple[int, str, str]:
    """The CLI's main in-process, without progress bars: exit code, stdout, stderr (cli_helpers.cli_main)."""
    return cli_main(capsys, caplog, *args, "--no-progress")


REFUSED = """
name: refused
description: fio refuses the first job when it starts (block size over the file size); the second is fine
isolation: none
defaults: {size: 4M, runtime: 1}
fio: {ioengine: psync}
tests:
  - name: REFUSED
    rw: read
    bs: 1M
    fio: {size: 4k}
  - name: FINE
    rw: read
    bs: 1M
"""


def test_a_job_fio_refuses_fails_with_fios_reason(tmp_path, capsys, caplog):
    returncode, stdout, stderr = _main(capsys, caplog, "run", _recipe(tmp_path, REFUSED), "--target", tmp_path,
                                       "--data", tmp_path / "data")
    assert returncode == 1 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("iolab: run failed: REFUSED: ")
    run_dir = Path(stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    tests = {t["name"]: t for t in manifest["tests"]}
    assert tests["REFUSED"]["status"] == "failed" and tests["FINE"]["status"] == "completed"
    assert "fio: size too small" in tests["REFUSED"]["error"]  # fio's own words
    table = iolab.load(run_dir).set_index("test")
    assert not table.loc["REFUSED", "valid"] and pd.isna(table.loc["REFUSED", "bw_mbps"])
    assert table.loc["FINE", "valid"] and table.loc["FINE", "bw_mbps"] > 0


@needs_root
def test_a_job_fio_aborts_without_io_is_not_a_result(make_loop, scratch):  # noqa: F811
    """fio aborts a write to a mounted device and exits 0 with an all-zero job: no result, fio's reason."""
    device = make_loop("64M")
    sh("mkfs.ext4", "-q", device)
    mnt = scratch / "mnt"
    mnt.mkdir()
    sh("mount", device, mnt)
    try:
        job = scratch / "w.fio"
        job.write_text(f"[w]\nfilename={device}\nrw=write\nbs=1M\nsize=8M\ndirect=1\n")
        proc = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=60)
    finally:
        sh("umount", mnt)
    assert proc.returncode == 0  # fio itself calls this a success
    frame = fiooutcome.judge(proc.stdout, proc.stderr, proc.returncode, job="w")
    assert len(frame) == 1 and pd.isna(frame["io_bytes"].iloc[0])
    assert frame["error"].iloc[0].startswith("fio did no I/O: fio: ")
    assert "appears mounted" in frame["error"].iloc[0]


def test_a_signal_that_ended_fio_is_the_error():
    assert fiooutcome.killed_by(-signal.SIGKILL) == "fio killed by SIGKILL"
    assert fiooutcome.killed_by(0) is None and fiooutcome.killed_by(1) is None
    frame = fiooutcome.judge("", "", -signal.SIGKILL, job="x")
    assert frame["error"].tolist() == ["fio killed by SIGKILL"] and "io_bytes" in frame


TWO = """
name: two
description: a long test that gets killed or hangs, then a short one
isolation: none
defaults: {size: 16M, runtime: 1, watchdog_margin: 10}  # margin: a busy machine is not a hang
fio: {ioengine: psync, direct: 1}
tests:
  - name: LONG
    rw: read
    bs: 64k
    runtime: 120
  - name: SHORT
    rw: read
    bs: 64k
"""


def _fio_of(marker: str, timeout: float = 120) -> list[int]:
    """PIDs of the live fio processes measuring with job file ``marker`` (not its --parse-only check, nor
    the bubblewrap processes confining fio, whose command lines hold fio's), as soon as fio runs: fio's
    main process is enough (its job process is forked by it; a stopped fio forks none)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [int(line.split(":")[0]) for line in live_processes(marker) if "--output-format=" in line]
        pids = [pid for pid in pids if _comm(pid) == "fio"]
        if pids:
            return pids
        time.sleep(0.01)
    raise AssertionError(f"no fio running {marker}")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_fio_killed_from_outside_fails_that_test_and_the_run_goes_on(tmp_path):
    data = tmp_path / "data"
    proc = subprocess.Popen(IOLAB + ["run", _recipe(tmp_path, TWO), "--target", str(tmp_path), "--data", str(data),
                                     "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        for pid in _fio_of("jobs/LONG.fio"):
            os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "iolab: run failed: LONG: fio killed by SIGKILL"
    run_dir = Path(out.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tests = {t["name"]: t for t in manifest["tests"]}
    assert tests["LONG"]["status"] == "failed" and tests["LONG"]["error"] == "fio killed by SIGKILL"
    assert tests["SHORT"]["status"] == "completed"
    table = iolab.load(run_dir).set_index("test")
    assert not table.loc["LONG", "valid"] and table.loc["SHORT", "bw_mbps"] > 0
    assert not list((run_dir / "raw").glob("LONG-1.json")) or (run_dir / "raw" / "LONG-1.json").stat().st_size
    assert not live_processes(str(run_dir))


def test_the_watchdog_stops_a_hung_fio_and_the_run_goes_on(tmp_path, monkeypatch):
    data = tmp_path / "data"
    stopped = []
    real_start = fio.start

    def start(argv, **kwargs):  # LONG's fio stops answering the moment it starts, as one stuck in the kernel
        proc = real_start(argv, **kwargs)  # (stopped here, not by a thread racing fio's 2 s of I/O)
        if str(argv[-1]).endswith("LONG.fio"):
            os.kill(proc.pid, signal.SIGSTOP)
            stopped.append(proc.pid)
        return proc

    monkeypatch.setattr(fio, "start", start)
    # a stopped fio cannot act on SIGINT, however long it is given: SIGKILL follows after 2 s, not the usual 10
    monkeypatch.setattr(runner, "STOP_GRACE_S", 2)
    recipe = _recipe(tmp_path, TWO.replace("runtime: 120", "runtime: 2"))
    try:
        result = runner.run(recipe, [str(tmp_path)], data_dir=data, progress=False)
    finally:
        for pid in stopped:  # never leave a stopped process behind, whatever happened
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
    assert len(stopped) == 1
    tests = {t["name"]: t for t in result.manifest["tests"]}
    error = tests["LONG"]["error"]
    assert tests["LONG"]["status"] == "failed" and error.startswith("watchdog: fio still ran after ")
    # the limit is made of the job: 2 s runtime + 16 MiB laid out at 10 MB/s + the recipe's 10 s margin
    assert "ramp 0 s + I/O 2 s + layout 2 s + margin 10 s" in error
    assert "stopped with SIGKILL" in error and "(2 s after SIGINT did not stop it)" in error  # stopped: no SIGINT
    assert tests["SHORT"]["status"] == "completed"
    assert result.manifest["status"] == "failed"
    assert not live_processes(str(result.path))  # fio and its job process are gone
    table = iolab.load(result.path).set_index("test")
    assert not table.loc["LONG", "valid"]


def test_mem_limit_has_a_floor_and_bad_input_makes_no_run_directory(tmp_path, capsys, caplog):
    """The CLI's main in-process: an uncaught exception would fail the test here as a Traceback would
    print from a process."""
    data = tmp_path / "data"
    for args, expected in [(["--mem-limit", "10M"], "--mem-limit: 10M is below the minimum of 32 MiB"),
                           (["--size", "1"], "--size: 1 B is smaller than"),
                           (["--target", "emulated:nope"], "unknown emulated device profile 'nope'")]:
        target = [] if "--target" in args else ["--target", tmp_path]
        returncode, _, stderr = _main(capsys, caplog, "run", "quick", *target, *args, "--data", data)
        assert returncode == 2, stderr
        last = stderr.strip().splitlines()[-1]  # (a line before it may say what the reaper removed)
        assert last.startswith("iolab: error:") and expected in last, stderr
        assert "Traceback" not in stderr
    assert not data.exists()


JOBFILE = """
[w]
rw=write
bs=1M
size=4M
[r]
stonewall
rw=read
bs=1M
size=4M
"""


def test_a_job_file_run_removes_the_files_fio_made(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("not iolab's")
    job = tmp_path / "mine.fio"
    job.write_text(JOBFILE)
    result = runner.run(str(job), [str(target)], data_dir=tmp_path / "data", progress=False)
    assert result.manifest["status"] == "completed", result.manifest["reason"]
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


@needs_root
def test_a_ram_backed_target_is_flagged(tmp_path):
    with mounted(tmp_path / "ram", "tmpfs", "32m") as mnt:
        result = runner.run(_recipe(tmp_path, REFUSED), [str(mnt)], data_dir=tmp_path / "data", progress=False,
                            tests=["FINE"])
    table = iolab.load(result.path)
    assert table["flags"].str.contains("ram_backed").all()


def test_early_interrupt_leaves_no_empty_raw_file_and_marks_the_test(tmp_path):
    data = tmp_path / "data"
    proc = subprocess.Popen(IOLAB + ["run", _recipe(tmp_path, TWO), "--target", str(tmp_path), "--data", str(data),
                                     "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(data.glob("*/*/raw/LONG-1.json")):
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)  # as soon as the raw file exists: fio may not have written a byte
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    run_dir = next(data.glob("*/*"))
    assert [p.name for p in (run_dir / "raw").iterdir() if p.stat().st_size == 0] == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tests = {t["name"]: t for t in manifest["tests"]}
    assert manifest["status"] == "interrupted"
    assert tests["LONG"]["status"] == "interrupted" and "Ctrl-C" in tests["LONG"]["error"]
    assert tests["SHORT"]["status"] == "pending"


def test_the_watchdog_limit_is_made_of_the_job():
    from iolab.engine.watchdog import jobfile_limit
    limit = jobfile_limit("[global]\nramp_time=2s\nsize=20m\n[a]\nruntime=1m\n[b]\nnumjobs=2\n",
                          default_size=0, floor_bps=1024**2, margin_s=5)
    # a: 2 s ramp + 60 s + 20 s layout; b: 2 s ramp + 2 x 20 s I/O + 2 x 20 s layout; one margin
    assert (limit.ramp_s, limit.io_s, limit.layout_s, limit.margin_s) == (4, 100, 60, 5)
    assert limit.seconds == 169


def _memory_cgroup_procs(pid: int) -> Path:
    """The procs file of the memory cgroup ``pid`` is in (v1 ``memory`` or v2 unified)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "cgroup.procs"
        if controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.procs"
    return unified


LAYOUT = """
name: layout
description: one read of a file that must be laid out first
isolation: cgroup
defaults: {size: 256M, runtime: 1}
fio: {ioengine: psync}
tests:
  - name: R
    rw: read
    bs: 1M
"""


@needs_root
def test_an_oom_kill_during_layout_is_named(tmp_path, monkeypatch):
    """fio laying out the test file is the OOM killer's victim in the memory-limited cgroup: the error says so.

    What decides the race is fio's job process: fio's main process forks it to write the file, and a
    SIGSTOP of the main process found after that fork does not stop it (under confinement fio is found
    later, behind two bwrap processes, and the job sometimes wrote its 256M first). ``startdelay`` keeps
    fio's main process from forking the job before the test has stopped it, however fast the disk."""
    render = fio.render_job

    def held_layout(name, options, *args, **kwargs):
        if name == "layout":  # a write job's file is created but not written before its job starts
            options = {**options, "startdelay": "600"}
        return render(name, options, *args, **kwargs)

    monkeypatch.setattr(fio, "render_job", held_layout)
    hogs, early = [], []

    def oom_fio():
        pids = _fio_of("jobs/_layout.fio")
        # fio found right after its exec is small: its score (size + the adj's bonus) lost to the hog's.
        # Its helper thread is started after the job file is read and its libraries are in; then fio
        # waits out startdelay before forking the job
        deadline = time.monotonic() + 60
        while any(len(os.listdir(f"/proc/{pid}/task")) < 2 for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in pids:  # held still, and first in line for the OOM killer
            os.kill(pid, signal.SIGSTOP)
            Path(f"/proc/{pid}/oom_score_adj").write_text("1000")
        early.extend(child for pid in pids for child in children(pid))  # fio's job: none yet
        try:
            # a process in the same cgroup holds twice its limit (tail keeps the last 64M it read; iolab's
            # cgroup allows no swap): the kernel must kill someone there, and it kills fio: oom_score_adj
            # 1000 adds limit_pages // 1000 * 1000 pages to fio's score, above the hog's own size. (Not a
            # python hog: its 8M of mapped libraries count too and put it above fio; the hog cannot lower
            # its own oom_score_adj without CAP_SYS_RESOURCE)
            hog = subprocess.Popen(["sh", "-c", "read go && head -c 128M /dev/zero | tail -c 64M >/dev/null"],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            hogs.append(hog)
            _memory_cgroup_procs(pids[0]).write_text(str(hog.pid))
            hog.stdin.write("go\n")
            hog.stdin.close()
            hog.wait(120)  # the OOM killer has been: tail cannot hold 64M in 32M, once fio is gone either
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    helper = threading.Thread(target=oom_fio)
    helper.start()
    started = time.monotonic()
    try:
        with pytest.raises(IolabError) as info:
            runner.run(_recipe(tmp_path, LAYOUT), [str(tmp_path)], data_dir=tmp_path / "data", progress=False,
                       mem_limit="32M")
    finally:
        helper.join()
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert not early, "fio's job process ran before the test stopped fio"
    assert time.monotonic() - started < 60, "fio was not the OOM killer's victim (the watchdog ended it)"
    message = str(info.value)
    assert "fio could not lay out the test file: out of memory: the OOM killer killed" in message
    assert "32 MiB" in message
    manifest = json.loads(next((tmp_path / "data").glob("*/*/manifest.json")).read_text())
    assert manifest["status"] == "failed" and "out of memory" in manifest["reason"]
