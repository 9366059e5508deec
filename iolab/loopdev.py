"""Loop devices over files, with direct I/O so the host's page cache stays out."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from . import commands
from .errors import IolabError

log = logging.getLogger(__name__)


def attach(backing_file: str | os.PathLike, *, direct_io: bool = True,
           sector_size: int | None = None) -> str:
    """Attach ``backing_file`` to a free loop device and return ``/dev/loopN``.

    With ``direct_io`` the loop device reads and writes its backing file with
    O_DIRECT (checked afterwards in ``/sys/block/loopN/loop/dio``); otherwise a
    loop device silently caches its backing file in the host's page cache.
    """
    argv = ["losetup", "--find", "--show"]
    if sector_size:
        argv += ["--sector-size", str(sector_size)]
    if direct_io:
        argv += ["--direct-io=on"]
    argv.append(str(backing_file))
    device = commands.run(argv).stdout.strip()
    if direct_io and not dio_enabled(device):
        detach(device)
        raise IolabError(
            "the kernel did not enable direct I/O on the loop device",
            context=str(backing_file),
            hint="the backing file system must support O_DIRECT (tmpfs does not)",
        )
    log.info("attached %s to %s (direct I/O %s)", backing_file, device, "on" if direct_io else "off")
    return device


def detach(device: str) -> None:
    """Detach ``device``; a device that is already gone is not an error."""
    if not Path(device).exists() or backing_file(device) is None:
        return
    commands.run(["losetup", "--detach", device])
    log.info("detached %s", device)


def _sys(device: str) -> Path:
    return Path("/sys/block") / Path(device).name


def backing_file(device: str) -> str | None:
    """Backing file of a loop device, or None when it is not attached."""
    path = _sys(device) / "loop" / "backing_file"
    try:
        return path.read_text().strip()
    except OSError:
        return None


def dio_enabled(device: str) -> bool | None:
    """Whether the loop device does direct I/O on its backing file (None: not a loop device)."""
    try:
        return (_sys(device) / "loop" / "dio").read_text().strip() == "1"
    except OSError:
        return None


def is_loop(device: str) -> bool:
    return Path(device).name.startswith("loop") and (_sys(device) / "loop").exists()
