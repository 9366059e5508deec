"""What ``--target`` names: a directory, a file, a block device or ``emulated:NAME``.

:func:`resolve` checks the target before anything runs (exists, enough free
space, a block device allowed by the safety rules) and :class:`Target` knows
which path fio gets and what iolab must clean up afterwards.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import stat
from pathlib import Path

from iolab.devices import health
from iolab.engine import sysinfo, workdirs
from iolab.core import files
from iolab.core.errors import IolabError
from iolab.core.units import human_size

log = logging.getLogger(__name__)

EMULATED_PREFIX = "emulated:"
#: Space left free beyond the test file (1 MiB + 1%), so a test never fills a file system.
def free_space_margin(needed: int) -> int:
    return 1024**2 + needed // 100


@dataclasses.dataclass
class Target:
    spec: str                    # what the user wrote
    kind: str                    # dir | file | block | emulated
    path: str | None = None      # directory, file or device; for emulated set on open()
    name: str = ""               # short name used in file names and results
    test_file: str | None = None  # the file fio uses (None: fio gets the device)
    created_file: bool = False   # test_file is iolab's own (in run_dir, removed with it)
    #: the directory iolab made in a directory target (or an emulated device's file system) for this
    #: run's files -- the only place there it writes and removes (iolab.engine.workdirs); None for a
    #: file or block target (fio gets that file or device itself)
    run_dir: str | None = None
    emulated: object = None      # the open emulated device (iolab.devices.emulated)
    writes: bool = False         # the recipe writes to it
    confirm: str | None = None   # --confirm given for a block device
    #: probe an emulated device's declared limits when it is made (iolab.devices.ceilingprobe); False skips it
    probe_ceiling: bool = True

    @property
    def filename(self) -> str:
        """What fio's ``filename=`` gets."""
        return self.test_file or self.path

    def describe(self, *, keep_serials: bool = False) -> dict:
        """The target for the manifest; ``drives``: what serves it (:mod:`iolab.devices.health`), serials hashed."""
        info = {"spec": self.spec, "kind": self.kind, "name": self.name, "path": self.path,
                "test_file": self.test_file, "run_dir": self.run_dir}
        where = self.test_file if self.test_file and os.path.exists(self.test_file) else self.path
        # a raw block device has no file system of its own here (findmnt would name /dev's devtmpfs)
        if where and os.path.exists(where) and not stat.S_ISBLK(os.stat(where).st_mode):
            info.update(sysinfo.mount_of(where))
        info["device"] = _provenance(self.path) if self.path else None
        info["emulated"] = self.emulated.describe() if self.emulated is not None else None
        info["drives"] = health.describe(self.path, keep_serials=keep_serials) if self.path else []
        return health.hide_serials(info, keep=keep_serials)


def _provenance(path: str) -> dict | None:
    try:
        from iolab.devices.provenance import device_provenance
    except ImportError:  # devices support not built into this checkout
        return None
    try:
        return device_provenance(path)
    except IolabError as exc:
        log.warning("no device provenance for %s: %s", path, exc)
        return {"error": str(exc)}


def _name(spec: str, used: set) -> str:
    base = spec[len(EMULATED_PREFIX):] if spec.startswith(EMULATED_PREFIX) else (Path(spec).name or "root")
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in base) or "target"
    name, n = base, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    used.add(name)
    return name


