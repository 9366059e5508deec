"""Emulated devices: throttled loop devices with known limits, a ground truth for tests.

``emulated_device("hdd", size="2G", scratch_dir="/var/tmp", filesystem="ext4")``
makes a sparse scratch file, attaches it to a loop device with direct I/O
(checked: a loop device without it would cache the file in the host's page
cache), optionally makes a file system and mounts it, and yields an
:class:`EmulatedDevice`. Its :attr:`~EmulatedDevice.throttles` go to
:func:`iolab.isolation.sandbox.open_sandbox`, which starts fio in a block cgroup
carrying them. On exit (also after errors and Ctrl-C) everything is undone in
reverse order: unmount, detach, delete the file. A profile that declares a
per-I/O delay (the ``hdd``) gets a dm-delay device over the loop device where
the kernel has dm-delay, and fio, the throttle and the file system use that
device (latency-true: :mod:`iolab.devices.latency` says why dm-delay and what
runs without it; :meth:`EmulatedDevice.describe` records it as ``emulation``).
A scratch directory whose file system gives the loop device no direct I/O
(tmpfs before Linux 6.6, ramfs) is refused, naming it (:mod:`iolab.devices.loopdev`).
Each of them carries its
owner (:mod:`iolab.core.ownership`: a record, and the PID in the backing file's and
mount point's names), so what a killed process left is undone by
:mod:`iolab.engine.reaper` (``iolab cleanup``, and the next ``iolab run``).

The profiles live in ``iolab/devices/profiles/emulated.yaml``; that file explains how
blk-throttle counts I/Os and what the ``hdd`` profile does with large I/O.
In short: time per request ~ ``max(bytes/bps, bios/iops)``, bios counted after
the loop device splits requests (1280 KiB, or 512 KiB for O_DIRECT buffers of
scattered 4 KiB pages). Jobs on an emulated device should therefore take
:data:`FIO_OPTIONS` (``iomem=mmaphuge``: fio's buffers in huge pages, which
the sandbox keeps while throttles are in force), so a 1 MiB request is one
I/O and the ``hdd`` profile streams at 100 MB/s while 4 KiB random reads are
held at 150 IOPS. Without it, 1 MiB O_DIRECT streaming on ``hdd`` stops at
150 x 512 KiB = 78.6 MB/s.

Known limits of the emulation:

* Under cgroup v1, buffered writes are throttled only when the writing task
  itself writes them back (``fsync``); pages written back by the kernel's
  flusher threads -- always the case when a memory cgroup's limit forces
  reclaim -- are issued from the root group and **not throttled**. Measured
  on ``hdd`` with ext4, 256 MiB sequential write + ``end_fsync``: O_DIRECT
  103 MB/s; buffered, no memory limit, 64 MB/s (fsync in fio's context);
  buffered in a 64 MiB memory cgroup 1370 MB/s (flusher). Under v2 writeback
  is charged to the writer's cgroup and throttled. Reads and O_DIRECT writes
  are throttled in every case.
* The file system's journal (jbd2) writes are not throttled either.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Iterator

import yaml

from iolab.isolation import blockstat
from iolab.core import commands, mountinfo, ownership
from iolab.devices import ceilingprobe, latency, loopdev
from iolab.devices.cliffwatch import CliffSpec, CliffWatch, parse_cliff
from iolab.isolation.cgroups import Throttle
from iolab.core.errors import IolabError
from iolab.core.units import human_size, parse_size

log = logging.getLogger(__name__)

PROFILES_FILE = "devices/profiles/emulated.yaml"
FILE_PREFIX = "iolab-emulated-"
#: mount points are ``<scratch>/iolab-mnt-<pid>-<random>``: the owner is in the name
MOUNT_PREFIX = "iolab-mnt-"
FILESYSTEMS = {
    # lazy init off: no background inode-table zeroing while a test measures
    "ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", "-L", "iolab"],
    "xfs": ["mkfs.xfs", "-q", "-f", "-K", "-L", "iolab"],
}
LIMIT_FIELDS = ("read_bps", "write_bps", "read_iops", "write_iops")
DELAY_FIELDS = ("read_delay_ms", "write_delay_ms", "flush_delay_ms")
#: fio options for jobs on emulated devices: I/O buffers in (hugetlb) huge pages,
#: physically contiguous, so the loop device does not split a 1 MiB request in
#: two and blk-throttle counts it once. The pages come from the sandbox
#: (``open_sandbox(..., buffer_hugepages=)``).
FIO_OPTIONS = {"iomem": "mmaphuge"}


@dataclasses.dataclass(frozen=True)
class Profile:
    """Declared limits of an emulated device (None: unlimited)."""

    name: str
    description: str
    rotational: bool = False
    read_bps: int | None = None
    write_bps: int | None = None
    read_iops: int | None = None
    write_iops: int | None = None
    notes: tuple = ()
    #: per-I/O service time where the kernel has dm-delay (:mod:`iolab.devices.latency`); None: none
    read_delay_ms: int | None = None
    write_delay_ms: int | None = None
    flush_delay_ms: int | None = None  # a cache flush (fsync's REQ_PREFLUSH), dm-delay's third class
    #: a write cliff (a consumer SSD's cache running out; :mod:`iolab.devices.cliffwatch`); None: none
    cliff: CliffSpec | None = None

    @property
    def limits(self) -> dict:
        return {f: getattr(self, f) for f in LIMIT_FIELDS}

    @property
    def throttled(self) -> bool:
        return any(v is not None for v in self.limits.values())

    def expected(self, *, bs: int, rw: str = "read") -> dict:
        """What a saturating workload of ``bs``-byte requests should reach (contiguous buffers).

        Returns ``bw_bps`` (bytes/s) and ``iops``; None where unlimited.
        """
        bps = self.read_bps if rw == "read" else self.write_bps
        iops = self.read_iops if rw == "read" else self.write_iops
        rates = [r for r in ((bps / bs) if bps else None, iops) if r is not None]
        if not rates:
            return {"iops": None, "bw_bps": None}
        rate = min(rates)
        return {"iops": rate, "bw_bps": rate * bs}


def _positive_int(value, context):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise IolabError(f"must be a positive number, got {value!r}", context=context)
    return int(value)


def _delay_ms(value, context):
    """A delay in whole milliseconds (dm-delay's unit), 0 allowed; None: not declared."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise IolabError(f"must be a whole number of milliseconds >= 0, got {value!r}", context=context)
    return value


def load_profiles(path: str | os.PathLike | None = None) -> dict[str, Profile]:
    """The emulated device profiles (``iolab/devices/profiles/emulated.yaml`` unless ``path``)."""
    if path is None:
        text = resources.files("iolab").joinpath(PROFILES_FILE).read_text()
        where = f"iolab/{PROFILES_FILE}"
    else:
        text, where = Path(path).read_text(), str(path)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise IolabError(f"not valid YAML: {exc}", context=where) from None
    profiles = {}
    for name, spec in (data.get("profiles") or {}).items():
        if not isinstance(spec, dict):
            raise IolabError("a profile must be a mapping", context=f"{where}: {name}")
        unknown = set(spec) - {"description", "rotational", "notes", "cliff", *LIMIT_FIELDS, *DELAY_FIELDS}
        if unknown:
            raise IolabError(f"unknown field(s) {', '.join(sorted(unknown))}", context=f"{where}: {name}")
        profiles[name] = Profile(
            name=name, description=str(spec.get("description", "")), rotational=bool(spec.get("rotational")),
            notes=tuple(spec.get("notes") or ()),
            **{f: _positive_int(spec.get(f), f"{where}: {name}.{f}") for f in LIMIT_FIELDS},
            **{f: _delay_ms(spec.get(f), f"{where}: {name}.{f}") for f in DELAY_FIELDS},
            cliff=parse_cliff(spec.get("cliff"), f"{where}: {name}.cliff"))
        if profiles[name].cliff is not None and profiles[name].write_bps is None:
            raise IolabError("a cliff needs a burst write_bps to fall from", context=f"{where}: {name}.cliff")
    return profiles


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise IolabError(f"unknown emulated device profile {name!r}", context="emulated",
                         hint=f"known profiles: {', '.join(sorted(profiles))}")
    return profiles[name]


@dataclasses.dataclass
class EmulatedDevice:
    """An emulated device while it exists (inside :func:`emulated_device`)."""

    profile: Profile
    device: str
    devnum: str
    backing_file: str
    size: int
    filesystem: str | None = None
    mountpoint: str | None = None
    mount_options: str | None = None
    #: the loop device over the backing file (``device`` is a dm-delay device over it when latency-true)
    loop_device: str | None = None
    emulation: latency.Emulation | None = None
    #: the thread that moves the write ceiling of a profile with a cliff (None: no cliff)
    cliff_watch: CliffWatch | None = None
    #: what the host delivered under the declared limits when the device was made (:mod:`iolab.devices.ceilingprobe`)
    ceiling_probe: dict | None = None

    @property
    def target(self) -> str:
        """What fio gets: the mount point (with a file system) or the device."""
        return self.mountpoint or self.device

    @property
    def throttles(self) -> list[Throttle]:
        """Limits for :func:`iolab.isolation.sandbox.open_sandbox` (empty when unthrottled)."""
        if not self.profile.throttled:
            return []
        if self.cliff_watch is not None:  # the ceiling in force now (a sandbox opened after the cliff)
            return [self.cliff_watch.throttle]
        return [Throttle(self.devnum, **self.profile.limits)]

    @property
    def fio_options(self) -> dict:
        """Job options fio needs on this device for the declared limits to hold (see FIO_OPTIONS)."""
        return dict(FIO_OPTIONS) if self.profile.throttled else {}

    @property
    def dio(self) -> bool | None:
        return loopdev.dio_enabled(self.loop_device or self.device)

    def describe(self) -> dict:
        dev = blockstat.device_for(self.device)
        return {
            "profile": self.profile.name,
            "description": self.profile.description,
            "declared": self.profile.limits,
            # beside the declared limits: the figure the host reached for each limit out of its reach ({}: none)
            "reachable": (self.ceiling_probe or {}).get("reachable"),
            "ceiling_probe": self.ceiling_probe,
            "notes": list(self.profile.notes),
            "fio_options": self.fio_options,
            "device": self.device,
            "devnum": self.devnum,
            "emulation": self.emulation.describe() if self.emulation else None,
            "cliff": self.cliff_watch.describe() if self.cliff_watch else None,
            "loop_device": self.loop_device or self.device,
            "dio": self.dio,
            "backing_file": self.backing_file,
            "size": self.size,
            "filesystem": self.filesystem,
            "mountpoint": self.mountpoint,
            "mount_options": self.mount_options,
            "rotational": dev.rotational,
            "queue": {a: dev.queue(a) for a in ("max_sectors_kb", "max_segments", "max_segment_size",
                                                 "read_ahead_kb", "scheduler", "logical_block_size")},
        }


def leftovers(*, owner: int | None = None) -> list[dict]:
    """Loop devices backed by iolab scratch files (optionally made by process ``owner``)."""
    found = []
    for entry in sorted(Path("/sys/block").glob("loop*")):
        backing = loopdev.backing_file(f"/dev/{entry.name}")
        if not backing:
            continue
        name = os.path.basename(backing.replace(" (deleted)", ""))
        if not name.startswith(FILE_PREFIX):
            continue
        if owner is not None and not name.startswith(f"{FILE_PREFIX}{owner}-"):
            continue
        found.append({"device": f"/dev/{entry.name}", "backing_file": backing})
    return found


def _umount(mountpoint: str) -> None:
    for attempt in range(10):
        proc = commands.run(["umount", mountpoint], check=False)
        if proc.returncode == 0:
            log.info("unmounted %s", mountpoint)
            return
        if "not mounted" in (proc.stderr or ""):
            return
        time.sleep(0.2 * (attempt + 1))  # busy: a process may still be closing files
    # last resort: detach it from the tree so the loop device can go
    commands.run(["umount", "--lazy", mountpoint])
    log.warning("unmounted %s lazily (it stayed busy)", mountpoint)


def _set_queue(device: str, attribute: str, value: str) -> None:
    path = Path("/sys/block") / Path(device).name / "queue" / attribute
    try:
        path.write_text(value)
    except OSError as exc:
        log.warning("cannot set %s=%s on %s: %s", attribute, value, device, exc.strerror)


@contextlib.contextmanager
def emulated_device(name: str | Profile, *, size: int | str, scratch_dir: str | os.PathLike | None = None,
                    filesystem: str | None = None, mount_options: str | None = None,
                    probe: bool = True) -> Iterator[EmulatedDevice]:
    """Create the emulated device ``name`` (a profile's name, or a :class:`Profile`) of ``size`` bytes;
    remove it on exit.

    ``scratch_dir`` holds the sparse backing file (default ``/var/tmp``); its
    file system must support O_DIRECT (tmpfs does not on kernels before 6.6:
    refused, naming the directory). A profile with a per-I/O delay gets a
    dm-delay device over its loop device where the kernel has one
    (:mod:`iolab.devices.latency`; ``emulation`` in :meth:`EmulatedDevice.describe`
    says which ran). Before anything else is written to it, a throttled device is
    probed (:mod:`iolab.devices.ceilingprobe`, a few seconds under its own limits):
    each declared limit this host cannot reach is recorded with the figure it did
    reach (``reachable`` in :meth:`EmulatedDevice.describe`); ``probe=False``
    skips that, for speed only, and the record says it was skipped.
    ``filesystem`` (``ext4``/``xfs``) formats and mounts the device on a
    temporary directory. Needs root.
    """
    profile = name if isinstance(name, Profile) else get_profile(name)
    nbytes, scratch = _check_request(profile, size, scratch_dir, filesystem)
    with contextlib.ExitStack() as undo:
        backing = _backing_file(undo, scratch, nbytes, profile)
        loop = loopdev.attach(backing, direct_io=True)  # raises if dio did not come on
        undo.callback(loopdev.detach, loop)
        if not loopdev.dio_enabled(loop):
            raise IolabError("direct I/O is off on the loop device", context=loop)
        _own_loop(undo, loop, backing, profile)
        emulation = latency.stack(latency.choose(profile), loop, undo, backing_file=backing)
        device = emulation.dm_device or loop
        if emulation.dm_device:
            # /dev/mapper/NAME -> /dev/dm-N (sysfs knows the kernel's name); the flag goes with the device
            _set_queue(os.path.realpath(device), "rotational", "1" if profile.rotational else "0")
        emulated = EmulatedDevice(profile=profile, device=device, devnum=blockstat.device_for(device).devnum,
                                  backing_file=backing, size=nbytes, loop_device=loop, emulation=emulation)
        # on the raw device, before the file system and the cliff's counter: the probe writes to it
        emulated.ceiling_probe = ceilingprobe.probe(emulated) if probe else ceilingprobe.not_probed(ceilingprobe.SKIPPED)
        if filesystem:
            _make_filesystem(undo, emulated, scratch, filesystem, mount_options)
        if profile.cliff is not None:  # started after mkfs: the file system's own writes do not fill the cache
            emulated.cliff_watch = CliffWatch(device, Throttle(emulated.devnum, **profile.limits), profile.cliff).start()
            undo.callback(emulated.cliff_watch.stop)
        log.info("emulated %s: %s over %s (%s, dio on, %s)%s", profile.name, device, backing, human_size(nbytes),
                 emulation.kind, f", {filesystem} on {emulated.mountpoint}" if filesystem else "")
        yield emulated
        # leaving the with-block unwinds `undo`: unmount, remove dm, detach, delete (also on errors)


def _check_request(profile: Profile, size, scratch_dir, filesystem) -> tuple[int, Path]:
    """Everything checkable before anything is made: root, size, file system tool, scratch space."""
    name = profile.name
    if os.geteuid() != 0:
        raise IolabError("emulated devices need root (loop devices and block cgroups)",
                         context=f"emulated:{name}", hint="run as root, e.g. sudo")
    nbytes = parse_size(size, context="size")
    if filesystem is not None and filesystem not in FILESYSTEMS:
        raise IolabError(f"unknown file system {filesystem!r}", context=f"emulated:{name}",
                         hint=f"choose {' or '.join(FILESYSTEMS)}")
    if filesystem is not None:
        commands.which(FILESYSTEMS[filesystem][0])
    scratch = Path(scratch_dir or "/var/tmp")
    if not scratch.is_dir():
        raise IolabError("scratch directory does not exist", context=str(scratch))
    st = os.statvfs(scratch)
    free = st.f_bavail * st.f_frsize
    if st.f_blocks == 0:  # ramfs and the like report no size at all: nothing to check against
        log.info("%s reports no size (file system %s): free space not checked", scratch,
                 loopdev.filesystem_type(scratch))
    elif free < nbytes + 64 * 1024**2:
        raise IolabError(f"not enough free space for a {human_size(nbytes)} scratch file "
                         f"({human_size(free)} free)", context=str(scratch), hint="use a smaller size")
    return nbytes, scratch


def _backing_file(undo: contextlib.ExitStack, scratch: Path, nbytes: int, profile: Profile) -> str:
    """A sparse scratch file named after this process, recorded and removed by ``undo``."""
    fd, backing = tempfile.mkstemp(prefix=f"{FILE_PREFIX}{os.getpid()}-{secrets.token_hex(3)}-",
                                   suffix=".img", dir=scratch.resolve())
    undo.callback(_unlink, backing)
    ownership.record("file", backing, undo=f"rm {backing}", inode=os.fstat(fd).st_ino,
                     purpose=f"backing file of emulated:{profile.name}")
    try:
        os.ftruncate(fd, nbytes)  # sparse: blocks are allocated as they are written
    finally:
        os.close(fd)
    return backing


def _own_loop(undo: contextlib.ExitStack, loop: str, backing: str, profile: Profile) -> None:
    """Record the loop device and set its rotational flag (given back on exit: the flag outlives it)."""
    previous = blockstat.device_for(loop).queue("rotational")
    ownership.record("loop", loop, undo=f"losetup --detach {loop}", backing_file=backing,
                     rotational_before=previous)  # a reaper gives the next user the old flag too
    _set_queue(loop, "rotational", "1" if profile.rotational else "0")
    if previous is not None:
        undo.callback(_set_queue, loop, "rotational", previous)


def _make_filesystem(undo: contextlib.ExitStack, emulated: EmulatedDevice, scratch: Path, filesystem: str,
                     mount_options: str | None) -> None:
    device = emulated.device
    commands.run(FILESYSTEMS[filesystem] + [device])
    mountpoint = tempfile.mkdtemp(prefix=f"{MOUNT_PREFIX}{os.getpid()}-", dir=scratch.resolve())
    undo.callback(_rmdir, mountpoint)
    # recorded before mounting: a crash right after the mount still leaves its owner behind
    ownership.record("mount", mountpoint, undo=f"umount {mountpoint}; rmdir {mountpoint}",
                     device=device, filesystem=filesystem)
    argv = ["mount", "-t", filesystem] + (["-o", mount_options] if mount_options else []) + [device, mountpoint]
    commands.run(argv)
    undo.callback(_umount, mountpoint)
    emulated.filesystem, emulated.mountpoint = filesystem, mountpoint
    emulated.mount_options = _mount_options(mountpoint)


def _mount_options(mountpoint: str) -> str | None:
    return next((m.all_options for m in mountinfo.mounts() if m.mountpoint == mountpoint), None)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        log.info("removed %s", path)
    ownership.forget("file", path)


def _rmdir(path: str) -> None:
    if _mounts_of_dir(path):
        log.error("not removing %s: still mounted", path)
        return
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)
    ownership.forget("mount", path)


