"""Where fio servers' Unix sockets go, and the check that a socket's directory lets in only its owner.

fio's server has no authentication: whoever can ``connect()`` to its socket can make it run any
job. A Unix socket's own mode is one guard; the directory holding it is the other, and the one that
does not depend on how fio or ssh create the file. Such a directory is made and checked without
following links by :func:`iolab.core.statedir.open_dir`, the one implementation of a private
directory; this module holds the fleet's own decisions on top of it:

* a fio server's default socket is ``fio.sock`` in ``servers`` below the user's state directory
  (:func:`iolab.core.statedir.base`): root's ``/run/iolab/servers`` (mode 0700), a normal user's
  ``$XDG_RUNTIME_DIR/iolab/servers`` or else ``~/.cache/iolab/run/servers``; nothing in ``/tmp``;
* a socket named by the user (``--socket``, an SSH tunnel's near end) is refused, before any process
  starts, unless its directory already exists and is private to this user (nothing is created).
"""
from __future__ import annotations

import os

from iolab.core import statedir
from iolab.core.errors import IolabError

#: the socket file's name in the server directory.
SERVER_SOCKET_NAME = "fio.sock"
#: root's fio servers put their sockets here (``iolab server``'s default).
ROOT_SERVER_DIR = f"{statedir.ROOT_DIR}/servers"
#: root's default fio server socket: what an inventory's ``remote_socket`` defaults to.
ROOT_SERVER_SOCKET = f"{ROOT_SERVER_DIR}/{SERVER_SOCKET_NAME}"
_PRIVATE = "a private directory"
_PRIVATE_HINT = "remove it or choose another place"


def ensure(path: str | os.PathLike, *, create: bool = True) -> str:
    """Make sure ``path`` is a directory only the calling user can enter (made 0700 with its missing
    parents when ``create``); return it, absolute. Raises :class:`IolabError` naming the directory and
    why it is not private (see :func:`iolab.core.statedir.open_dir`)."""
    path = os.path.abspath(os.fspath(path))
    try:
        os.close(statedir.open_dir(path, create=bool(create), what=_PRIVATE, hint=_PRIVATE_HINT))
    except FileNotFoundError:
        raise IolabError("does not exist", context=path) from None
    return path


def check_socket_dir(socket_path: str | os.PathLike) -> str:
    """Refuse a socket whose directory is not private to this user (nothing is created); the path, absolute."""
    path = os.path.abspath(os.fspath(socket_path))
    try:
        ensure(os.path.dirname(path), create=False)
    except IolabError as exc:
        why = f"{exc.context}: {getattr(exc, 'why', exc.message)}"
        raise IolabError(f"the socket's directory is not private: {why}", context=path,
                         hint="iolab server's default place is one (leave out --socket)") from None
    return path


def server_socket_dir() -> str:
    """The directory where this user's fio servers put their sockets by default (made 0700, checked).

    A Unix socket's path must be shorter than 108 bytes (``sun_path``), and a confined server binds
    in a staging directory below this one first (about 28 bytes more): the state directory's
    ``servers`` is short enough for any usual home; where it is not, :func:`iolab.fleet.fioserver.start`
    refuses naming the path, and ``--socket`` names a shorter private place.
    """
    return str(statedir.private("servers"))


def default_server_socket() -> str:
    """``iolab server``'s default socket: ``fio.sock`` in :func:`server_socket_dir`."""
    return os.path.join(server_socket_dir(), SERVER_SOCKET_NAME)