def resolve(specs: list[str], *, size: int, writes: bool, confirm: str | None = None,
            device_size: int | None = None, probe_ceiling: bool = True) -> list[Target]:
    """Check every ``--target`` and describe it; raises :class:`IolabError` naming it. A block device must hold
    ``device_size`` (default ``size``; less where the recipe writes the device's own capacity); so must a regular
    file, whose file system needs free space for what it grows by (an empty one: to ``size``). ``probe_ceiling``:
    whether an emulated device is probed when it is made (``--no-ceiling-probe``: False)."""
    if not specs:
        raise IolabError("no target given", context="--target", hint="e.g. --target /mnt/scratch")
    targets, used = [], set()
    shared: dict[int, list] = {}  # file system (st_dev) -> [(directory, bytes needed, spec)]
    for spec in specs:
        if not isinstance(spec, str) or not spec.strip():
            raise IolabError("empty target: name a directory, file, block device or emulated:NAME",
                             context=f"--target {spec!r}")
        name = _name(spec, used)
        if spec.startswith(EMULATED_PREFIX):
            profile = spec[len(EMULATED_PREFIX):]
            if not profile:
                raise IolabError("name a profile, e.g. emulated:hdd", context=f"--target {spec}")
            if os.geteuid() != 0:
                raise IolabError("emulated devices need root (loop devices and block cgroups)", context=f"--target {spec}")
            targets.append(Target(spec=spec, kind="emulated", name=name, probe_ceiling=probe_ceiling))
            continue
        path = Path(spec)
        if not path.exists():
            raise IolabError("no such file or directory", context=f"--target {spec}")
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            _check_space(path, size, spec)
            shared.setdefault(path.stat().st_dev, []).append((path, size, spec))
            targets.append(Target(spec=spec, kind="dir", path=str(path.resolve()), name=name))
        elif stat.S_ISBLK(mode):
            if writes:
                from iolab.devices.safety import check_writable
                check_writable(str(path), confirm=confirm)
            _check_device_size(path, size if device_size is None else device_size, spec)
            targets.append(Target(spec=spec, kind="block", path=str(path.resolve()), name=name,
                                  writes=writes, confirm=confirm))
        elif stat.S_ISREG(mode):
            current = path.stat().st_size
            # a file is its target's capacity as a device is (device_size); an empty one stands for the test area
            grows_to = size if device_size is None or current == 0 else device_size
            missing = max(0, grows_to - current)
            if missing:
                _check_space(path.parent, missing, spec)
                shared.setdefault(path.stat().st_dev, []).append((path.parent, missing, spec))
            targets.append(Target(spec=spec, kind="file", path=str(path.resolve()), name=name,
                                  test_file=str(path.resolve())))
        else:
            raise IolabError("not a directory, regular file or block device", context=f"--target {spec}")
    for group in shared.values():  # two targets on one file system share its free space
        if len(group) > 1:
            _check_space(group[0][0], sum(needed for _, needed, _ in group),
                         " and ".join(spec for _, _, spec in group) + " (one file system)")
    return targets


def _check_device_size(path: Path, needed: int, spec: str) -> None:
    size = files.size_of(path)
    if size < needed:
        raise IolabError(f"the device holds {human_size(size)}, the test needs {human_size(needed)}",
                         context=f"--target {spec}", hint="use a smaller --size")


def _check_space(directory: Path, needed: int, spec: str) -> None:
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    margin = free_space_margin(needed)
    if free < needed + margin:
        raise IolabError(
            f"not enough free space: the test needs {human_size(needed)} (+{human_size(margin)} margin), "
            f"{human_size(free)} free", context=f"--target {spec}", hint="use a smaller --size or another target")


#: the name of iolab's test file in the run's directory
TEST_FILE = "test.dat"


@contextlib.contextmanager
def opened(target: Target, *, run_id: str, size: int, filesystem: str | None, scratch_dir: str):
    """Make the target usable for a run and undo it all afterwards, also on errors and Ctrl-C.

    An emulated device is made (and removed); a directory target, and an emulated
    device's file system, get the run's own directory ``iolab-<run_id>``
    (:mod:`iolab.engine.workdirs`: exclusive, private, removed through its
    descriptor with everything in it) holding the test file; a written block
    device is held with ``O_EXCL``.
    """
    with contextlib.ExitStack() as stack:
        if target.kind == "emulated":
            from iolab.devices.emulated import emulated_device
            profile = target.spec[len(EMULATED_PREFIX):]
            # room for the file system's own metadata around the test file
            device_size = size + max(size // 4, 128 * 1024**2) if filesystem else size
            device = stack.enter_context(emulated_device(profile, size=device_size, scratch_dir=scratch_dir,
                                                         filesystem=filesystem, probe=target.probe_ceiling))
            target.emulated = device
            target.path = device.target
            if device.mountpoint:
                _use_run_dir(stack, target, device.mountpoint, run_id)
        elif target.kind == "dir":
            _use_run_dir(stack, target, target.path, run_id)
            target.created_file = True
        elif target.kind == "block" and target.writes:
            from iolab.devices.safety import check_writable, open_exclusive
            # checked again right before acting, and held with O_EXCL so nobody
            # mounts or claims the device while fio writes to it
            check_writable(target.path, confirm=target.confirm)
            stack.enter_context(open_exclusive(target.path))
        yield target


def _use_run_dir(stack: contextlib.ExitStack, target: Target, parent: str, run_id: str) -> None:
    made = stack.enter_context(workdirs.work_dir(parent, f"{workdirs.PREFIX}{run_id}"))
    target.run_dir = made.path
    target.test_file = os.path.join(made.path, TEST_FILE)


@contextlib.contextmanager
def held_exclusively(devices: list[str], *, confirm=None):
    """Block devices a job writes besides the targets (``--allow-path``), checked again right before
    the run acts and held with ``O_EXCL`` while it runs, as a written block target is: nobody mounts
    or claims them meanwhile."""
    from iolab.devices.safety import check_writable, open_exclusive
    with contextlib.ExitStack() as stack:
        for device in devices:
            check_writable(device, confirm=confirm)
            stack.enter_context(open_exclusive(device))
            log.info("holding %s with O_EXCL while the run writes it (--allow-path)", device)
        yield