def _mounts_of_dir(path: str) -> bool:
    real = os.path.realpath(path)
    return any(m.mountpoint == real for m in mountinfo.mounts())


# --------------------------------------------------------------------------- stale state (see iolab.engine.reaper)

def owner_of_name(path: str, prefix: str) -> int | None:
    """The PID in ``<prefix><pid>-...`` (a backing file or mount point name), None if not such a name."""
    name = os.path.basename(path.replace(" (deleted)", ""))
    if not name.startswith(prefix):
        return None
    head = name[len(prefix):].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def mounts() -> list[dict]:
    """Mounts whose point is an iolab mount point or whose source is an iolab loop device."""
    loops = {loop["device"]: loop["backing_file"] for loop in leftovers()}
    found = []
    for mount in mountinfo.mounts():
        point, source = mount.mountpoint, mount.source
        owner = owner_of_name(point, MOUNT_PREFIX)
        if owner is None and source in loops:
            owner = owner_of_name(loops[source], FILE_PREFIX)
        if owner is not None:
            found.append({"mountpoint": point, "device": source, "owner": owner})
    return found


def undo_stale_mount(mountpoint: str, details: dict, *, dry_run: bool) -> str | None:
    """Unmount (lazily if it stays busy) and remove an iolab mount point whose owner is gone."""
    mounted = [m for m in mounts() if m["mountpoint"] == mountpoint]
    device = details.get("device")
    if mounted and device and mounted[0]["device"] != device:
        log.info("%s is now a mount of %s, not %s: not ours any more", mountpoint, mounted[0]["device"], device)
        return None
    if not mounted and not os.path.isdir(mountpoint):
        return None
    if dry_run:
        return f"would unmount {mountpoint}" if mounted else f"would remove mount point {mountpoint}"
    if mounted:
        _umount(mountpoint)
    _rmdir(mountpoint)
    return f"unmounted {mountpoint}" if mounted else f"removed mount point {mountpoint}"


def undo_stale_file(path: str, details: dict, *, dry_run: bool) -> str | None:
    """Delete a backing file whose owner is gone (if it is still the file that was recorded)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if details.get("inode") is not None and st.st_ino != details["inode"]:
        log.info("%s is another file now (inode %d, recorded %s)", path, st.st_ino, details["inode"])
        return None
    if dry_run:
        return f"would remove backing file {path} ({human_size(st.st_blocks * 512)} on disk)"
    os.unlink(path)
    return f"removed backing file {path}"


def stale_backing_files(directories=("/var/tmp",)) -> list[dict]:
    """iolab backing files in ``directories`` (their names carry the owner's PID)."""
    found = []
    for directory in directories:
        for path in sorted(Path(directory).glob(f"{FILE_PREFIX}*.img")):
            owner = owner_of_name(str(path), FILE_PREFIX)
            if owner is not None:
                found.append({"path": str(path), "owner": owner})
    return found
