"""The directory a run makes in a target (``Target.run_dir``): the only place there iolab writes or removes.

For a directory target, and for the file system of an emulated device, every
file of a run -- iolab's test file, the files a user's job file makes (fio gets
the directory as ``--directory``), bonnie++'s -- lives in
``<target>/iolab-<run_id>/``, which this module makes and removes:

* **made** with an exclusive ``mkdir`` relative to a descriptor of the target
  opened with ``O_DIRECTORY|O_NOFOLLOW``, mode 0700. A name already there (a
  planted symlink, someone's directory or file) is never used, followed or
  touched: the next free name (``iolab-<run_id>-2``, ...) is taken and the
  obstacle named in a warning. The new directory is checked with an ``lstat``
  relative to the descriptor (a directory, ours, private, empty) and opened
  with ``O_NOFOLLOW``; both descriptors are held while the run lasts.
* **recorded** in the ledger (:mod:`iolab.core.ownership`; kind ``file``, undone
  here through ``undone_by``) with the device and inode numbers of the target
  and of the new directory, so that after a ``kill -9`` of its owner the next
  ``iolab run`` or ``iolab cleanup`` removes it (:func:`undo_stale`) -- and
  only if both are still the very directories recorded. (The record follows the
  ``mkdir``, as the inode number is part of it: a kill between the two leaves an
  empty directory named after the run, nothing else.)
* **removed** through descriptors only: everything in it with ``unlinkat`` and
  ``rmdir`` relative to its own descriptor, recursing with ``O_NOFOLLOW`` and
  never into another file system, then the directory itself relative to the
  target's descriptor, after checking that the name still is that directory.
  Files that were in the target before, or that others make next to the run's
  directory, are never looked at.

A target whose path no longer leads to the directory opened at the start
(replaced by a symlink or another directory during the run: ``st_dev`` or
``st_ino`` differ) is named in a warning and left alone: nothing is removed by
path. The run's own directory is still removed, through the descriptors held
since it was made: they reach the directory iolab made, wherever it is now, and
never what the path points to today (decided so that a moved target does not
keep a test file of many gigabytes nobody knows about).
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from typing import Iterator

from iolab.core import ownership
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: the ledger's kind for a run's directory (the ledger's kinds are fixed; ``undone_by`` routes it here)
KIND = "file"
PREFIX = "iolab-"
#: names tried after the first one is taken (``iolab-<run_id>-2`` ... ``-<MAX_TRIES>``)
MAX_TRIES = 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _kind_of(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "a symlink"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    return "a file" if stat.S_ISREG(st.st_mode) else "something"


def _open_dir(path: str, *, dir_fd: int | None = None) -> int:
    """A descriptor of directory ``path``; its last component is never followed if it is a symlink."""
    return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)


class WorkDir:
    """A run's directory in a target, held open from its ``mkdir`` until it is removed."""

    def __init__(self, parent: str, name: str, parent_fd: int, fd: int):
        self.parent, self.name = parent, name
        self.path = os.path.join(parent, name)
        self.parent_fd, self.fd = parent_fd, fd
        self.parent_id = _ident(os.fstat(parent_fd))
        st = os.fstat(fd)
        self.id, self.uid = _ident(st), st.st_uid

    def details(self) -> dict:
        """What the ledger keeps to find this very directory again (and nothing else)."""
        return {"parent": self.parent, "name": self.name, "parent_dev": self.parent_id[0],
                "parent_ino": self.parent_id[1], "dev": self.id[0], "ino": self.id[1], "uid": self.uid}

    def target_replaced(self) -> str | None:
        """Why the target's path no longer leads to the directory opened at the start, or None."""
        try:
            now = os.stat(self.parent, follow_symlinks=False)
        except OSError as exc:
            return f"{self.parent} is gone ({exc.strerror})"
        if _ident(now) != self.parent_id:
            return f"{self.parent} is {_kind_of(now)} other than the directory the run started in"
        return None

    def remove(self) -> bool:
        """Remove everything in the directory, then the directory; True when it is gone.

        Never raises (it runs on the way out of a run, also after errors): what
        could not be removed is logged, and its ledger record stays for the reaper.
        """
        replaced = self.target_replaced()
        if replaced:
            log.warning("the target was replaced during the run: %s; it is left alone (nothing removed by "
                        "path); the run's own directory is removed through the descriptors held since it was "
                        "made", replaced)
        try:
            count = _remove(self.parent_fd, self.name, self.fd, self.id, self.path)
        except (OSError, IolabError) as exc:
            log.warning("could not remove the run's directory %s: %s (left for `iolab cleanup`)",
                        self.path, getattr(exc, "strerror", None) or exc)
            return False
        finally:
            self.close()
        log.info("removed the run's directory %s (%d entries in it)", self.path, count)
        return True

    def close(self) -> None:
        for fd in (self.fd, self.parent_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fd = self.parent_fd = -1


def _make(parent_fd: int, parent: str, name: str) -> WorkDir:
    """``mkdir name`` in the directory ``parent_fd`` (exclusive, 0700), checked and opened."""
    os.mkdir(name, 0o700, dir_fd=parent_fd)
    st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise IolabError(f"the directory iolab just made was replaced by {_kind_of(st)} (uid {st.st_uid}, "
                         f"mode {stat.S_IMODE(st.st_mode):o}); nothing was written", context=os.path.join(parent, name))
    fd = _open_dir(name, dir_fd=parent_fd)
    try:
        if _ident(os.fstat(fd)) != _ident(st) or os.listdir(fd):
            raise IolabError("the directory iolab just made was swapped for another one; nothing was written",
                             context=os.path.join(parent, name))
        os.fchmod(fd, 0o700)
        return WorkDir(parent, name, parent_fd, fd)
    except BaseException:
        os.close(fd)
        raise


def make(parent: str, base: str) -> WorkDir:
    """Make the run's directory ``base`` (or ``base-2``, ...) in directory ``parent`` and hold it open."""
    try:
        parent_fd = _open_dir(parent)
    except OSError as exc:
        why = exc.strerror
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW|O_DIRECTORY met a symlink or a file
            with contextlib.suppress(OSError):
                why = f"it is {_kind_of(os.stat(parent, follow_symlinks=False))} now"
        raise IolabError(f"cannot open the target directory: {why}", context=parent) from None
    try:
        for n in range(1, MAX_TRIES + 1):
            name = base if n == 1 else f"{base}-{n}"
            try:
                return _make(parent_fd, parent, name)
            except FileExistsError:
                with contextlib.suppress(OSError):
                    found = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                    log.warning("%s is taken (%s; iolab uses only a directory it has just made): left alone, "
                                "trying another name", os.path.join(parent, name), _kind_of(found))
            except OSError as exc:
                raise IolabError(f"cannot make the run's directory: {exc.strerror}",
                                 context=os.path.join(parent, name)) from None
        raise IolabError(f"{MAX_TRIES} names for the run's directory are taken ({base}, {base}-2, ...)",
                         context=parent, hint="remove what is in the way (iolab never uses what it did not make)")
    except BaseException:
        os.close(parent_fd)
        raise


@contextlib.contextmanager
def work_dir(parent: str, base: str) -> Iterator[WorkDir]:
    """The run's directory in ``parent`` while the block runs, recorded in the ledger, removed afterwards."""
    made = make(parent, base)
    try:
        ownership.record(KIND, made.path, undo=f"remove {made.path} and everything in it (through its descriptor)",
                         undone_by=__name__, **made.details())
        log.info("made the run's directory %s", made.path)
        yield made
    finally:
        if made.remove():
            ownership.forget(KIND, made.path)


def _empty(top_fd: int, dev: int, where: str) -> int:
    """Remove everything in the directory open as ``top_fd``, never following a symlink nor leaving
    file system ``dev``; returns how many entries went."""
    count = 0
    # (descriptor, names still to look at, its name in the parent, the parent's descriptor)
    pending: list[tuple[int, list[str], str | None, int | None]] = [(top_fd, os.listdir(top_fd), None, None)]
    try:
        while pending:
            fd, names, own_name, parent_fd = pending[-1]
            if not names:
                pending.pop()
                if parent_fd is not None:
                    os.close(fd)
                    os.rmdir(own_name, dir_fd=parent_fd)
                    count += 1
                continue
            name = names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)
                    count += 1
                    continue
            except FileNotFoundError:
                continue
            if st.st_dev != dev:
                raise IolabError("another file system is mounted in the run's directory: left alone",
                                 context=os.path.join(where, name))
            child = _open_dir(name, dir_fd=fd)
            pending.append((child, os.listdir(child), name, fd))
    finally:
        for fd, _, _, parent_fd in pending:
            if parent_fd is not None:
                os.close(fd)
    return count


