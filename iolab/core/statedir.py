"""The one place iolab keeps state between processes: marks, locks and ledger entries.

Root's is ``/run/iolab`` (mode 0700, owner root): no other user can plant an entry, a symlink
or a lock there. A user who is not root gets a private place of their own,
``$XDG_RUNTIME_DIR/iolab`` or else ``~/.cache/iolab/run`` (mode 0700, theirs), holding only
what a run without root needs. Nothing lives in ``/run/lock`` or ``/tmp``, where anyone may
create names.

Every directory is checked when it is opened, on the descriptor that was opened (not by name):
it must be a directory (``O_NOFOLLOW``: a symlink is refused), owned by the user iolab runs as,
with no access for group or others; and every directory above it must be owned by root or that
user and writable by nobody else (or sticky, as ``/tmp`` is), so nobody can swap it for another
one. A directory that fails is refused with :class:`IolabError` naming what is wrong: iolab does
not repair a place someone else may have prepared.

Entries are reached relative to the directory's descriptor (``dir_fd``) and never through a
link: :func:`write_new` creates a file exclusively (``O_EXCL``), :func:`replace` writes a new
file exclusively and renames it over the old name (readers see the old or the new content,
never half), :func:`read` opens with ``O_NOFOLLOW`` and accepts only a small regular file,
:func:`lock` opens (or creates) a lock file the same way.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import time
from pathlib import Path

from iolab.core.errors import IolabError

ROOT_DIR = "/run/iolab"
#: the largest entry :func:`read` accepts (ledger records are a few hundred bytes)
MAX_ENTRY_BYTES = 64 * 1024
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def base() -> Path:
    """Where this user's iolab state lives (not created; see :func:`open_dir`)."""
    if os.geteuid() == 0:
        return Path(ROOT_DIR)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return Path(runtime) / "iolab"
    home = os.environ.get("HOME") or os.path.expanduser("~")
    if not os.path.isabs(home):
        raise IolabError("no private place for iolab's state: neither XDG_RUNTIME_DIR nor HOME is set",
                         context="state directory")
    return Path(home) / ".cache" / "iolab" / "run"


def _why_unsafe_ancestor(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to uid {st.st_uid}, who could replace what lies below it"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}) and not sticky"
    return None


def _why_unsafe(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not {os.geteuid()}"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"mode {stat.S_IMODE(st.st_mode):04o}, must be 0700"
    return None


class UnsafeStateDir(IolabError):
    """A state directory (or a directory above it) that someone else could write: nothing in it is used."""


def _refuse(path: Path, why: str) -> IolabError:
    return UnsafeStateDir(f"refused as iolab's state directory: {why}", context=str(path),
                      hint="iolab keeps its marks, locks and ledger only where nobody else can write; "
                           "remove it (or fix owner and mode) once you know who made it")


def check_ancestors(path: Path) -> None:
    """Refuse ``path`` when a directory above it could be replaced by another user: every directory
    on the way, as written and with links resolved (a link on the way must be root's or ours)."""
    literal = Path(os.path.abspath(path))
    resolved = Path(os.path.realpath(literal.parent)) / literal.name
    for parent in dict.fromkeys(list(reversed(literal.parents)) + list(reversed(resolved.parents))):
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            continue  # iolab makes it itself (mode 0700)
        except OSError as exc:
            raise _refuse(path, f"cannot inspect {parent}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (0, os.geteuid()):
                raise _refuse(path, f"{parent} is a symlink of uid {st.st_uid}, who could point it elsewhere")
            continue  # what it leads to is judged on the resolved way
        why = _why_unsafe_ancestor(parent, st)
        if why:
            raise _refuse(path, why)


def open_dir(path: Path | str, *, create: bool = True) -> int:
    """A descriptor of the private directory ``path``, made (mode 0700, with its missing parents)
    when ``create``; raises :class:`IolabError` when it is not safe (see the module docstring)."""
    path = Path(os.path.abspath(path))
    check_ancestors(path)
    if create:
        _make(path)
    try:
        fd = os.open(path, _OPEN_DIR)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(path, "a symlink or not a directory") from None
        raise IolabError(f"cannot open iolab's state directory: {exc.strerror}", context=str(path)) from None
    why = _why_unsafe(path, os.fstat(fd))
    if why:
        os.close(fd)
        raise _refuse(path, why)
    return fd


def _make(path: Path) -> None:
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)  # the umask may only take bits away


@contextlib.contextmanager
def opened(path: Path | str, *, create: bool = True):
    """:func:`open_dir` as a context manager (the descriptor is closed after)."""
    fd = open_dir(path, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def private(*parts: str, create: bool = True) -> Path:
    """This user's state directory, or a directory below it, made and checked (every level)."""
    path = base()
    os.close(open_dir(path, create=create))
    for part in parts:
        path = path / part
        os.close(open_dir(path, create=create))
    return path


def write_new(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Create ``name`` in the directory exclusively (never through a link, never over a file)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                 dir_fd=dir_fd)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``name`` atomically: a new exclusive file, renamed over the old name."""
    tmp = f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
    write_new(dir_fd, tmp, data)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def read(dir_fd: int, name: str, *, limit: int = MAX_ENTRY_BYTES) -> bytes:
    """The content of the regular file ``name`` (no link followed); ``ValueError`` when it is not a
    regular file or is larger than ``limit``."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes, more than an entry ever holds ({limit})")
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def remove(dir_fd: int, name: str) -> bool:
    """Remove the entry ``name`` (a link is removed, not followed); False when it was not there."""
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False


def names(dir_fd: int) -> list[str]:
    """The directory's entries, sorted."""
    return sorted(os.listdir(dir_fd))


@contextlib.contextmanager
def lock(dir_fd: int, name: str, *, timeout: float | None = None, what: str = "a lock"):
    """Hold an exclusive ``flock`` on the lock file ``name`` (made if missing; never a link).

    ``timeout`` None waits as long as it takes; else :class:`IolabError` after that many seconds.
    """
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        why = "a symlink (not followed)" if exc.errno == errno.ELOOP else exc.strerror
        raise IolabError(f"refused to open the lock file {name}: {why}", context=what) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise IolabError(f"refused: {name} is not a regular file of uid {os.geteuid()}", context=what)
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise IolabError("another iolab process keeps it locked", context=what) from None
                    time.sleep(0.1)
        yield
    finally:
        os.close(fd)
