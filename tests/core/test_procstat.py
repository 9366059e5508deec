"""core.procstat, the one reader of /proc/PID/stat, on real processes (a name with ')' and spaces, a zombie)."""
import os
import signal
import subprocess
import sys
import time

from iolab.core import owner, procstat

NAME = "a) b (c"  # what a naive split at the first ')' gets wrong


def _child_named(name: str) -> subprocess.Popen:
    code = f"open('/proc/self/comm', 'w').write({name!r}); print(flush=True); import time; time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    child.stdout.readline()  # renamed
    return child


def test_a_process_named_with_parentheses_and_spaces_reads_right_until_it_is_reaped():
    child = _child_named(NAME)
    try:
        found = procstat.stat_of(child.pid)
        assert found is not None and found.comm == NAME and found.ppid == os.getpid()
        assert found.state in ("S", "R") and not procstat.ended(child.pid)
        assert procstat.argv_of(child.pid)[:2] == [sys.executable, "-c"]  # the command line, not the new name
        assert found.start == owner.start_ticks(child.pid) > procstat.stat_of(os.getpid()).start - 1
        assert child.pid in procstat.descendants(os.getpid())
        assert any(p.pid == child.pid and p.comm == NAME for p in procstat.processes())
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while procstat.state_of(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procstat.state_of(child.pid) == "Z" and procstat.ended(child.pid)  # a zombie has ended
    finally:
        child.kill()
        child.wait()
    assert procstat.stat_of(child.pid) is None and procstat.ended(child.pid) and owner.start_ticks(child.pid) is None


def test_no_such_process_and_a_name_that_is_no_pid():
    assert procstat.stat_of("self-ish") is None and procstat.state_of(2**22 + 1) is None
    assert procstat.argv_of(2**22 + 1) is None and procstat.argv_of("self-ish") is None
