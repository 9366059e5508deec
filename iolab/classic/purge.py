"""The steady-state recipe's purge: a discard of the whole device, only where it is safe and supported.

SNIA's PTS starts from a purged drive (a secure erase or sanitize). iolab does the part any block
device that takes discards can do: ``blkdiscard`` of the whole device, a TRIM of every block, and
only on a real block device the command line confirmed by its exact path (``--confirm``).
Anything else is not purged, and the record says why as a code with its figures
(:class:`iolab.analysis.steadystate.Reason`: ``emulated``, ``not_device kind=dir``, ``no_confirm``,
``no_discard device=sdb``, ``no_discard_limit device=sdb``, ``no_blkdiscard``), for the report
to word; a purge done is ``blkdiscard device=sdb``. A secure erase or sanitize of a drive is never
attempted: it cannot be undone, differs per drive and bus, and cannot be tested here.
"""
from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess

from iolab.analysis.steadystate import Reason
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: what each code means, for the log (the report words the codes through its locale)
_SAID = {
    "emulated": "not purged: an emulated device starts empty (a new loop device)",
    "not_device": "not purged: a {kind} on a file system is not a device; only a whole block device is purged",
    "no_confirm": "not purged: purging a device needs --confirm naming it",
    "no_discard": "not purged: {device} does not support discard (queue/discard_max_bytes is 0)",
    "no_discard_limit": "not purged: cannot read the discard limit of {device}",
    "no_blkdiscard": "not purged: blkdiscard (util-linux) is not installed",
    "blkdiscard": "purged: blkdiscard of the whole of {device} (a TRIM of every block; not a secure erase)",
}


def said(reason: Reason) -> str:
    """The reason in English, for the log."""
    return _SAID[reason.code].format(**reason.figures)


def discard_limit(device: str) -> int | None:
    """The most bytes one discard may cover (``queue/discard_max_bytes``; 0: no discard), None if unreadable."""
    name = os.path.basename(os.path.realpath(device))
    sys_dir = f"/sys/class/block/{name}"
    queue = f"{sys_dir}/queue" if os.path.isdir(f"{sys_dir}/queue") else f"{sys_dir}/../queue"  # a partition
    try:
        with open(f"{queue}/discard_max_bytes") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError) as exc:
        log.warning("cannot read the discard limit of %s: %s", device, exc)
        return None


def _confirmed(target) -> bool:
    confirm = target.confirm
    items = [confirm] if isinstance(confirm, (str, os.PathLike)) else list(confirm or [])
    return any(os.path.realpath(item) == os.path.realpath(target.path) for item in items)


def purge_plan(target) -> tuple[list[str] | None, Reason]:
    """The purge command for ``target`` (None: not purged) and the reason code for what happens."""
    if target.kind == "emulated":
        return None, Reason("emulated")
    if target.kind != "block":
        return None, Reason("not_device", {"kind": target.kind})
    if not _confirmed(target):
        return None, Reason("no_confirm")
    device = os.path.basename(os.path.realpath(target.path))
    limit = discard_limit(target.path)
    if limit is None:
        return None, Reason("no_discard_limit", {"device": device})
    if limit == 0:
        return None, Reason("no_discard", {"device": device})
    if shutil.which("blkdiscard") is None:
        return None, Reason("no_blkdiscard")
    return ["blkdiscard", *_force(), target.path], Reason("blkdiscard", {"device": device})


@functools.lru_cache(maxsize=1)
def _force() -> tuple[str, ...]:
    """``--force`` where blkdiscard has it (util-linux 2.36 on): the device was confirmed, and from 2.36
    blkdiscard refuses a device with a signature or open elsewhere without it; older ones lack the option."""
    proc = subprocess.run(["blkdiscard", "--help"], capture_output=True, text=True, check=False)
    return ("--force",) if "--force" in proc.stdout else ()


def purge(target) -> dict:
    """Purge ``target`` where :func:`purge_plan` allows; the record (``purged``, ``code``, its figures, the
    command). A purge that was started and failed is an :class:`IolabError`: the drive's state is unknown."""
    argv, reason = purge_plan(target)
    record = {"target": target.name, "purged": False, "code": str(reason), "what": said(reason)}
    if argv is None:
        log.info("%s: %s", target.name, record["what"])
        return record
    from iolab.devices.safety import check_writable
    check_writable(target.path, confirm=target.confirm)  # mounted, swap, held: never, whatever the confirmation
    log.info("purging %s: %s", target.name, " ".join(argv))
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise IolabError(f"the purge failed: {(proc.stderr or proc.stdout).strip() or proc.returncode}",
                         context=target.path, hint="run without --confirm for this device to skip the purge")
    return {**record, "purged": True, "command": argv}
