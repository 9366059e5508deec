"""The ceiling probe's time limit (:func:`iolab.devices.ceilingprobe.collect`): a fio that outlives it is ended with
its job processes through the one ladder (:func:`iolab.core.processes.end`) and the probe gives up naming the limit.
A stand-in process tree (a parent and a child, as fio and one job process, both printing and sleeping) plays fio:
no device, no fio."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from iolab.core import procstat
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.devices import ceilingprobe

#: a parent that starts a child (which prints nothing) and both sleep far beyond the limit
HANGS = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
         "print('{\"jobs\": []}', flush=True); time.sleep(60)")


def test_a_fio_past_the_limit_is_ended_with_its_job_processes_and_the_probe_gives_up():
    proc = subprocess.Popen([sys.executable, "-c", HANGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child = wait_until(lambda: next(iter(procstat.descendants(proc.pid)), None), 20, what="the job process")
    started = time.monotonic()
    with pytest.raises(IolabError, match=r"fio did not finish within 1 s") as raised:
        ceilingprobe.collect(proc, 1.0, context="ceiling probe of emulated:test on /dev/loopX")
    assert "emulated:test" in str(raised.value)
    assert time.monotonic() - started < 15  # SIGKILL at once, no grace
    assert proc.returncode is not None and proc.stdout.closed  # reaped, its pipes read and closed
    assert procstat.ended(child)  # nothing left running


def test_a_fio_within_the_limit_gives_its_output():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('{}'); print('note', file=sys.stderr)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = ceilingprobe.collect(proc, 20.0, context="ceiling probe")
    assert (out.strip(), err.strip(), proc.returncode) == (b"{}", b"note", 0)
