"""Writing files so that a reader never sees half of one, and the size of a file or block device."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from iolab.core.errors import IolabError


def _file_mode() -> int:
    """The mode a plain open() would give a new file (mkstemp makes them 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def size_of(path: str | os.PathLike) -> int:
    """Bytes in a file or block device, as fio sees them (the end of it: ``lseek(SEEK_END)``, a block
    device's BLKGETSIZE64); an unreadable one is an :class:`IolabError` naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise IolabError(f"cannot read its size: {exc.strerror or exc}", context=str(path)) from None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
