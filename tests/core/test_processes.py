"""core.processes.end, the one SIGTERM-grace-SIGKILL ladder, on real child processes: ones that obey
SIGTERM, ones that ignore it, a whole process group with a member in a session of its own, a bare PID."""
from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time

from iolab.core import procstat, processes
from iolab.core.deadline import wait_until

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"


def ignoring_term(**kwargs) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], stdout=subprocess.PIPE, **kwargs)
    child.stdout.readline()  # its handler is in place
    return child


def ignores_term_now(pid: int) -> bool:
    """Whether ``pid`` has SIGTERM ignored already (/proc/PID/status, SigIgn)."""
    try:
        text = open(f"/proc/{pid}/status").read()
    except OSError:
        return False
    mask = next(line.split()[1] for line in text.splitlines() if line.startswith("SigIgn:"))
    return bool(int(mask, 16) & 1 << (signal.SIGTERM - 1))


def test_a_child_that_obeys_sigterm_ends_by_it_and_is_reaped():
    child = subprocess.Popen(["sleep", "60"])
    assert processes.end(child, grace=10) == ["SIGTERM"]
    assert child.returncode == -signal.SIGTERM and procstat.stat_of(child.pid) is None


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_and_the_ladder_says_so(caplog):
    child = ignoring_term()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="iolab.core.processes"):
        assert processes.end(child, grace=0.5) == ["SIGTERM", "SIGKILL"]
    assert 0.5 <= time.monotonic() - started < 10 and child.returncode == -signal.SIGKILL
    assert f"(pid {child.pid}) still runs 0.5 s after SIGTERM: SIGKILL" in caplog.text


def test_an_ended_child_takes_no_step_and_no_gentle_step_means_sigkill_at_once():
    done = subprocess.Popen(["true"])
    done.wait()
    assert processes.end(done) == []
    child = ignoring_term()
    assert processes.end(child, first=[]) == ["SIGKILL"] and child.returncode == -signal.SIGKILL


def test_named_steps_and_waiting_come_before_any_signal():
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert processes.end(cat, first=[("close stdin", cat.stdin.close), signal.SIGTERM]) == ["close stdin"]
    assert cat.returncode == 0  # it ended by itself at the end of its input, before any signal
    quick = subprocess.Popen(["sleep", "0.2"])
    assert processes.end(quick, first=None, grace=10) == [] and quick.returncode == 0


def test_a_group_ends_whole_also_a_member_in_a_session_of_its_own():
    # the leader's child starts a grandchild in a new session (as bubblewrap does): killpg misses it
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]], "
            "start_new_session=True); time.sleep(60)")
    leader = subprocess.Popen([sys.executable, "-c", code, IGNORES_TERM], start_new_session=True)
    grandchild = wait_until(lambda: next(iter(procstat.descendants(leader.pid)), None), 20, what="the grandchild")
    wait_until(lambda: ignores_term_now(grandchild), 20, what="its SIGTERM handler")
    assert procstat.stat_of(grandchild).pgrp != leader.pid
    assert processes.end(leader, grace=0.5, group=True) == ["SIGTERM", "SIGKILL"]
    assert leader.returncode == -signal.SIGTERM and procstat.ended(grandchild)
    assert not procstat.group_members(leader.pid)


def test_family_takes_the_descendants_with_the_sigkill():
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]]); time.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", code, IGNORES_TERM])
    child = wait_until(lambda: next(iter(procstat.descendants(parent.pid)), None), 20, what="the child")
    assert processes.end(parent, first=[], family=True) == ["SIGKILL"]
    assert procstat.ended(child)


def test_a_bare_pid_not_our_child_is_ended_and_awaited():
    shell = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    pid = int(shell.stdout)  # its parent (the shell) is gone: init reaps it, not us
    assert not procstat.ended(pid)
    assert processes.end(pid, grace=10) == ["SIGTERM"] and procstat.ended(pid)
    assert processes.end(pid) == []
