"""Running external programs: never through a shell, always with a clear error."""
from __future__ import annotations

import logging
import shutil
import subprocess

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

INSTALL_HINTS = {
    "fio": "install it with: apt-get install fio",
    "losetup": "install it with: apt-get install mount",
    "mkfs.ext4": "install it with: apt-get install e2fsprogs",
    "mkfs.xfs": "install it with: apt-get install xfsprogs",
    "mdadm": "install it with: apt-get install mdadm",
    "sgdisk": "install it with: apt-get install gdisk",
    "wipefs": "install it with: apt-get install util-linux",
    "hdparm": "install it with: apt-get install hdparm",
    "bonnie++": "install it with: apt-get install bonnie++",
}


def which(program: str) -> str:
    """Full path of ``program`` or an :class:`IolabError` saying how to install it."""
    path = shutil.which(program)
    if path is None:
        raise IolabError(f"{program} is not installed", hint=INSTALL_HINTS.get(program))
    return path


def run(argv: list[str], *, check: bool = True, input: str | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (a list, no shell) and capture text output.

    With ``check`` a non-zero exit raises :class:`IolabError` carrying the
    command and the last line fio/losetup/... wrote to stderr.
    """
    if "/" not in argv[0]:
        which(argv[0])
    log.debug("running %s", " ".join(argv))
    # no terminal input: mkfs and friends must never stop to ask a question
    stdin = None if input is not None else subprocess.DEVNULL
    proc = subprocess.run(argv, capture_output=True, text=True, input=input, stdin=stdin, timeout=timeout)
    if check and proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr.strip() or proc.stdout.strip()).splitlines() if line.strip()]
        # the first line usually says what went wrong, the last one sometimes only prints usage
        detail = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "no output"
        raise IolabError(f"exited with {proc.returncode}: {detail}", context=" ".join(argv))
    return proc
