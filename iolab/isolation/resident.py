"""Keep a program's executable and shared libraries in the page cache across cache drops.

Every test starts with ``drop_caches``, and that drops fio's own files too: the
next ``fio`` re-reads its binary and its 60-odd shared libraries (ceph, gluster,
rdma: ~80 MB on disk) before it measures anything. On a fast local root that is
a fraction of a second; in the lab VM (root over 9p, CPU emulated by TCG) it was
~8 s of every test (``fio --version`` 10.6 s right after a drop, 2.2 s warm).

The kernel never drops a page that a live process maps. :func:`kept_resident`
starts the program in a mode where it loads everything and then waits on its
stdin (``fio --parse-only -``: a job file from stdin), holds it there while the
run lasts and ends it by closing that pipe (the pipe also closes when iolab
dies, so the keeper cannot outlive it). Nothing of the test files or the target
is held: only the program's own mapped files, which the measurement never reads.
"""
from __future__ import annotations

import contextlib
import logging
import subprocess

from iolab.core import processes

log = logging.getLogger(__name__)

#: the modes a keeper runs in: O_DIRECT runs, whose evidence (device bytes) never counts fio's own
#: files. Not ``cgroup``: a memory cgroup charges a page to the group that first reads it, so fio's
#: libraries would leave the measured peak; not ``hugepages``: the memory left beside the
#: reservation is the condition measured there; ``none`` drops nothing
KEEP_IN = ("direct",)
STOP_WAIT_S = 10.0


@contextlib.contextmanager
def kept_resident(argv: list[str], *, mode: str):
    """Run ``argv`` (a program that waits on stdin) for the duration of the block in ``mode``.

    Yields the keeper's :class:`subprocess.Popen`, or None when ``mode`` is not
    in :data:`KEEP_IN` or the program cannot start (then fio is only slower).
    """
    if mode not in KEEP_IN:
        yield None
        return
    try:
        keeper = subprocess.Popen([str(a) for a in argv], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        log.info("cannot keep %s resident across cache drops: %s", argv[0], exc.strerror)
        yield None
        return
    log.debug("keeping %s resident across cache drops (pid %d)", argv[0], keeper.pid)
    try:
        yield keeper
    finally:  # the end of its job file: it exits by itself
        processes.end(keeper, first=("close stdin", keeper.stdin.close), grace=STOP_WAIT_S)
