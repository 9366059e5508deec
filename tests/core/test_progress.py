"""The line per finished test that stands in for progress bars when stderr is a log."""
from __future__ import annotations

import io

from iolab.core import progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_line_per_test_says_n_of_n_the_name_elapsed_and_eta(monkeypatch):
    monkeypatch.setattr(progress, "enabled", lambda p: False if p is None else bool(p))  # stderr is a log
    clock, out = Clock(), io.StringIO()
    lines = progress.StepLines(4, None, stream=out, clock=clock)
    clock.now += 5  # a pause before the first test counts to the run, not to the test
    lines.start()
    clock.now += 20
    lines.done(1, "seq1m-q8t1")
    clock.now += 5
    lines.start()
    clock.now += 70
    lines.done(2, "rnd4k-q1t1")
    assert out.getvalue().splitlines() == [
        "iolab: test 1/4 seq1m-q8t1 done in 20 s; elapsed 25 s, ETA 1 min 15 s",
        "iolab: test 2/4 rnd4k-q1t1 done in 1 min 10 s; elapsed 1 min 40 s, ETA 1 min 40 s",
    ]


def test_no_line_on_a_terminal_or_when_progress_is_off(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "enabled", lambda p: True if p is None else bool(p))  # a terminal: bars
    progress.StepLines(1, None, stream=out).done(1, "a")
    monkeypatch.setattr(progress, "enabled", lambda p: False if p is None else bool(p))
    progress.StepLines(1, False, stream=out).done(1, "a")  # --no-progress
    progress.StepLines(1, True, stream=out).done(1, "a")  # bars asked for explicitly
    assert out.getvalue() == ""
    assert progress.log_lines(None) and not progress.log_lines(False)


def test_stop_says_whether_sigint_was_enough_and_kills_the_job_processes_with_the_parent():
    import signal
    import subprocess
    import sys

    from iolab.core import procstat
    from iolab.core.deadline import wait_until

    done = subprocess.Popen(["true"])
    done.wait()
    assert progress.stop(done) == progress.ENDED
    obeys = subprocess.Popen(["sleep", "60"])
    assert progress.stop(obeys, grace=10) == progress.BY_SIGINT and obeys.returncode == -signal.SIGINT
    # a parent that ignores SIGINT (as fio would if stuck) with a child of its own (a fio job process)
    code = ("import signal, subprocess, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "subprocess.Popen(['sleep', '60']); time.sleep(60)")  # (the child inherits the ignored SIGINT)
    parent = subprocess.Popen([sys.executable, "-c", code])
    job = wait_until(lambda: next(iter(procstat.descendants(parent.pid)), None), 20, what="the job process")
    assert progress.stop(parent, grace=0.5) == progress.BY_SIGKILL and parent.returncode == -signal.SIGKILL
    assert procstat.ended(job)
