"""Loop devices over files, with direct I/O so the host's page cache stays out."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from iolab.core import commands, mountinfo, ownership
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)


def attach(backing_file: str | os.PathLike, *, direct_io: bool = True,
           sector_size: int | None = None, owned: bool = True) -> str:
    """Attach ``backing_file`` to a free loop device and return ``/dev/loopN``.

    With ``direct_io`` the loop device reads and writes its backing file with
    O_DIRECT (checked afterwards in ``/sys/block/loopN/loop/dio``); otherwise a
    loop device silently caches its backing file in the host's page cache.
    ``owned``: the device is this process's (recorded in :mod:`iolab.core.ownership`,
    detached by :mod:`iolab.engine.reaper` if the process dies without detaching it);
    pass False for a device meant to outlive the process.
    """
    argv = ["losetup", "--find", "--show"]
    if sector_size:
        argv += ["--sector-size", str(sector_size)]
    if direct_io:
        argv += ["--direct-io=on"]
    argv.append(str(backing_file))
    try:
        device = commands.run(argv).stdout.strip()
    except IolabError as exc:
        if not direct_io:
            raise
        _detach_any(backing_file)  # an older losetup may attach first and fail on LOOP_SET_DIRECT_IO
        said = ": ".join(exc.message.split(": ")[-2:])  # losetup's own words, without the path
        raise _no_direct_io(backing_file, f"losetup: {said}") from None
    if owned:
        ownership.record("loop", device, undo=f"losetup --detach {device}",
                         backing_file=os.path.abspath(backing_file))
    if direct_io and not dio_enabled(device):
        detach(device)
        raise _no_direct_io(backing_file, "the kernel attached it with direct I/O off")
    log.info("attached %s to %s (direct I/O %s)", backing_file, device, "on" if direct_io else "off")
    return device


def _no_direct_io(backing_file, detail: str) -> IolabError:
    """The refusal when a loop device cannot read its backing file with O_DIRECT (a file on tmpfs
    before Linux 6.6, ramfs, some FUSE and network file systems): without it the loop device would
    serve the file from memory, so iolab does not fall back to a buffered loop."""
    directory = os.path.dirname(os.path.abspath(backing_file))
    fstype = filesystem_type(directory)
    return IolabError(
        f"a loop device cannot do direct I/O on a file in {directory} (file system {fstype}): "
        f"the backing file would be served from memory, not a disk ({detail})",
        context=str(backing_file),
        hint=f"choose a scratch directory on a disk-backed file system instead of {directory} "
             "(iolab run: TMPDIR=/var/tmp, the default when TMPDIR is unset)")


def filesystem_type(path: str | os.PathLike) -> str:
    """The type of the file system holding ``path`` (from /proc/self/mountinfo), 'unknown' if not found."""
    mount = mountinfo.mount_of(path)
    return mount.fstype if mount else "unknown"


def _detach_any(backing_file) -> None:
    """Detach every loop device over ``backing_file`` (what a failed attach may have left)."""
    proc = commands.run(["losetup", "--associated", str(backing_file), "--noheadings", "--output", "NAME",
                         "--list"], check=False)
    for device in proc.stdout.split():
        commands.run(["losetup", "--detach", device], check=False)
        log.warning("detached %s, left attached by a failed losetup", device)


def detach(device: str) -> None:
    """Detach ``device``; a device that is already gone is not an error."""
    if not Path(device).exists() or backing_file(device) is None:
        ownership.forget("loop", device)
        return
    commands.run(["losetup", "--detach", device])
    ownership.forget("loop", device)
    log.info("detached %s", device)


def undo_stale(device: str, details: dict, *, dry_run: bool) -> str | None:
    """Detach a loop device whose owner is gone, if it still has the recorded backing file.

    Returns what was (or would be) done, None when there is nothing to do
    (detached already, or the number now belongs to another backing file).
    """
    now = backing_file(device)
    wanted = details.get("backing_file")
    if now is None:
        return None
    if wanted and os.path.realpath(now.removesuffix(" (deleted)")) != os.path.realpath(wanted):
        log.info("%s now backs %s, not %s: not ours any more", device, now, wanted)
        return None
    if dry_run:
        return f"would detach loop device {device} ({now})"
    commands.run(["losetup", "--detach", device])
    rotational = details.get("rotational_before")
    if rotational is not None:  # the queue flag outlives the attachment
        try:
            (_sys(device) / "queue" / "rotational").write_text(str(rotational))
        except OSError as exc:
            log.warning("cannot restore rotational=%s on %s: %s", rotational, device, exc.strerror)
    return f"detached loop device {device} ({now})"


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
