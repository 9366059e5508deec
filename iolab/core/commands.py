"""Running external programs: never through a shell, always with a clear error."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: where Debian puts system programs, searched after PATH: a normal user's PATH lacks them,
#: yet mkfs.ext4, losetup, mdadm, hdparm, bonnie++, sshd... live there
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")

#: program -> its Debian package (tools/packages.txt lists the same; a test keeps them in step)
PACKAGES = {
    "fio": "fio",
    "bwrap": "bubblewrap",
    "losetup": "mount",
    "mkfs.ext4": "e2fsprogs",
    "mkfs.xfs": "xfsprogs",
    "mdadm": "mdadm",
    "sgdisk": "gdisk",
    "sfdisk": "fdisk",
    "dmsetup": "dmsetup",
    "modprobe": "kmod",
    "wipefs": "util-linux",
    "hdparm": "hdparm",
    "bonnie++": "bonnie++",
    "ssh": "openssh-client",
}

INSTALL_HINTS = {program: f"install it with: apt-get install {package}" for program, package in PACKAGES.items()}


def find(program: str) -> str | None:
    """Full path of ``program`` on PATH or in Debian's sbin directories, else None.

    The same answer for every user: ``shutil.which`` alone tells a normal user
    (no sbin on PATH) that an installed mkfs.ext4 is missing.
    """
    if os.sep in program:
        return program if os.access(program, os.X_OK) and not os.path.isdir(program) else None
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]  # "" would mean the cwd
    search = os.pathsep.join(dict.fromkeys([*dirs, *SYSTEM_DIRS]))
    return shutil.which(program, path=search)


def which(program: str) -> str:
    """Full path of ``program`` (see :func:`find`) or an :class:`IolabError` saying how to install it."""
    path = find(program)
    if path is None:
        raise IolabError(f"{program} is not installed", hint=INSTALL_HINTS.get(program))
    return path


def run(argv: list[str], *, check: bool = True, input: str | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (a list, no shell) and capture text output.

    With ``check`` a non-zero exit raises :class:`IolabError` carrying the
    command and the last line fio/losetup/... wrote to stderr.
    """
    shown = " ".join(argv)
    if "/" not in argv[0]:
        argv = [which(argv[0]), *argv[1:]]  # found in /usr/sbin also when PATH lacks it
    log.debug("running %s", shown)
    # no terminal input: mkfs and friends must never stop to ask a question
    stdin = None if input is not None else subprocess.DEVNULL
    proc = subprocess.run(argv, capture_output=True, text=True, input=input, stdin=stdin, timeout=timeout)
    if check and proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr.strip() or proc.stdout.strip()).splitlines() if line.strip()]
        # the first line usually says what went wrong, the last one sometimes only prints usage
        detail = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "no output"
        raise IolabError(f"exited with {proc.returncode}: {detail}", context=shown)
    return proc
