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
