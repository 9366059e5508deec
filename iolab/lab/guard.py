"""The lab VM's cleanup on every way out: a guard process that outlives iolab, and signals held during cleanup.

iolab removes the VM's work directory (~10 GB of sparse disk images) and kills the VM's process group
itself on a normal exit, an error, Ctrl-C and SIGTERM. Two ways out skip that cleanup:

* iolab killed outright: a Python parent (the lab tier's ``subprocess.run``, any wrapper) answers Ctrl-C
  by SIGKILLing its child 0.25 s later, and the tier does so on its own timeout. The VM runs in its own
  session (no terminal signal reaches it), so it went on running and its disks stayed. :class:`Guard` is
  a small ``sh`` in its own session that ignores the terminal's signals and reads a pipe only iolab
  holds: when the pipe closes without iolab saying "done" (iolab is gone, however), it kills the VM's
  process group (SIGTERM, SIGKILL after 5 s) and removes the work directory.
* a second Ctrl-C while iolab is killing the VM or removing its files: :func:`held_signals` keeps
  SIGINT and SIGTERM waiting until that is done, then raises :class:`KeyboardInterrupt`.
"""
from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
from pathlib import Path

from iolab.core import processes

log = logging.getLogger(__name__)

#: The guard: lines on stdin are the VM's process group id, or "done" (iolab cleaned up: do nothing).
#: POSIX sh (dash's kill takes no "--": "-PGID" is the group).
GUARD_SCRIPT = r"""
trap '' INT TERM HUP QUIT
pgid=
while IFS= read -r line; do
  case $line in
    done) exit 0 ;;
    ''|*[!0-9]*) ;;
    *) pgid=$line ;;
  esac
done
if [ -n "$pgid" ] && kill -TERM "-$pgid" 2>/dev/null; then
  i=0
  while kill -0 "-$pgid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "-$pgid" 2>/dev/null
fi
rm -rf -- "$1"
"""

_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until the block is done, then raise KeyboardInterrupt (main thread only).

    For cleanup a second Ctrl-C must not cut short, and for starting a process that must not be left
    without a handle (an interrupt between fork and the assignment).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    if caught:
        log.info("lab: %s held until cleanup was done", signal.Signals(caught[0]).name)
        raise KeyboardInterrupt(signal.Signals(caught[0]).name)


class Guard:
    """Removes ``workdir`` and kills the watched process group if iolab ends without :meth:`release`."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.process = subprocess.Popen(["sh", "-c", GUARD_SCRIPT, "iolab-lab-guard", str(workdir)],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, cwd="/", start_new_session=True)

    def _send(self, line: str) -> None:
        try:
            self.process.stdin.write(f"{line}\n".encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # the guard is gone: nothing to tell it
            log.warning("lab: the VM's guard process (pid %s) is gone", self.process.pid)

    def watch(self, pgid: int) -> None:
        """The VM's process group, to kill if iolab is killed."""
        self._send(str(pgid))

    def release(self) -> None:
        """iolab cleaned up itself: the guard ends without touching anything."""
        def done() -> None:
            self._send("done")
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.process.stdin.close()
        processes.end(self.process, grace=10, first=("done", done))
