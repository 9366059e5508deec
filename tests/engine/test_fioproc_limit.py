"""The watchdog's limit passing at the moment fio ends by itself (iolab.engine.fio.process).

Seen in the lab VM on a loaded host: a test's fio finished on its own just as
its watchdog limit passed, and the test was failed as
"watchdog: fio still ran after 33 s (...); stopped with None" although nothing
was stopped and fio's numbers were whole. The race is made deterministic here:
the wait returns "limit passed" only once the real fio has exited.
"""
import json
import signal

import pytest

from iolab.core import progress
from iolab.engine import fio, watchdog
from iolab.engine.fio import process as fioproc

from cli_helpers import needs_fio

pytestmark = needs_fio


def _job(tmp_path):
    job = tmp_path / "short.fio"
    job.write_text(f"[short]\nfilename={tmp_path / 'short.dat'}\nrw=write\nbs=64k\nsize=1M\nioengine=psync\n")
    return job


def test_fio_that_ended_as_the_limit_passed_is_a_result_not_a_stop(tmp_path, monkeypatch):
    real_wait, calls = progress.wait, []

    def wait_then_limit(proc, *args, **kwargs):  # the limit is seen only after fio has ended
        proc.wait()
        calls.append(proc.returncode)
        return progress.LIMIT

    monkeypatch.setattr(progress, "wait", wait_then_limit)
    raw = tmp_path / "raw" / "short-1.json"
    done = fioproc.run(fio.command(_job(tmp_path)), raw, popen=fio.subprocess.Popen, label="short",
                       expected=None, limit=watchdog.Limit(0.0, 1.0, 0.0, 1.0), show_progress=False, grace=5)
    assert calls == [0] and real_wait is not progress.wait
    assert done.stopped is None, done.stopped
    assert done.returncode == 0
    assert json.loads(raw.read_text())["jobs"][0]["write"]["io_bytes"] == 1024**2


def test_fio_still_running_at_the_limit_is_stopped_and_says_how(tmp_path, monkeypatch):
    job = _job(tmp_path)
    job.write_text(job.read_text().replace("size=1M", "size=1M\ntime_based=1\nruntime=60"))
    monkeypatch.setattr(progress, "wait", lambda proc, *a, **k: progress.LIMIT)  # at once: fio is still running
    raw = tmp_path / "raw" / "long-1.json"
    done = fioproc.run(fio.command(job), raw, popen=fio.subprocess.Popen, label="long", expected=None,
                       limit=watchdog.Limit(0.0, 1.0, 0.0, 1.0), show_progress=False, grace=30)
    assert done.stopped.startswith("watchdog: fio still ran after 2 s") and done.stopped.endswith("stopped with SIGINT")
    assert done.elapsed < 60


def test_the_watchdog_stops_fio_even_when_iolab_was_started_with_sigint_ignored(tmp_path, monkeypatch):
    """``iolab run ... &`` from a script starts iolab with SIGINT ignored; fio inherited that and
    ignored the watchdog's SIGINT until SIGKILL (no JSON). fio must start with SIGINT at its default."""
    job = _job(tmp_path)
    job.write_text(job.read_text().replace("size=1M", "size=1M\ntime_based=1\nruntime=60"))
    monkeypatch.setattr(progress, "wait", lambda proc, *a, **k: progress.LIMIT)
    raw = tmp_path / "raw" / "long-1.json"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = fioproc.run(fio.command(job), raw, popen=fio.subprocess.Popen, label="long", expected=None,
                           limit=watchdog.Limit(0.0, 1.0, 0.0, 1.0), show_progress=False, grace=30)
    finally:
        signal.signal(signal.SIGINT, before)
    assert done.stopped.endswith("stopped with SIGINT"), done.stopped
    assert done.elapsed < 30
