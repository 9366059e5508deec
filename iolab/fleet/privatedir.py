"""Directories only their owner can enter, for fio servers' Unix sockets and SSH tunnels' local ends.

fio's server has no authentication: whoever can ``connect()`` to its socket can
make it run any job. A Unix socket's own mode is one guard; the directory
holding it is the other, and the one that does not depend on how fio or ssh
create the file. :func:`ensure` makes (or checks) such a directory without
following links:

* every component is opened with ``O_NOFOLLOW`` from ``/`` down, so a symbolic
  link planted anywhere on the way is refused, not followed;
* the components iolab creates are made with ``mkdir`` mode 0700, then opened
  and checked through their descriptor (a directory swapped in between is seen);
* the last directory must belong to the calling user and let nobody else in
  (no group or other permission bits); an ancestor must belong to root or the
  user and be writable by nobody else unless it is sticky (``/tmp``), so nobody
  else can rename the private directory away and put their own in its place.

Where a fio server's socket lives by default (:func:`server_socket_dir`):
root's servers in ``/run/iolab/servers`` (mode 0700); a normal user's in
``$XDG_RUNTIME_DIR/iolab/servers`` when the runtime directory is theirs, else in
``/tmp/iolab-<uid>/servers``.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from iolab.core.errors import IolabError

#: root's fio servers put their sockets here (``iolab server``'s default).
ROOT_SERVER_DIR = "/run/iolab/servers"
#: the socket file's name in the server directory.
SERVER_SOCKET_NAME = "fio.sock"
#: root's default fio server socket: what an inventory's ``remote_socket`` defaults to.
ROOT_SERVER_SOCKET = f"{ROOT_SERVER_DIR}/{SERVER_SOCKET_NAME}"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _describe_mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}"


def _check_ancestor(st: os.stat_result, path: str, uid: int) -> None:
    if st.st_uid not in (0, uid):
        raise IolabError(f"belongs to uid {st.st_uid}, who could replace what iolab keeps below it",
                         context=path, hint="put the socket under a directory of yours or root's")
    writable_by_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable_by_others and not st.st_mode & stat.S_ISVTX:
        raise IolabError(f"is writable by others ({_describe_mode(st)}) and not sticky: anyone could "
                         "replace what iolab keeps below it", context=path)


def _check_private(fd: int, path: str, uid: int) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise IolabError("is not a directory", context=path)
    if st.st_uid != uid:
        raise IolabError(f"belongs to uid {st.st_uid}, not to uid {uid}: not a private directory of this user",
                         context=path, hint="remove it or choose another place")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise IolabError(f"lets others in ({_describe_mode(st)}); a fio server's socket needs a directory "
                         "only its owner can enter (0700)", context=path, hint=f"chmod 700 {path}")


def _open_component(parent_fd: int, name: str, path: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise IolabError("is a symbolic link; iolab does not follow links to a private directory",
                             context=path) from None
        raise


def ensure(path: str | os.PathLike, *, create: int = 1) -> str:
    """Make sure ``path`` is a directory only the calling user can enter; return it (absolute).

    The last ``create`` components are made (mode 0700) when missing; every
    other component must exist. Nothing is followed: a symbolic link anywhere
    on the path is refused. Raises :class:`IolabError` naming the directory
    and why it is not private.
    """
    path = os.path.abspath(os.fspath(path))
    uid = os.geteuid()
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise IolabError("/ is not a private directory", context=path)
    fd = os.open("/", _DIR_FLAGS)
    current = ""
    try:
        _check_ancestor(os.fstat(fd), "/", uid)
        for index, name in enumerate(parts):
            current += "/" + name
            last = index == len(parts) - 1
            made = False
            try:
                child = _open_component(fd, name, current)
            except FileNotFoundError:
                if index < len(parts) - create:
                    raise IolabError("does not exist", context=current) from None
                with contextlib.suppress(FileExistsError):  # another process made it: checked below
                    os.mkdir(name, 0o700, dir_fd=fd)
                    made = True
                child = _open_component(fd, name, current)
            except PermissionError:
                with contextlib.suppress(OSError):
                    st = os.lstat(current)
                    raise IolabError(f"cannot be entered by uid {uid} ({_describe_mode(st)}): not a private "
                                     "directory of this user", context=current,
                                     hint="remove it or choose another place") from None
                raise IolabError("cannot open: permission denied", context=current) from None
            except OSError as exc:
                raise IolabError(f"cannot open: {exc.strerror}", context=current) from None
            os.close(fd)
            fd = child
            if made:
                st = os.fstat(fd)
                if st.st_uid == uid:
                    os.fchmod(fd, 0o700)  # whatever the umask did to mkdir's mode
            if last:
                _check_private(fd, current, uid)
            else:
                _check_ancestor(os.fstat(fd), current, uid)
    finally:
        os.close(fd)
    return path


def check_socket_dir(socket_path: str | os.PathLike) -> str:
    """Refuse a socket whose directory is not private to this user (nothing is created); the path, absolute."""
    path = os.path.abspath(os.fspath(socket_path))
    try:
        ensure(os.path.dirname(path), create=0)
    except IolabError as exc:
        where = f"{exc.context}: {exc.message}" if exc.context else exc.message
        raise IolabError(f"the socket's directory is not private: {where}", context=path,
                         hint="iolab server's default place is one (leave out --socket)") from None
    return path


def server_socket_dir() -> str:
    """The directory where this user's fio servers put their sockets by default (created 0700, checked)."""
    uid = os.geteuid()
    if uid == 0:
        return ensure(ROOT_SERVER_DIR, create=2)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        with contextlib.suppress(OSError):
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not stat.S_IMODE(st.st_mode) & 0o077:
                return ensure(Path(runtime) / "iolab" / "servers", create=2)
    return ensure(f"/tmp/iolab-{uid}/servers", create=2)


def default_server_socket() -> str:
    """``iolab server``'s default socket: ``fio.sock`` in :func:`server_socket_dir`."""
    return os.path.join(server_socket_dir(), SERVER_SOCKET_NAME)
