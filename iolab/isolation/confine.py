"""Kernel confinement: a process iolab starts for a run reaches only what the user named.

The job gate (:mod:`iolab.engine.jobfile.gate`) reads job files to *explain* what a
run will touch; it cannot be trusted to predict fio, whose job-file grammar it
re-reads. The boundary itself is enforced by the kernel: every process iolab
starts to do I/O for a run (fio, the direct-I/O worker, bonnie++, hdparm, fio
servers) runs under bubblewrap (``bwrap``, Debian's ``bubblewrap``, the sandbox
Flatpak uses) in a private mount namespace where

* ``/`` is the machine's root, bound **read-only** (every sub-mount too);
* the only writable places are the paths given as ``writable`` (the run's own
  directory inside each target, a file target, the run's ``raw/`` directory,
  ``--allow-path`` paths);
* ``/dev`` is a fresh tmpfs holding only ``null``, ``zero``, ``random``,
  ``urandom`` and the block devices given as ``devices``, then remounted
  read-only: a device name nobody named does not exist there (``ENOENT``), it
  can never silently become a file in RAM;
* a new PID namespace (``/proc`` of its own), IPC namespace and, unless the
  process serves a TCP port, network namespace;
* no capabilities at all (``--cap-drop ALL``: no remount, no leaving, no raw
  I/O ioctls; a run whose recipe registers io_uring buffers keeps CAP_IPC_LOCK alone, which lets it lock
  memory and nothing else, where its job files stay within iolab's own bound:
  :func:`iolab.engine.memlock.unbounded_locking`), ``no_new_privs`` (bwrap always sets it), its own session
  (``--new-session``: no terminal injection), and it dies with its parent
  (``--die-with-parent``: a ``kill -9`` of iolab takes fio with it).

What a hostile job file can do at worst is fail its own test with fio's own
error (``err=30 Read-only file system``, ``ENOENT``).

Side effects of having no capabilities, handled by the callers: fio cannot
invalidate a block device's page cache (``BLKFLSBUF``: "cache invalidation of
/dev/X failed: Permission denied", a line before the JSON): iolab drops caches
itself. Cgroups (memory limit, block throttles) are entered by the outer
``bwrap`` process before it execs and are inherited; huge pages are anonymous
(``MAP_HUGETLB``) and need no file system.

Signals: the confined command is a grandchild of the ``bwrap`` iolab started
(``bwrap`` -> ``bwrap`` as PID 1 of the namespace -> the command), and bwrap
forwards none. :class:`ConfinedProcess` sends a signal other than SIGKILL to
the command and its descendants, as a terminal's Ctrl-C would, so fio still
stops on SIGINT and writes its JSON; SIGKILL goes to ``bwrap``, whose death
kills everything inside. The outer ``bwrap`` runs in a process group of its
own so a terminal's Ctrl-C reaches iolab only (which then stops fio as above)
and not ``bwrap`` (whose death would kill fio before it writes its results).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
import signal
import stat
import subprocess
from typing import Iterable

from iolab.core.errors import IolabError
from iolab.core.procstat import children, descendants

log = logging.getLogger(__name__)

#: The device nodes every confined process gets besides its block devices.
BASE_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
#: The one capability a confined process may keep (:attr:`Confinement.lock_memory`).
LOCK_MEMORY = "CAP_IPC_LOCK"
#: How to get bubblewrap where it is missing.
INSTALL_HINT = "install it with: apt-get install bubblewrap"


def bwrap_binary() -> str | None:
    """bubblewrap's path, or None when it is not installed (looked up in /usr/bin too, for any PATH)."""
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin")


