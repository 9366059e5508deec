"""dm-delay devices: a fixed delay per read, per write and per cache flush in front of another block device.

:func:`create` maps a whole device through the ``delay`` target of the device
mapper (``dmsetup create``): every read bio waits ``read_ms`` before it reaches
the device below, every write ``write_ms``, and, with ``flush_ms``, every cache
flush (a bio with REQ_PREFLUSH: what fsync and a journal commit end with)
``flush_ms`` -- dm-delay's third class, ``delay <dev> <off> <read_ms> <dev> <off>
<write_ms> <dev> <off> <flush_ms>``. Without it a flush is a write and waits
``write_ms``. It is what makes an emulated ``hdd`` latency-true
(:mod:`iolab.devices.latency`).

Whether the kernel's dm-delay has the flush class is asked up front
(:func:`has_flush_class`), from what the kernel says about itself: the
``delay`` target's version in ``dmsetup targets`` and the kernel's release.
The class came with Linux 4.19 (commit cda6b5ab7f59 "dm delay: add flush as a
third class of IO") *without* a version bump: 4.19 to 5.x kernels print
``delay v1.2.1`` as the 4.x kernels before them did (the 5.15-era source has
the 9-argument table at 1.2.1); later kernels print v1.3.0 or more (Debian's
6.1.0 in the lab VM: ``tests/fixtures/dmsetup/``). So v1.3.0 or later has it,
an older version has it where the kernel is 4.19 or later. A distribution
kernel older than 4.19 with the class backported (RHEL 8's 4.18, say) is
taken for one without it: its devices get the read and write classes, which
such a kernel accepts, and ``reason`` says why.

Names carry the owner, ``iolab-delay-<pid>-<hex>``, and each device gets an
ownership record (kind ``dm``), so what a killed process left is removed by
:mod:`iolab.engine.reaper` (before the loop device under it is detached).

The kernel's dm-delay (up to Linux 6.8) queues delayed bios on a timer in
jiffies: a delay is rounded up to whole ticks (4 ms at HZ=250, Debian's) and a
bio waits between the delay and about one tick more, plus the kernel's work
queue. The configured delay is a lower bound, never an exact figure.
"""
from __future__ import annotations

import logging
import os
import platform
import re
import secrets
import time
from pathlib import Path

from iolab.core import commands, ownership
from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

PREFIX = "iolab-delay-"
MAPPER = Path("/dev/mapper")
SECTOR = 512
FLUSH_CLASS_VERSION = (1, 3, 0)  # a dm-delay this recent has the flush class, whatever the kernel release
FLUSH_CLASS_KERNEL = (4, 19)     # the release that added it (its dm-delay still said v1.2.1)
_TARGET_LINE = re.compile(r"^(\S+)\s+v(\d+)\.(\d+)\.(\d+)\s*$")
_RELEASE = re.compile(r"^(\d+)\.(\d+)")


def unavailable() -> str | None:
    """Why dm-delay cannot be used here (None: it can).

    Loads the ``dm_delay`` module where ``modprobe`` can (a loaded module is
    left loaded, like md's). Never raises.
    """
    if os.geteuid() != 0:
        return "not root"
    for tool in ("dmsetup", "blockdev"):
        try:
            commands.which(tool)
        except IolabError:
            return f"{tool} is not installed"
    targets = _targets()
    if not targets or "delay" not in targets:
        try:
            commands.which("modprobe")
            commands.run(["modprobe", "dm_delay"], check=False, timeout=30)
        except IolabError:
            pass
        targets = _targets()
    if targets is None:
        return "the kernel has no device-mapper (dmsetup targets failed)"
    if "delay" not in targets:
        return "the kernel has no dm-delay target (module dm_delay)"
    return None


def _targets() -> dict | None:
    """The device-mapper targets the kernel knows, name -> version (None: no device-mapper at all)."""
    try:
        proc = commands.run(["dmsetup", "targets"], check=False, timeout=30)
    except IolabError:
        return None
    if proc.returncode != 0:
        return None
    return parse_targets(proc.stdout)


def parse_targets(text: str) -> dict:
    """``dmsetup targets`` output (``delay            v1.3.0`` a line) as name -> (major, minor, patch);
    a line whose version is not ``vX.Y.Z`` keeps its name with version None."""
    found = {}
    for line in text.splitlines():
        if not line.split():
            continue
        match = _TARGET_LINE.match(line.strip())
        found[line.split()[0]] = tuple(int(part) for part in match.groups()[1:]) if match else None
    return found


def delay_version() -> tuple | None:
    """The kernel's dm-delay version as (major, minor, patch); None where it lists no ``delay`` target
    (or no version for it). Does not load the module: :func:`unavailable` does."""
    return (_targets() or {}).get("delay")