def _remove(parent_fd: int, name: str, fd: int, ident: tuple[int, int], path: str) -> int:
    """Empty the directory open as ``fd`` and remove it by ``name`` in ``parent_fd`` if the name still
    is that directory; returns the number of entries removed from it."""
    count = _empty(fd, ident[0], path)
    if os.fstat(fd).st_nlink == 0:
        return count  # someone removed it already (with the target, say): nothing has its name
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is None or _ident(st) != ident:
        raise IolabError("the run's directory was renamed or replaced during the run (emptied through its "
                         "descriptor; the name's present holder is left alone)", context=path)
    os.rmdir(name, dir_fd=parent_fd)
    return count


def undo_stale(path: str, details: dict, *, dry_run: bool) -> str | None:
    """Remove the run's directory ``path`` of an iolab process that is gone (the reaper, through the
    record's ``undone_by``), if the target and the directory still are the ones recorded."""
    try:
        parent, name = str(details["parent"]), str(details["name"])
        parent_id = (int(details["parent_dev"]), int(details["parent_ino"]))
        ident, uid = (int(details["dev"]), int(details["ino"])), int(details["uid"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IolabError(f"the record of the run's directory is incomplete ({exc})", context=path) from None
    if os.sep in name or name in ("", ".", ".."):
        raise IolabError(f"the record names {name!r}, not a directory name", context=path)
    try:
        parent_fd = _open_dir(parent)
    except OSError as exc:
        log.info("%s: its target %s cannot be opened as a directory (%s): nothing to remove",
                 path, parent, exc.strerror)
        return None
    try:
        if _ident(os.fstat(parent_fd)) != parent_id:
            log.warning("%s is not the directory the run made %s in any more: left alone", parent, name)
            return None
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if _ident(st) != ident or st.st_uid != uid or not stat.S_ISDIR(st.st_mode):
            log.warning("%s is %s iolab did not make for that run now: left alone", path, _kind_of(st))
            return None
        fd = _open_dir(name, dir_fd=parent_fd)
        try:
            if _ident(os.fstat(fd)) != ident:
                log.warning("%s was swapped while being opened: left alone", path)
                return None
            if dry_run:
                return f"would remove run directory {path} ({len(os.listdir(fd))} entries at its top)"
            count = _remove(parent_fd, name, fd, ident, path)
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)
    return f"removed run directory {path} ({count} entries in it)"
