"""Locked memory for io_uring's registered buffers (fixedbufs): how much fio may lock, and whether it keeps
CAP_IPC_LOCK in its confinement.

Under bubblewrap, which drops every capability, the kernel counts registered buffers against RLIMIT_MEMLOCK and
fails a job past it with ENOMEM (crystaldiskmark's SEQ1M-Q8T1 registers 8 MiB). As root, a run whose recipe
registers buffers keeps CAP_IPC_LOCK alone (:func:`confinement_for`), where its job files, read as fio reads
them, lock within iolab's own bound (:func:`unbounded_locking`); otherwise fio stays under RLIMIT_MEMLOCK, raised
to its hard limit for the run (:func:`raised`). :func:`fio_memlock_limit` is what deciding a run's
options (:func:`iolab.engine.ioengines.choose`) counts on.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import resource
from pathlib import Path

from iolab.core.errors import IolabError
from iolab.core.units import parse_size
from iolab.engine.jobfile import reader as jobreader

log = logging.getLogger(__name__)

#: the share of RLIMIT_MEMLOCK a test's fixed buffers may take (the rest: fio's alignment, other io_uring users)
MEMLOCK_SHARE = 0.5


#: CAP_SYS_RESOURCE's bit in /proc/self/status's CapEff (capability(7)): lets a process raise a hard limit
CAP_SYS_RESOURCE = 24


def _may_lift_hard_limits() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


#: What a run's io_uring buffers may pin, per test, when fio keeps CAP_IPC_LOCK (root): the kernel then counts
#: none of them against RLIMIT_MEMLOCK, so iolab bounds them itself; a recipe asking more goes without fixedbufs
PIN_LIMIT = 256 * 2**20


def fio_memlock_limit() -> int:
    """The locked memory fio may use for registered buffers: as root, :data:`PIN_LIMIT` (a run that registers
    buffers keeps CAP_IPC_LOCK in its confinement, :func:`pins_buffers`); otherwise :func:`fio_rlimit_memlock`.
    Read only: deciding a run's options changes nothing in this process (a dry run, a notebook's kernel)."""
    return PIN_LIMIT if os.geteuid() == 0 else fio_rlimit_memlock()


def fio_rlimit_memlock() -> int:
    """The RLIMIT_MEMLOCK fio will run under (:func:`raised` sets it for the run): unlimited where this
    process may lift hard limits (CAP_SYS_RESOURCE), else the hard limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return resource.RLIM_INFINITY if _may_lift_hard_limits() else hard


def pins_buffers(decision: dict | None) -> bool:
    """Whether a run's engine decision (the manifest's ``ioengine``) registers io_uring buffers on some test
    (``fixedbufs_tests``, :func:`iolab.engine.ioengines.choose`). Only then does fio keep CAP_IPC_LOCK, and
    only as root (a plain job file's own fixedbufs stay under RLIMIT_MEMLOCK)."""
    return bool((decision or {}).get("fixedbufs_tests"))


@contextlib.contextmanager
def raised():
    """For a run's duration: this process's RLIMIT_MEMLOCK, which fio inherits, raised to what
    :func:`fio_rlimit_memlock` said, so io_uring's fixed buffers (which bubblewrap's dropped CAP_IPC_LOCK counts
    against it) fit where the run's options expected them to; restored afterwards. A limit that cannot be
    raised stays as it is. (Not a ``preexec_fn`` in fio's spawn: a Ctrl-C landing in Python's at-fork hooks
    is dropped, see :func:`iolab.engine.fio.start`.)"""
    before = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    wanted = fio_rlimit_memlock()
    changed = False
    if wanted != before[0]:
        try:
            hard = wanted if wanted == resource.RLIM_INFINITY else before[1]
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (wanted, hard))
            changed = True
            log.info("RLIMIT_MEMLOCK raised from %d bytes to %s for fio's fixed buffers", before[0],
                     "unlimited" if wanted == resource.RLIM_INFINITY else f"{wanted} bytes")
        except (OSError, ValueError) as exc:
            log.info("RLIMIT_MEMLOCK stays %d bytes: %s", before[0], exc)
    try:
        yield
    finally:
        if changed:
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_MEMLOCK, before)


