"""Provenance: facts about this machine and a target, for the run manifest."""
from __future__ import annotations

import logging
import os
import platform
import sys
from pathlib import Path

from iolab import __version__
from iolab.core import mountinfo
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def os_name() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.system()


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def ram_bytes() -> int | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def system() -> dict:
    """Host, kernel, OS, CPU and RAM."""
    return {"hostname": platform.node(), "kernel": platform.release(), "os": os_name(),
            "arch": platform.machine(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "ram_bytes": ram_bytes()}


def versions() -> dict:
    from iolab.engine import fio
    try:
        fio_version = fio.version()
    except IolabError:
        fio_version = None
    return {"iolab": __version__, "fio": fio_version, "python": sys.version.split()[0]}


def mount_of(path: str | os.PathLike) -> dict:
    """File system, mount point, source device and options of the mount holding ``path`` (the kernel's mount
    table, read by :func:`iolab.core.mountinfo.mount_of`); empty when the table cannot be read."""
    mount = mountinfo.mount_of(path)
    if mount is None:
        return {}
    return {"mountpoint": mount.mountpoint, "source": mount.source, "filesystem": mount.fstype,
            "mount_options": mount.all_options}
