"""Small device-mapper helpers for setup plans: table lines, dmsetup argv lists, what the kernel shows.

Only what :mod:`iolab.devices.plan.dm` needs: the tables of the ``linear``,
``delay`` and ``cache`` targets (sizes in 512-byte sectors), ``dmsetup``
commands that never wait for udev (a lab VM or a container may have none;
the node under /dev/mapper is made by libdevmapper then), and reading a dm
device's name, uuid and status from sysfs and ``dmsetup status``.
"""
from __future__ import annotations

import re
from pathlib import Path

from iolab.core import commands
from iolab.core.errors import IolabError

SECTOR = 512
SYS_BLOCK = Path("/sys/block")
#: dm-cache's cache block size: a multiple of 32 KiB between 32 KiB and 1 GiB (kernel docs, cache.rst).
CACHE_BLOCK_MIN = 32 * 1024
CACHE_BLOCK_MAX = 1024 ** 3
CACHE_MODES = ("writethrough", "writeback", "passthrough")
CACHE_POLICIES = ("smq",)
#: uuid prefix of every dm device a plan makes: teardown removes only what carries it.
UUID_PREFIX = "IOLAB-"


def mapper_path(name: str) -> str:
    return f"/dev/mapper/{name}"


def linear_table(sectors: int | str, device: str, offset: int = 0) -> str:
    return f"0 {sectors} linear {device} {offset}"


def delay_table(sectors: int | str, device: str, read_ms: int, write_ms: int) -> str:
    """dm-delay with separate read and write delays (the 6-argument form, kernels >= 3.x)."""
    return f"0 {sectors} delay {device} 0 {read_ms} {device} 0 {write_ms}"


def cache_table(sectors: int | str, metadata: str, cache: str, origin: str, block_size: int, mode: str,
                policy: str) -> str:
    """dm-cache over ``origin`` (``sectors`` long) with ``cache`` as the fast device."""
    return f"0 {sectors} cache {metadata} {cache} {origin} {block_size // SECTOR} 1 {mode} {policy} 0"


def cleaner_table(table: str) -> str:
    """The same cache table with the ``cleaner`` policy: writes every dirty block back to the origin."""
    fields = table.split()
    if len(fields) < 11 or fields[2] != "cache":
        raise IolabError(f"not a dm-cache table: {table!r}")
    features = int(fields[7])
    policy_at = 8 + features
    return " ".join(fields[:policy_at] + ["cleaner", "0"])


def create_argv(name: str, uuid: str, table: str) -> list[str]:
    return ["dmsetup", "create", "--noudevsync", name, "--uuid", uuid, "--table", table]


def remove_argv(name: str) -> list[str]:
    return ["dmsetup", "remove", "--noudevsync", "--retry", name]


def metadata_size(cache_bytes: int, block_size: int) -> int:
    """Metadata device size dm-cache needs: 4 MiB + 16 bytes per cache block (kernel docs), whole MiB."""
    mib = 1024 ** 2
    need = 4 * mib + 16 * max(1, cache_bytes // block_size)
    return -(-need // mib) * mib


def find(name: str) -> str | None:
    """Kernel name (``dm-3``) of the dm device called ``name``, or None."""
    for entry in SYS_BLOCK.glob("dm-*"):
        try:
            if (entry / "dm" / "name").read_text().strip() == name:
                return entry.name
        except OSError:
            continue
    return None


def uuid_of(kname: str) -> str | None:
    try:
        return (SYS_BLOCK / kname / "dm" / "uuid").read_text().strip()
    except OSError:
        return None


def sectors_of(kname: str) -> int | None:
    try:
        return int((SYS_BLOCK / kname / "size").read_text())
    except (OSError, ValueError):
        return None


def status(name: str) -> str:
    """``dmsetup status NAME`` (one line per target)."""
    proc = commands.run(["dmsetup", "status", name], check=False)
    if proc.returncode != 0:
        raise IolabError(f"dmsetup status failed: {(proc.stderr or proc.stdout).strip()}", context=name)
    return proc.stdout.strip()


_CACHE_STATUS = re.compile(r"\bcache\s+\d+\s+\d+/\d+\s+\d+\s+(\d+)/(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                           r"\s+(\d+)\s+(\d+)\s+(\d+)")


def cache_counters(name: str) -> dict:
    """dm-cache's counters from ``dmsetup status``: used and total cache blocks, read and write hits and
    misses, promotions, demotions and dirty blocks."""
    line = status(name)
    match = _CACHE_STATUS.search(line)
    if match is None:
        raise IolabError(f"not a dm-cache status: {line!r}", context=name)
    keys = ("used_blocks", "total_blocks", "read_hits", "read_misses", "write_hits", "write_misses",
            "demotions", "promotions", "dirty")
    return dict(zip(keys, map(int, match.groups())))
