"""The one place iolab keeps state between processes, and the one way iolab makes a private directory.

Root's state is in ``/run/iolab`` (mode 0700, owner root): no other user can plant an entry, a symlink
or a lock there. A user who is not root gets a private place of their own,
``$XDG_RUNTIME_DIR/iolab`` or else ``~/.cache/iolab/run`` (mode 0700, theirs), holding only
what a run without root needs. Nothing lives in ``/run/lock`` or ``/tmp``, where anyone may
create names. Other private directories (a fio server's socket, :mod:`iolab.fleet.privatedir`) are
made and checked by the same :func:`open_dir`.

A private directory is walked to from ``/`` one component at a time, each opened relative to its
parent's descriptor with ``O_NOFOLLOW`` and checked on that descriptor (not by name): the last must
be a directory owned by the user iolab runs as, with no access for group or others; every directory
above it must be owned by root or that user and writable by nobody else (or sticky, as ``/tmp`` is),
so nobody can swap it for another one. A symbolic link on the way is allowed only when root or the
user owns it (nobody else can then point it elsewhere), and the walk follows where it leads, judging
those directories; the last component is never a link. Missing directories are made mode 0700.
A directory that fails is refused with :class:`UnsafeStateDir` naming the path and what is wrong:
iolab does not repair a place someone else may have prepared.

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
from pathlib import Path

from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError

ROOT_DIR = "/run/iolab"
#: the largest entry :func:`read` accepts (ledger records are a few hundred bytes)
MAX_ENTRY_BYTES = 64 * 1024
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
STATE_DIR = "iolab's state directory"
_STATE_HINT = ("iolab keeps its marks, locks and ledger only where nobody else can write; "
               "remove it (or fix owner and mode) once you know who made it")


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


class UnsafeStateDir(IolabError):
    """A private directory (or a directory above it) that someone else could write: nothing in it is used.
    ``path`` is the directory asked for, ``why`` what is wrong (naming the directory above when it is one)."""

    def __init__(self, path: Path | str, why: str, *, what: str = STATE_DIR, hint: str | None = _STATE_HINT):
        self.path, self.why = str(path), why
        super().__init__(f"refused as {what}: {why}", context=self.path, hint=hint)


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}"


def _why_unsafe_ancestor(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to uid {st.st_uid}, who could replace what lies below it"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}) and not sticky"
    return None


def _why_unsafe(st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not {os.geteuid()}"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"mode {stat.S_IMODE(st.st_mode):04o}, must be 0700"
    return None


def _way(path: Path, refuse) -> list[str]:
    """The components of ``path`` with the links above it resolved (the walk judges where they lead);
    a link on the way must be root's or ours: in a sticky directory anyone else could replace theirs."""
    probe = Path("/")
    for part in path.parent.parts[1:]:
        probe = probe / part
        try:
            st = os.lstat(probe)
        except FileNotFoundError:
            break  # made by the walk (mode 0700), or missing
        except OSError as exc:
            raise refuse(f"cannot inspect {probe}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, os.geteuid()):
            raise refuse(f"{probe} is a symlink of uid {st.st_uid}, who could point it elsewhere")
    return [*Path(os.path.realpath(path.parent)).parts[1:], path.name]


def _open(parent_fd: int, name: str, where: Path, last: bool, refuse) -> int:
    """Open the directory ``name`` below ``parent_fd``, never through a link; a refusal names ``where``
    unless it is the last component (the one the refusal is about)."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=parent_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        it = "" if last else f"{where} is "
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            why = f"{it}a symbolic link (not followed)"
        elif st is not None and exc.errno in (errno.EACCES, errno.EPERM):
            why = f"{'' if last else f'{where} '}cannot be entered by uid {os.geteuid()} ({_mode(st)})"
        elif exc.errno == errno.ENOTDIR:
            why = f"{it}not a directory"
        else:
            why = f"cannot open {where}: {exc.strerror}"
        raise refuse(why) from None


def _enter(parent_fd: int, name: str, where: Path, create: bool, last: bool, refuse) -> int:
    """:func:`_open`, the directory made (mode 0700) first when it is missing and ``create``."""
    try:
        return _open(parent_fd, name, where, last, refuse)
    except FileNotFoundError:
        if not create:
            raise
    made = False
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        made = True
    except FileExistsError:
        pass  # another process made it in between: checked as any other
    except OSError as exc:
        raise refuse(f"cannot make {where}: {exc.strerror}") from None
    fd = _open(parent_fd, name, where, last, refuse)
    if made and os.fstat(fd).st_uid == os.geteuid():
        os.fchmod(fd, 0o700)  # whatever the umask took from mkdir's mode
    return fd


def open_dir(path: Path | str, *, create: bool = True, what: str = STATE_DIR,
             hint: str | None = _STATE_HINT) -> int:
    """A descriptor of the private directory ``path``, made (mode 0700, with its missing parents)
    when ``create``; raises :class:`UnsafeStateDir` (``what`` and ``hint`` word it) when it is not
    safe (see the module docstring), ``FileNotFoundError`` when it is missing and not ``create``."""
    path = Path(os.path.abspath(path))

    def refuse(why: str) -> UnsafeStateDir:
        return UnsafeStateDir(path, why, what=what, hint=hint)

    if path == Path("/"):
        raise refuse("the root directory is nobody's private directory")
    names = _way(path, refuse)
    fd = os.open("/", _OPEN_DIR)
    try:
        why = _why_unsafe_ancestor(Path("/"), os.fstat(fd))
        where = Path("/")
        for index, name in enumerate(names):
            if why:
                raise refuse(why)
            where, last = where / name, index == len(names) - 1
            child = _enter(fd, name, where, create, last, refuse)
            os.close(fd)
            fd = child
            why = _why_unsafe(os.fstat(fd)) if last else _why_unsafe_ancestor(where, os.fstat(fd))
        if why:
            raise refuse(why)
    except BaseException:
        os.close(fd)
        raise
    return fd


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
            def taken() -> bool:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    return False
            wait_until(taken, timeout, interval=0.1, what="the lock another iolab process holds", context=what)
        yield
    finally:
        os.close(fd)