def registers_buffers(value) -> bool:
    """Whether an option value of ``fixedbufs`` registers buffers, as fio reads it (a recipe may say 1, true)."""
    return str(value).strip().lower() not in ("", "0", "false", "none")


_SIZE = re.compile(r"\d+(?:\.\d+)?\s*[kmgtp]?i?b?", re.I)


def pinned_bytes(options, context: str) -> int:
    """The bytes one job's registered buffers pin, from its options as fio keeps them (the last value of each):
    iodepth x numjobs x its largest block size (bs, bsrange, bssplit; 4 KiB by default, fio's). The one rule for
    the recipe's tests (:func:`iolab.engine.ioengines.choose`) and for the written job files
    (:func:`unbounded_locking`)."""
    sizes = [parse_size(token, context=context) for key in ("bs", "bsrange", "bssplit")
             for token in _SIZE.findall(str(options.get(key, "")))] or [4096]
    try:
        return int(options.get("iodepth", 1)) * int(options.get("numjobs", 1)) * max(sizes)
    except ValueError as exc:
        raise IolabError(f"iodepth or numjobs is not a number ({exc})", context=context) from exc


def fits(pinned: int, limit: int) -> bool:
    """Whether ``pinned`` bytes of buffers stay within :data:`MEMLOCK_SHARE` of the locked memory ``limit``."""
    return limit == resource.RLIM_INFINITY or pinned <= limit * MEMLOCK_SHARE


#: fio options that lock memory beyond registered buffers, unbounded with CAP_IPC_LOCK: ``lockmem`` (mlock) and
#: System V huge pages (``iomem=shmhuge`` needs CAP_IPC_LOCK or the hugetlb group)
_LOCKING = {"lockmem": lambda v: v.strip() not in ("", "0"), "mem": lambda v: v.strip().startswith("shmhuge")}


def unbounded_locking(paths) -> str | None:
    """Why fio may not keep CAP_IPC_LOCK for these job files, read as fio reads them (None: it may): a job locks
    memory by other means (:data:`_LOCKING`), or a job registering buffers (``fixedbufs``) pins more than
    :data:`MEMLOCK_SHARE` of :data:`PIN_LIMIT` (:func:`pinned_bytes`). The job files decide, not the recipe: a
    test's or the recipe's own options count too."""
    for path in paths:
        try:
            jobs = jobreader.job_options(Path(path).read_text(), str(path))
        except (IolabError, OSError) as exc:
            return f"{path}: not readable as fio reads it ({exc})"
        for name, options in jobs.items():
            last = {key: str(value) for key, value in options}
            for option, locks in _LOCKING.items():
                if option in last and locks(last[option]):
                    return f"{path}: job {name} locks memory itself ({option}={last[option]})"
            if not registers_buffers(last.get("fixedbufs", "0")):
                continue
            try:
                pinned = pinned_bytes(last, f"{path}: {name}")
            except IolabError as exc:
                return f"{path}: job {name}'s buffers cannot be sized ({exc})"
            if not fits(pinned, PIN_LIMIT):
                return f"{path}: job {name} would pin {pinned} bytes of buffers, more than {int(PIN_LIMIT * MEMLOCK_SHARE)}"
    return None


def confinement_for(confinement, decision: dict | None, jobs) -> tuple:
    """``(confinement, refused)`` for a run's written job files ``jobs`` (paths): the confinement keeping
    CAP_IPC_LOCK where the run is root, its decision registers buffers (:func:`pins_buffers`) and the files lock
    within the bound (:func:`unbounded_locking`); else the confinement as it is, and ``refused`` the reason when
    the files were the obstacle (None otherwise)."""
    if confinement is None or os.geteuid() != 0 or not pins_buffers(decision):
        return confinement, None
    refused = unbounded_locking(jobs)
    if refused:
        log.warning("fio keeps no CAP_IPC_LOCK: %s; its registered buffers count against RLIMIT_MEMLOCK", refused)
        return confinement, refused
    return dataclasses.replace(confinement, lock_memory=True), None