def flush_class_missing(version: tuple | None, release: str) -> str | None:
    """Why a dm-delay of ``version`` on kernel ``release`` (``uname -r``) has no flush class; None: it has it."""
    if version is None:
        return "the kernel lists no dm-delay version (dmsetup targets)"
    shown = "v" + ".".join(str(part) for part in version)
    if tuple(version) >= FLUSH_CLASS_VERSION:
        return None
    match = _RELEASE.match(release)
    if match is None:
        return f"dm-delay {shown} predates v1.3.0 and the kernel release {release!r} is not a version"
    if tuple(int(part) for part in match.groups()) >= FLUSH_CLASS_KERNEL:
        return None
    return f"dm-delay {shown} on Linux {release}: the flush class came with Linux 4.19"


def has_flush_class() -> bool:
    """Whether this kernel's dm-delay takes a flush delay (the 9-argument table), from its own word."""
    return flush_class_missing(delay_version(), platform.release()) is None


def new_name() -> str:
    return f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"


def path_of(name: str) -> str:
    return str(MAPPER / name)


def table(lower: str, sectors: int, *, read_ms: int, write_ms: int, flush_ms: int | None = None) -> str:
    """The dm table line: reads from ``lower`` after ``read_ms``, writes after ``write_ms``, cache flushes
    after ``flush_ms`` (None: no flush class, flushes wait ``write_ms`` as writes)."""
    line = f"0 {sectors} delay {lower} 0 {int(read_ms)} {lower} 0 {int(write_ms)}"
    return line if flush_ms is None else f"{line} {lower} 0 {int(flush_ms)}"


def create(lower: str, *, read_ms: int, write_ms: int, flush_ms: int | None = None, name: str | None = None,
           **details) -> str:
    """Map ``lower`` through dm-delay; returns ``/dev/mapper/<name>`` (recorded in the ledger).

    ``flush_ms`` needs dm-delay's flush class (:func:`has_flush_class`): a kernel
    without it refuses the table, and the IolabError says so.
    """
    name = name or new_name()
    sectors = int(commands.run(["blockdev", "--getsz", lower]).stdout.strip())
    # recorded before it exists: a crash right after the create still leaves its owner behind
    ownership.record("dm", name, undo=f"dmsetup remove {name}", lower=lower, **details)
    try:
        commands.run(["dmsetup", "create", name],
                     input=table(lower, sectors, read_ms=read_ms, write_ms=write_ms, flush_ms=flush_ms))
    except IolabError:
        remove(name)  # a half-made device (created but not loaded) must go too
        raise
    device = path_of(name)
    _wait_for_node(device)
    log.info("dm-delay %s over %s: reads +%d ms, writes +%d ms, flushes +%s ms", device, lower, read_ms, write_ms,
             write_ms if flush_ms is None else flush_ms)
    return device


def _wait_for_node(device: str, timeout: float = 10.0) -> None:
    """dmsetup makes the node itself (or udev does): wait until it is there."""
    wait_until(lambda: os.path.exists(device), timeout, what="the device-mapper node to appear", context=device)


def exists(name: str) -> bool:
    return name in names()


def names() -> list[str]:
    """Names of the device-mapper devices that exist now (from sysfs)."""
    found = []
    for entry in sorted(Path("/sys/block").glob("dm-*")):
        try:
            found.append((entry / "dm" / "name").read_text().strip())
        except OSError:
            continue
    return found


def remove(name: str) -> None:
    """Remove the dm device ``name`` (retrying while something still closes it); gone already is fine."""
    if exists(name):
        for attempt in range(10):
            proc = commands.run(["dmsetup", "remove", name], check=False)
            if proc.returncode == 0 or not exists(name):
                break
            time.sleep(0.2 * (attempt + 1))  # busy: udev or a process may still hold it open
        else:
            raise IolabError(f"cannot remove the dm-delay device: {(proc.stderr or '').strip()}",
                             context=path_of(name))
        log.info("removed dm device %s", name)
    ownership.forget("dm", name)


def owner_of(name: str) -> int | None:
    """The PID in ``iolab-delay-<pid>-<hex>``, None for other names."""
    if not name.startswith(PREFIX):
        return None
    head = name[len(PREFIX):].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def leftovers(*, owner: int | None = None) -> list[dict]:
    """iolab's dm-delay devices that exist now (optionally made by process ``owner``)."""
    return [{"name": n, "owner": owner_of(n)} for n in names()
            if owner_of(n) is not None and owner in (None, owner_of(n))]


def undo_stale(name: str, details: dict, *, dry_run: bool) -> str | None:
    """Remove a dm-delay device whose owner is gone (the reaper; before the loop device under it)."""
    if not exists(name):
        return None
    if dry_run:
        return f"would remove dm-delay device {name}"
    remove(name)
    return f"removed dm-delay device {name}"
