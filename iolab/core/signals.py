"""SIGTERM handled like Ctrl-C: raised as an exception where the process is, so every cleanup runs."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable


@contextlib.contextmanager
def sigterm_raises(exception: Callable[[], BaseException]):
    """While the block runs, SIGTERM raises ``exception()`` (main thread only; elsewhere nothing changes).

    The engine raises its ``Terminated`` (a KeyboardInterrupt); a fleet run a
    ``KeyboardInterrupt("SIGTERM")``: fio stopped, devices, cgroups and tunnels
    released, manifests written, as for Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise exception()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