@dataclasses.dataclass(frozen=True)
class Confinement:
    """What a confined process may reach: ``writable`` paths and block ``devices``.

    Every path must exist when the process starts (a bind mount needs its
    source). ``network`` keeps the host's network namespace (a fio server on
    TCP); everything else always gets a private one.
    """

    writable: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    network: bool = False
    #: keep CAP_IPC_LOCK (and only it): io_uring's registered buffers, which the kernel counts against
    #: RLIMIT_MEMLOCK for a process without it; memory only, no device or file is reached through it
    lock_memory: bool = False

    def __post_init__(self):
        object.__setattr__(self, "writable", tuple(dict.fromkeys(os.path.abspath(p) for p in self.writable)))
        object.__setattr__(self, "devices", tuple(dict.fromkeys(os.path.abspath(p) for p in self.devices)))

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` confined (raises when bubblewrap cannot run here)."""
        reason = unavailable()
        if reason:
            raise IolabError(f"cannot confine {os.path.basename(str(argv[0]))}: {reason}", context="confinement")
        return [bwrap_binary(), *self.arguments(), "--", *map(str, argv)]

    def arguments(self) -> list[str]:
        """bwrap's options for this confinement (without the command)."""
        args = ["--ro-bind", "/", "/", "--tmpfs", "/dev"]
        for device in BASE_DEVICES:
            args += ["--dev-bind", device, device]
        for device in self.devices:
            for source, name in _device_names(device):
                args += ["--dev-bind", source, name]
        args += ["--remount-ro", "/dev"]
        for path in self.writable:
            _check_writable_source(path)
            args += ["--bind", path, path]
        args += ["--proc", "/proc", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not self.network:
            args.append("--unshare-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.lock_memory:
            args += ["--cap-add", LOCK_MEMORY]
        return args

    def describe(self) -> dict:
        """For the manifest: confined, by what, and what was reachable."""
        return {"confined": True, "tool": version(), "writable": list(self.writable),
                "devices": list(self.devices), "network": self.network,
                **({"capabilities": [LOCK_MEMORY]} if self.lock_memory else {})}


def _device_names(device: str) -> list[tuple[str, str]]:
    """(source, name in the sandbox) for a block device: its real node, and the name the user gave
    when that is another name under /dev (``/dev/disk/by-id/...``), so both open the same device."""
    real = os.path.realpath(device)
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise IolabError(f"cannot confine a run to it: {exc.strerror}", context=device) from None
    if not stat.S_ISBLK(mode):
        raise IolabError("not a block device: a confined run binds only block devices as devices",
                         context=device)
    names = [(real, real)]
    if device != real and device.startswith("/dev/"):
        names.append((real, device))
    return names


def _check_writable_source(path: str) -> None:
    if not os.path.lexists(path):
        raise IolabError("does not exist: a confined run can be given only existing places to write",
                         context=path)
    if os.path.islink(path):
        # bwrap would bind what the link points to; the user named the link: refuse rather than guess
        raise IolabError("is a symbolic link: name the place it points to", context=path)


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why confinement cannot be had on this machine, or None when a real probe worked.

    The probe runs ``true`` under exactly the confinement runs get (with no
    writable path and no device), so a kernel without user or mount namespaces
    for this user, a seccomp profile that forbids them, or a missing bwrap is
    found before a run starts, with bwrap's own words.
    """
    binary = bwrap_binary()
    if binary is None:
        return f"bubblewrap (bwrap) is not installed ({INSTALL_HINT})"
    argv = [binary, *Confinement().arguments(), "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be run: {exc}"
    if proc.returncode != 0:
        words = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return f"bwrap cannot make a sandbox here: {words}"
    return None


def reader_argv(argv: list[str]) -> list[str]:
    """``argv`` confined with nothing writable, no device and no network where bubblewrap can run
    here, else ``argv`` as it is: for a command that only reads (fio parsing or showing a job file,
    whose includes and external ioengine it loads), not for one that does a run's I/O."""
    if unavailable() is None:
        return Confinement().wrap(argv)
    return list(argv)


def decide(unconfined: bool = False) -> str | None:
    """Whether a run's processes will be confined, decided once, before its run directory exists.

    None: they will be (bubblewrap works here; ``--unconfined`` changes nothing
    then). Where bubblewrap cannot run, the run is refused with the reason and
    the way out, unless ``unconfined`` (``--unconfined``): then the reason it
    runs unconfined, for :func:`for_run` and the manifest.
    """
    reason = unavailable()
    if reason is None:
        return None
    if not unconfined:
        raise IolabError(f"the run's processes cannot be confined to the targets here: {reason}",
                         context="confinement", hint="pass --unconfined to run without the kernel's boundary "
                                                     "(the manifest and the report will say so)")
    log.warning("running UNCONFINED (--unconfined): %s", reason)
    return reason


@functools.lru_cache(maxsize=1)
def version() -> str:
    binary = bwrap_binary()
    if binary is None:
        return "bubblewrap (missing)"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return out
    return "bubblewrap"


def for_run(targets: Iterable, *, raw_dir: str, allowed_paths: Iterable[str] = (),
            unconfined_reason: str | None = None,
            allowed_split: tuple[list[str], list[str]] | None = None) -> tuple[Confinement | None, dict]:
    """A run's confinement and its manifest entry: the opened targets (:func:`for_targets`), the run's
    ``raw/`` directory (fio's working directory) and ``--allow-path`` (:func:`allowed`; or
    ``allowed_split``, its answer when the run already asked it before the run directory existed).

    ``unconfined_reason`` is :func:`decide`'s answer, made when the run started:
    when it is set the run goes unconfined, ``(None, {"confined": False, "reason": ...})``.
    """
    if unconfined_reason:
        return None, {"confined": False, "reason": f"--unconfined: {unconfined_reason}"}
    places, nodes = allowed_split if allowed_split is not None else allowed(allowed_paths)
    confinement = for_targets(targets, writable=[raw_dir, *places], devices=nodes)
    return confinement, confinement.describe()


def confined_pids(outer: int) -> list[int]:
    """The confined command and its descendants (host PIDs), below bwrap and bwrap's PID 1."""
    return [pid for init in children(outer) for pid in descendants(init)]


class ConfinedProcess(subprocess.Popen):
    """A :class:`subprocess.Popen` of ``bwrap ... -- COMMAND`` whose signals reach COMMAND.

    ``send_signal(SIGINT)`` (the watchdog's or iolab's stop) goes to the
    command and its descendants, as a terminal's Ctrl-C would; ``kill()`` and
    SIGKILL go to bwrap, which takes everything inside with it. The command's
    death by a signal comes back as a negative return code, as from a direct child.
    """

    def send_signal(self, sig):
        if sig == signal.SIGKILL or self.poll() is not None:
            return super().send_signal(sig)
        for pid in confined_pids(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    # bwrap exits with 128 + N when the command died of signal N: given back as Popen's -N, as if the
    # command had been started directly ("fio killed by SIGKILL", not "fio exited with 137")
    def poll(self):
        return self._as_signal(super().poll())

    def wait(self, timeout=None):
        return self._as_signal(super().wait(timeout))

    def _as_signal(self, code):
        if code is not None and 128 < code < 128 + signal.NSIG:
            self.returncode = code = -(code - 128)
        return code


def popen_kwargs() -> dict:
    """Keyword arguments for starting ``bwrap``: its own process group (see the module's docstring)."""
    return {"process_group": 0}


def for_targets(targets: Iterable, *, writable: Iterable[str] = (), devices: Iterable[str] = ()) -> Confinement:
    """The confinement of a run on ``targets`` (:class:`iolab.engine.targets.Target`), opened.

    A directory target gives the directory iolab made for the run in it
    (``run_dir``) or, where it has none, the target directory; a file target
    the file; a block target its device; an emulated target its device and
    the run's directory on its file system.
    """
    places, nodes = list(writable), list(devices)
    for target in targets:
        run_dir = getattr(target, "run_dir", None)
        if target.kind == "block":
            nodes.append(target.path)
        elif target.kind == "file":
            places.append(target.path)
        elif target.kind == "dir":
            places.append(run_dir or target.path)
        elif target.kind == "emulated":  # its device, or the run's place on its file system
            if target.path and _is_block(target.path):
                nodes.append(target.path)
            elif run_dir or target.test_file:
                places.append(run_dir or os.path.dirname(target.test_file))
    return Confinement(writable=tuple(places), devices=tuple(nodes))


def allowed(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """``--allow-path`` paths split into (writable places, devices): a block device is bound as a
    device, anything else as the place itself. A path that does not exist is refused: binding its
    directory instead would let the run write everything beside it, which the user did not allow."""
    places, nodes = [], []
    for path in paths:
        if _is_block(path):
            nodes.append(path)
        elif os.path.lexists(path):
            places.append(path)
        else:
            raise IolabError("--allow-path names a path that does not exist: a confined run can be let write "
                             "only an existing file, directory or device, not the directory around a new one",
                             context=path,
                             hint=f"allow its directory on purpose (--allow-path {os.path.dirname(os.path.abspath(path))}), "
                                  f"or create it first (a job writing an existing file also needs --confirm {path})")
    return places, nodes


def _is_block(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False
