"""Files a ``.fio`` job file makes in the target directory are removed after the run.

A recipe iolab writes names its own test file (and removes it); a user's job
file lets fio name them (``<job>.<n>.<file>``), so nothing removed them and
one run left a file system 100% full. :func:`removed_after` notes what a
directory held before the run and removes, afterwards, the regular files that
appeared in it: never a file that was there before, never a directory.
"""
from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)


def _files(directory: str) -> set[str]:
    try:
        with os.scandir(directory) as entries:
            return {e.name for e in entries if e.is_file(follow_symlinks=False)}
    except OSError:
        return set()


@contextlib.contextmanager
def removed_after(directories):
    """Remove the regular files that appear in ``directories`` while the block runs (also on errors)."""
    before = {d: _files(d) for d in dict.fromkeys(directories)}
    try:
        yield
    finally:
        for directory, old in before.items():
            for name in sorted(_files(directory) - old):
                path = os.path.join(directory, name)
                try:
                    os.unlink(path)
                    log.info("removed %s (made by the job file's fio run)", path)
                except OSError as exc:
                    log.warning("could not remove %s: %s", path, exc.strerror)
