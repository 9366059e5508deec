"""The one job reader (issue 27, item 2): job files are read the way fio reads them, from fio.

Each reproducer of the issue is checked twice: the real fio runs the job in a
scratch directory and the files it created or changed are compared with what
the gate lists as written (the model must hold everything fio wrote), and the
gate's reading is checked directly. The CLI tests put an ext4-signed loop
device that is *not* a target where the job points, and check its head is
untouched and the run refused.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from cli_helpers import iolab_cli, needs_fio, needs_root
from device_fixtures import make_loop, mounted_image, requires, scratch, sh  # noqa: F401  (fixtures)
from iolab.core.errors import IolabError
from iolab.engine import watchdog
from iolab.engine.jobfile import access as jobaccess
from iolab.engine.jobfile import check as jobcheck
from iolab.engine.jobfile import gate as jobgate
from iolab.engine.jobfile import reader as jobreader
from iolab.fleet import gate as fleetgate

pytestmark = [needs_fio]

UP = "../" * 12  # the U: climbs out of any target directory


def snapshot(root: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


def fio_wrote(root: Path, text: str) -> set:
    """The files real fio creates or changes under ``root`` running job ``text`` there (its cwd)."""
    job = root.parent / f"{root.name}.fio"
    job.write_text(text)
    before = snapshot(root)
    proc = subprocess.run(["fio", "--output-format=terse", str(job)], cwd=root, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    after = snapshot(root)
    return {path for path, digest in after.items() if before.get(path) != digest}


def gate_writes(root: Path, text: str, monkeypatch) -> set:
    monkeypatch.chdir(root)  # fio's working directory: relative names resolve there
    return {a.path for a in jobgate.accesses(text, "t.fio") if a.destructive}


def precious(root: Path, *names: str, size: int = 65536) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))


# --------------------------------------------------- fio's writes are the gate's writes

CASES = {
    # J1: the global's file is added to the job's own (fio's dup_files)
    "J1-global-file-added": ("[global]\nrw=write\nsize=64k\nfilename=g.dat\n[job]\nfilename=ok1.dat\n", ["g.dat"]),
    # J2: every filename= line adds files
    "J2-two-filename-lines": ("[job]\nrw=write\nsize=64k\nfilename=a.dat\nfilename=b.dat\n", ["a.dat"]),
    # J4: a line starting with '[' starts a section, ']' or not (fio drops the last character: [job2 -> job)
    "J4-section-without-bracket": ("[r]\nrw=read\nsize=64k\nfilename=r.dat\n[job2\nrw=write\nsize=64k\n", []),
    # J5: only \n ends a line; ';' cuts it wherever it is (\r and \f are not line breaks)
    "J5-semicolon-cr": ("[job]\nrw=write\nsize=64k\nfilename=victim.dat ;\rfilename=ok5.dat\n", ["victim.dat"]),
    "J5-semicolon-ff": ("[job]\nrw=write\nsize=64k\nfilename=victim.dat ;\ffilename=ok5.dat\n", ["victim.dat"]),
    # J14: the gate must see the write that ';\r' hides from a line-by-line reader
    "J14-rw-write-cr-read": ("[job]\nfilename=t.dat\nsize=64k\nrw=write ;\rrw=read\n", ["t.dat"]),
    "globalX-is-global": ("[globalX]\nrw=write\nsize=64k\n[j]\nfilename=x.dat\n", ["x.dat"]),
    "ncpus-in-a-name": ("[j]\nrw=write\nsize=64k\nfilename=disk$ncpus.img\n", [f"disk{os.cpu_count()}.img"]),
    "jobname-cut-at-semicolon": ("[keep.dat] ;]\nrw=write\nsize=64k\nfilename_format=$jobname\n", ["keep.dat"]),
    "opendir-writes-every-file": ("[j]\nrw=write\nsize=64k\nopendir=sub\n", ["sub/a", "sub/deep/b"]),
    "spaces-around-filename-parts": ("[j]\nrw=write\nsize=64k\nfilename= a.dat :  b.dat \nwrite_bw_log= bw\n",
                                     ["a.dat "]),
    # found by comparing random job files with fio: offset reads past a file's end,
    # fio's log numbering across jobs, '-' under a directory is a file
    "offset-past-the-end": ("[r]\nrw=read\nsize=16k\noffset=4k\nfilename=p.dat\n", []),
    "second-jobs-log": ("[a]\nrw=read\nsize=16k\n[b]\nrw=write\nsize=16k\nwrite_bw_log=bw\n", []),
    "dash-under-a-directory": ("[j]\nrw=write\nsize=16k\ndirectory=d\nfilename=-\n", []),
    "read-job-rewrites-a-short-file": ("[r]\nrw=read\nsize=64k\nfilename=short.dat\n", []),
    "J9b-read-iolog-replays-writes": ("[r]\nrw=read\nfilename=mine.dat\nsize=64k\nread_iolog=trace.log\n",
                                      ["other.dat"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_fio_writes_the_gate_lists_as_written(tmp_path, monkeypatch, case):
    text, existing = CASES[case]
    root = tmp_path / "t"
    root.mkdir()
    precious(root, *existing)
    if case == "offset-past-the-end":
        precious(root, "p.dat", size=8192)
    if case.startswith("dash"):
        (root / "d").mkdir()
    if case.startswith("J4"):
        precious(root, "r.dat")  # read, whole: only the second section's job.0.0 is written
    if case.startswith("read-job"):
        (root / "short.dat").write_bytes(b"hello")
    if case.startswith("J9b"):
        (root / "trace.log").write_text("fio version 2 iolog\nother.dat add\nother.dat open\n"
                                        "other.dat write 0 4096\nother.dat close\n")
    listed = gate_writes(root, text, monkeypatch)
    wrote = fio_wrote(root, text)
    assert wrote, "fio wrote nothing: the case does not reproduce"
    assert wrote <= listed, f"fio wrote {sorted(wrote - listed)} that the gate did not list"
    for name in existing:  # each precious file was written: the gate lists it, the CLI needs --confirm
        assert str(root / name) in wrote and str(root / name) in listed


def test_dollar_variables_are_fios_own_expansion(monkeypatch):
    monkeypatch.setenv("IOLAB_TEST_DIR", "/srv/from-env")
    job, = jobaccess.jobs("[j]\nfilename=${IOLAB_TEST_DIR}/x\nfilename=disk$ncpus.img\nsize=$mb_memory\n"
                          "bs=$pagesize\n", "t.fio")
    assert [name for _, name, _ in job.files] == ["/srv/from-env/x", f"disk{os.cpu_count()}.img"]
    assert job.options["bs"] == str(os.sysconf("SC_PAGE_SIZE"))
    assert int(job.options["size"]) > 0


# -------------------------------------------------------------- the reader itself

def test_sections_and_values_come_from_fio():
    sections = jobreader.sections("[global]\nrw=write ;\rrw=read\n[a]\nreadwrite=read\n[b\n"
                                  "description=two words\n[globalX]\nbs=8k\n", "t.fio")
    assert [(s.name, s.is_global) for s in sections] == [("global", True), ("a", False), ("", False),
                                                         ("globalX", True)]
    assert [(o.name, o.value, o.line) for o in sections[0].options] == [("rw", "write", 2)]
    assert [(o.name, o.value) for o in sections[1].options] == [("rw", "read")]  # fio's canonical name
    assert [(o.name, o.value) for o in sections[2].options] == [("description", "two words")]
    assert [(o.name, o.value) for o in sections[3].options] == [("bs", "8k")]  # only its own, not earlier globals


def test_a_later_global_section_holds_only_its_own_options():
    jobs = jobaccess.jobs("[global]\nrw=write\n[a]\nsize=1m\n[global]\nbs=8k\n[b]\nsize=2m\n", "t.fio")
    assert [(j.name, j.options.get("rw"), j.options.get("bs")) for j in jobs] == [("a", "write", None),
                                                                                 ("b", "write", "8k")]


@pytest.mark.parametrize("text, words", [
    ("[j]\nfilename=a --rw=write\n", "[j] line 2"),
    ("[j]\ndescription=see --help\n", "description contains ' --'"),
])
def test_an_ambiguous_view_is_refused_naming_file_job_and_line(text, words):
    with pytest.raises(IolabError) as refused:
        jobreader.sections(text, "amb.fio")
    assert str(refused.value).startswith("amb.fio: ") and words in str(refused.value)
    assert "cannot tell how fio reads this" in str(refused.value)


@pytest.mark.parametrize("line", ["include /etc/fio/evil.inc", "includeX/tmp/evil.inc", "  include=x.inc"])
def test_every_kind_of_include_line_is_refused(line):
    """J6: fio includes any line that starts with "include" (after blanks), '=' or not."""
    with pytest.raises(IolabError, match="includes a file"):
        jobgate.accesses(f"[a]\nrw=read\n{line}\n", "t.fio")
    assert [p.category for p in jobcheck.problems(f"[a]\n{line}\n", "t.fio")] == ["include"]


@pytest.mark.parametrize("data, words", [(b"[j]\nfilename=a\0b\n", "line 2 holds a null byte"),
                                         (b"[j]\nfilename=\xff\n", "line 2 is not UTF-8")])
def test_undecodable_input_is_one_line_error(data, words):
    for read in (lambda: jobreader.sections(data, "bad.fio"), lambda: jobcheck.check_text(data, "bad.fio")):
        with pytest.raises(IolabError) as refused:
            read()
        assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_null_byte_in_a_job_file_is_exit_2_not_a_traceback(tmp_path):
    (tmp_path / "dir").mkdir()
    job = tmp_path / "nul.fio"
    job.write_bytes(b"[w]\nrw=write\nsize=1m\nfilename=a\0b\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--dry-run")
    assert proc.returncode == 2 and "null byte" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_fio_refusing_the_file_is_the_gates_refusal():
    with pytest.raises(IolabError, match="fio refuses this job file: .*rw=bogus"):
        jobgate.accesses("[j]\nrw=bogus\n", "t.fio")


def test_an_iolog_the_gate_cannot_read_is_refused(tmp_path):
    (tmp_path / "bin.log").write_bytes(b"\x65\x61\x74\x07" + os.urandom(60))  # not a text iolog
    for log in ("missing.log", "bin.log"):
        with pytest.raises(IolabError, match=r"\[r\] read_iolog"):
            jobgate.accesses(f"[r]\nrw=read\nsize=1m\nread_iolog={tmp_path / log}\n", "t.fio", target=str(tmp_path))
    found = jobgate.accesses(f"[r]\nrw=read\nread_iolog={tmp_path / 'bin.log'}\nreplay_redirect=/dev/null\n",
                             "t.fio", target=str(tmp_path))
    assert [a.path for a in found if a.option == "replay_redirect"] == [f"{tmp_path}/dev/null"]


def test_the_watchdog_reads_the_job_as_fio_does():
    """numjobs=$ncpus and a ';\\r'-hidden runtime: the limit is fio's, not a line splitter's."""
    limit = watchdog.jobfile_limit("[j]\nsize=10m\nnumjobs=$ncpus\nruntime=5 ;\rruntime=500\n",
                                   default_size=0, floor_bps=10e6, margin_s=0)
    assert limit.io_s == 5 and limit.layout_s == pytest.approx(os.cpu_count() * 10 * 1024**2 / 10e6)


def test_the_fleet_gate_sees_the_global_file_added_to_a_job(tmp_path):
    """J1 through --hosts: the global's file is opened on the server besides the job's own."""
    root = tmp_path / "t"
    text = f"[global]\ndirectory={root}\nrw=write\nsize=2m\nfilename={UP}dev/loop0\n[job]\nfilename=ok1.dat\n"
    refused = fleetgate.refusals(text, "jobs/j1.fio", root=str(root))
    assert any(r.job == "job" and r.option == "filename" and "'..'" in r.reason for r in refused), refused
    text = f"[global]\nrw=write\nsize=2m\nfilename=/dev/loop0\n[job]\ndirectory={root}\nfilename=ok1.dat\n"
    refused = fleetgate.refusals(text, "jobs/j1.fio", root=str(root))
    assert any(r.job == "job" and "/dev/loop0" in r.reason for r in refused), refused
    text = f"[r]\ndirectory={root}\nrw=read\nsize=1m\nread_iolog={root}/trace.log\n"
    assert any("read by the fio server" in r.reason for r in fleetgate.refusals(text, "j.fio", root=str(root)))


def test_jobcheck_splits_lines_as_fio_does():
    """'rw=read ;\\rexec_prerun=...' is one line to fio, cut at ';': no hook; '\\r' alone is no line break."""
    assert jobcheck.problems("[a]\nrw=read ;\rexec_prerun=/bin/true\n", "t.fio") == []
    found = jobcheck.problems("[a\nexec_prerun=/bin/true\n", "t.fio")
    assert [(p.section, p.category) for p in found] == [("", "exec")]


# ------------------------------------------- the reproducers on a real, signed device

def signed_victim(make_loop) -> tuple[str, str]:
    victim = make_loop("64M")
    sh("mkfs.ext4", "-q", victim)
    return victim, head_digest(victim)


def head_digest(path, size=4 << 20) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


DEVICE_JOBS = {
    "J1": "[global]\nrw=write\nsize=2m\nfilename={U}{dev}\n[job]\nfilename=ok1.dat\n",
    "J2": "[job]\nrw=write\nsize=2m\nfilename=ok2.dat\nfilename={U}{dev}\n",
    "J4": "[job]\nrw=read\nsize=2m\nfilename=ok4.dat\n[job2\nrw=write\nfilename={U}{dev}\n",
    "J5": "[job]\nrw=write\nsize=2m\nfilename={U}{dev} ;\rfilename=ok5.dat\n",
    "J5f": "[job]\nrw=write\nsize=2m\nfilename={U}{dev} ;\ffilename=ok5.dat\n",
    "globalX": "[globalX]\nfilename={U}{dev}\n[job]\nrw=write\nsize=2m\n",
    "J9b": "[r]\nrw=read\nsize=2m\nread_iolog={log}\n",
}


@needs_root
@requires("mkfs.ext4")
@pytest.mark.parametrize("case", list(DEVICE_JOBS))
def test_a_job_file_cannot_write_a_device_nobody_named(make_loop, tmp_path, case):
    victim, before = signed_victim(make_loop)
    target = tmp_path / "target"
    target.mkdir()
    log = tmp_path / "trace.log"
    name = UP + victim.lstrip("/")  # fio puts --directory before an iolog's names too
    log.write_text(f"fio version 2 iolog\n{name} add\n{name} open\n{name} write 0 1048576\n{name} close\n")
    job = tmp_path / f"{case}.fio"
    job.write_text(DEVICE_JOBS[case].format(U=UP, dev=victim.lstrip("/"), log=log))
    proc = iolab_cli("run", job, "--target", target, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing" in proc.stderr and victim in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert head_digest(victim) == before
    assert "ext4" in sh("wipefs", "--no-act", victim).stdout
    assert not (tmp_path / "data").exists()


@needs_root
@requires("mkfs.ext4")
def test_a_write_hidden_behind_semicolon_cr_on_a_signed_target_needs_confirm(make_loop, tmp_path):
    """J14: the job reads as rw=read line by line, fio writes: the signed target needs --confirm."""
    victim, before = signed_victim(make_loop)
    job = tmp_path / "j14.fio"
    job.write_text(f"[job]\nfilename={victim}\nsize=2m\nrw=write ;\rrw=read\n")
    proc = iolab_cli("run", job, "--target", victim, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2 and "ext4" in proc.stderr and f"--confirm {victim}" in proc.stderr, proc.stderr
    assert "rw=write" in proc.stderr
    assert head_digest(victim) == before


INSIDE_JOBS = {  # precious files inside the target that fio would overwrite: each needs --confirm
    # (relative names land in the run's own directory, the --directory iolab gives fio: these jobs set
    # directory= to the target itself to reach its files. opendir is not here: under a --directory fio puts
    # that directory before every file the walk finds, so it writes new files; the scratch-directory case
    # above checks opendir without one)
    "globalX": ("[globalX]\nrw=write\nsize=1m\n[j]\ndirectory={target}\nfilename=keep.dat\n", "keep.dat"),
    "ncpus": ("[j]\nrw=write\nsize=1m\ndirectory={target}\nfilename=disk$ncpus.img\n", f"disk{os.cpu_count()}.img"),
    "short-file-read": ("[r]\nrw=read\nsize=1m\ndirectory={target}\nfilename=keep.dat\n", "keep.dat"),
    "jobname-format": ("[keep.dat] ;]\nrw=write\nsize=1m\ndirectory={target}\nfilename_format=$jobname\n",
                       "keep.dat"),
}


@pytest.mark.parametrize("case", list(INSIDE_JOBS))
def test_a_job_cannot_overwrite_a_file_inside_the_target_unasked(tmp_path, case):
    text, name = INSIDE_JOBS[case]
    target = tmp_path / "target"
    keep = target / name
    keep.parent.mkdir(parents=True)
    keep.write_bytes(os.urandom(4096 if case == "short-file-read" else 2 << 20))
    before = keep.read_bytes()
    job = tmp_path / f"{case}.fio"
    job.write_text(text.format(target=target))
    proc = iolab_cli("run", job, "--target", target, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"refusing [" in proc.stderr and str(keep) in proc.stderr and f"--confirm {keep}" in proc.stderr
    assert keep.read_bytes() == before and not (tmp_path / "data").exists()


def test_a_relative_name_lands_in_the_runs_own_directory_not_on_a_file_in_the_target(tmp_path):
    """fio gets --directory=<target>/iolab-<run_id>: filename=keep.dat is a new file there, which the gate
    says and lets run; the target's keep.dat is never reached."""
    target = tmp_path / "target"
    target.mkdir()
    keep = target / "keep.dat"
    keep.write_bytes(os.urandom(2 << 20))
    before = keep.read_bytes()
    job = tmp_path / "relative.fio"
    job.write_text("[j]\nrw=write\nsize=1m\nfilename=keep.dat\n")
    proc = iolab_cli("run", job, "--target", target, "--no-progress", "--data", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert keep.read_bytes() == before and sorted(p.name for p in target.iterdir()) == ["keep.dat"]


@needs_root
@requires("mkfs.ext4")
def test_ncpus_cannot_reach_the_backing_file_of_a_mounted_loop(scratch, tmp_path):
    """Inside the target, filename=disk$ncpus.img named a mounted loop device's backing file."""
    target = scratch / "target"
    target.mkdir()
    image = target / f"disk{os.cpu_count()}.img"
    with mounted_image(image, scratch / "mnt") as loop:
        before = head_digest(image)
        job = tmp_path / "ncpus.fio"
        job.write_text(f"[j]\nrw=write\nsize=2m\ndirectory={target}\nfilename=disk$ncpus.img\n")
        proc = iolab_cli("run", job, "--target", target, "--confirm", image, "--no-progress",
                         "--data", tmp_path / "data")
        assert proc.returncode == 2 and f"it backs {loop}" in proc.stderr and "mounted at" in proc.stderr, proc.stderr
        assert head_digest(image) == before


@requires("gcc")
@pytest.mark.parametrize("engine", ["external:{so}", "{so}", "${{IOLAB_TEST_ENGINE}}"])
def test_reading_a_job_never_loads_an_engine_nobody_allowed(tmp_path, monkeypatch, engine):
    """fio loads an external ioengine while it parses a job with an engine option (its constructor runs as
    root): the reader refuses such a job before fio sees it, unless --allow-exec."""
    marker = tmp_path / "loaded"
    source = tmp_path / "evil.c"
    source.write_text('#include <stdio.h>\n__attribute__((constructor)) static void boom(void) '
                      f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    so = tmp_path / "evil.so"
    sh("gcc", "-shared", "-fPIC", "-o", so, source)
    monkeypatch.setenv("IOLAB_TEST_ENGINE", f"external:{so}")
    (tmp_path / "dir").mkdir()
    job = tmp_path / "engine.fio"
    job.write_text(f"[j]\nrw=read\nsize=1m\nioengine={engine.format(so=so)}\nfoo=1\n")
    proc = iolab_cli("run", job, "--target", tmp_path / "dir", "--dry-run",
                     env={**os.environ, "IOLAB_TEST_ENGINE": f"external:{so}"})
    assert proc.returncode == 2 and "external ioengine" in proc.stderr and "--allow-exec" in proc.stderr, proc.stderr
    with pytest.raises(IolabError, match="external ioengine"):
        fleetgate.refusals(job.read_text(), "jobs/e.fio", root=str(tmp_path / "dir"))
    assert not marker.exists()
