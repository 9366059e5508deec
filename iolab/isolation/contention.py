"""Contention during one test, measured: the CPU the measuring processes got, the machine's load
and steal time, and the I/O other processes sent to the test's device.

A figure can be starved by other processes on a busy host, or share its device with another
writer; neither shows in fio's own numbers. :class:`Probe` watches one test::

    probe = Probe(device, sandbox)                     # before the test
    proc = probe.watching(sandbox.popen)(argv)         # the measured process, sampled while it runs
    proc.wait()
    figures = probe.finish()                           # after it: the columns below

Columns (:func:`annotate` puts them in the test's rows):

``cpu_s``, ``cpu_wait_s``
    CPU time the measured processes (fio and its job processes: the sandbox's cgroup's tasks,
    else the process tree) ran, and time they were runnable but waited for a CPU
    (``/proc/<tid>/schedstat``: on-CPU ns, run-queue ns), sampled every :data:`SAMPLE_S`.
``cpu_pct``
    their CPU time against the test's wall time (100: one core's worth).
``cpu_want_pct``
    the time they wanted a CPU (ran or waited for one) against the wall time: a test that
    mostly waits for its device barely wants one, so a busy host does not starve it.
``cpu_got_pct``
    of the time they wanted a CPU, the share they had one: 100 on an idle host, about 50 beside
    one busy loop per core.
``host_busy_pct``, ``steal_pct``, ``load_1m``
    the machine's CPU use and the time a hypervisor gave to others (``/proc/stat`` deltas over
    the test, all CPUs), and the one-minute load average at its end.
``dev_foreign_bytes`` (``dev_foreign_read_bytes``, ``dev_foreign_write_bytes``)
    bytes the test's disk moved (``/sys/block/<disk>/stat``) beyond what the run's own cgroup did
    (v1 ``blkio.throttle.io_service_bytes``, v2 ``io.stat``); None without a block cgroup to count the
    run's own I/O. Under cgroup v1 buffered writes are written back outside every group
    (``v1_writeback``), at any time after: in a run with buffered tests the foreign writes cannot be
    told from the run's own, and only reads count.

The flag ``contended`` marks a test starved (it wanted a CPU at least :data:`CPU_WANT_PCT` of its
time and got one at most :data:`STARVED_GOT_PCT` of that), on a host whose
hypervisor took :data:`STEAL_PCT`, or sharing its device (:data:`FOREIGN_MIN_BYTES` and
:data:`FOREIGN_SHARE` of its own bytes).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from iolab.core import procstat

log = logging.getLogger(__name__)

#: how often the measured processes' scheduler counters are read
SAMPLE_S = 0.1
#: starved: the measured processes wanted a CPU at least this share of the test's wall time ...
CPU_WANT_PCT = 50.0
#: ... and had one at most this share of the time they wanted one
STARVED_GOT_PCT = 75.0
#: the hypervisor gave this share of the CPUs' time to other guests
STEAL_PCT = 10.0
#: shared device: other processes moved at least this much and this share of the test's own bytes
FOREIGN_MIN_BYTES = 4 * 1024**2
FOREIGN_SHARE = 0.05
#: without a cgroup listing the run's tasks, the process tree is found from all of /proc at most this rarely
RESCAN_MAX_S = 2.0
SECTOR = 512
COLUMNS = ("cpu_s", "cpu_wait_s", "cpu_pct", "cpu_want_pct", "cpu_got_pct", "host_busy_pct", "steal_pct", "load_1m",
           "dev_foreign_read_bytes", "dev_foreign_write_bytes", "dev_foreign_bytes")


def _text(path) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def cpu_times(proc: Path = Path("/proc")) -> list[int]:
    """The machine's ``cpu`` line of ``/proc/stat``: user nice system idle iowait irq softirq steal ..."""
    text = _text(proc / "stat") or ""
    first = text.splitlines()[0].split() if text else []
    return [int(x) for x in first[1:]] if first[:1] == ["cpu"] else []


def _schedstat(tid: int) -> tuple[int, int] | None:
    text = _text(f"/proc/{tid}/schedstat")
    fields = text.split() if text else []
    return (int(fields[0]), int(fields[1])) if len(fields) >= 2 else None


def _threads(pids: set[int]) -> set[int]:
    tids = set()
    for pid in pids:
        try:
            tids.update(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return tids


class _Sampler:
    """The latest (on-CPU ns, run-queue ns) of every task seen, read each :data:`SAMPLE_S`."""

    def __init__(self, root: int, tasks_file: Path | None):
        self.root, self.tasks_file = root, tasks_file
        self.latest: dict[int, tuple[int, int]] = {}
        self._pids, self._next_scan, self._scan_every = {root}, 0.0, SAMPLE_S / 2
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iolab-contention", daemon=True)
        self._thread.start()

    def _tasks(self) -> set[int]:
        if self.tasks_file is not None:
            text = _text(self.tasks_file)
            if text is not None:
                return {int(t) for t in text.split()}
        now = time.monotonic()
        if now >= self._next_scan:  # the whole /proc (~3 ms of CPU): often at first, when fio forks, then rarely
            self._pids = {self.root, *procstat.descendants(self.root)}
            self._scan_every = min(2 * self._scan_every, RESCAN_MAX_S)
            self._next_scan = now + self._scan_every
        return _threads(self._pids)

    def sample(self) -> None:
        for tid in self._tasks():
            got = _schedstat(tid)
            if got is not None:
                self.latest[tid] = got

    def _loop(self) -> None:
        while not self._stop.is_set():
            seen = len(self.latest)
            self.sample()
            if seen and len(self.latest) == seen and not self._tasks():
                return  # everything it watched has ended (also when the caller never calls stop)
            self._stop.wait(SAMPLE_S)

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        return (sum(c for c, _ in self.latest.values()) / 1e9, sum(w for _, w in self.latest.values()) / 1e9)


def _io_group(sandbox):
    """The run's group that counts its block I/O (with its version and directory), else None."""
    for group in (getattr(sandbox, "io_group", None), getattr(sandbox, "group", None)):
        if group is not None and "io" in group.dirs:
            return group.dirs["io"]
    return None


def _group_bytes(where, devnum: str | None) -> tuple[int, int] | None:
    """(read, write) bytes the group's tasks sent to ``devnum``."""
    if where is None or devnum is None:
        return None
    version, directory = where
    if version == "v1":
        text = _text(Path(directory) / "blkio.throttle.io_service_bytes")
        if text is None:
            return None
        got = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == devnum and parts[1] in ("Read", "Write"):
                got[parts[1]] = int(parts[2])
        return got.get("Read", 0), got.get("Write", 0)
    text = _text(Path(directory) / "io.stat")
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == [devnum]:
            keyed = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            return int(keyed.get("rbytes", 0)), int(keyed.get("wbytes", 0))
    return 0, 0


def _tasks_file(sandbox) -> Path | None:
    for group in (getattr(sandbox, "group", None), getattr(sandbox, "io_group", None)):
        if group is not None and group.dirs:
            version, directory = next(iter(group.dirs.values()))
            return Path(directory) / ("tasks" if version == "v1" else "cgroup.threads")
    return None


class Probe:
    """Contention around one measured process (see the module docstring); ``device`` is the
    :class:`iolab.isolation.blockstat.BlockDevice` serving the test (None: no block device)."""

    def __init__(self, device, sandbox):
        self.sandbox = sandbox
        self.disk = Path(device.disk_sysfs) if device is not None else None
        self.devnum = (_text(self.disk / "dev") or "").strip() or None if self.disk is not None else None
        self.where = _io_group(sandbox)
        self.sampler: _Sampler | None = None
        self.started = time.monotonic()
        self.cpu0 = cpu_times()
        self.disk0 = self._disk()
        self.group0 = _group_bytes(self.where, self.devnum)

    def _disk(self) -> tuple[int, int] | None:
        text = _text(self.disk / "stat") if self.disk is not None else None
        fields = text.split() if text else []
        return (int(fields[2]) * SECTOR, int(fields[6]) * SECTOR) if len(fields) >= 7 else None

    def watching(self, popen):
        """``popen`` that also samples the scheduler counters of what it starts."""
        def started(*args, **kwargs):
            proc = popen(*args, **kwargs)
            try:
                self.sampler = _Sampler(proc.pid, _tasks_file(self.sandbox))
            except RuntimeError as exc:  # no thread to be had: the figures stay unknown
                log.warning("cannot watch the CPU of %s: %s", proc.pid, exc)
            return proc
        return started

    def finish(self) -> dict:
        """The figures of the test (None where unknown)."""
        wall = max(time.monotonic() - self.started, 1e-6)
        figures = dict.fromkeys(COLUMNS)
        if self.sampler is not None:
            cpu, wait = self.sampler.stop()
            figures.update(cpu_s=round(cpu, 3), cpu_wait_s=round(wait, 3),
                           cpu_got_pct=round(100 * cpu / (cpu + wait), 1) if cpu + wait > 0.01 else None,
                           cpu_pct=round(100 * cpu / wall, 1), cpu_want_pct=round(100 * (cpu + wait) / wall, 1))
        cpu1 = cpu_times()
        if self.cpu0 and len(cpu1) == len(self.cpu0):
            spent = [b - a for a, b in zip(self.cpu0, cpu1)]
            total = sum(spent[:8]) or 1  # guest time is counted in user time already
            figures.update(host_busy_pct=round(100 * (total - spent[3] - spent[4]) / total, 1),
                           steal_pct=round(100 * spent[7] / total, 1) if len(spent) > 7 else None)
        load = (_text("/proc/loadavg") or "").split()
        figures["load_1m"] = float(load[0]) if load else None
        disk1, group1 = self._disk(), _group_bytes(self.where, self.devnum)
        if None not in (self.disk0, disk1, self.group0, group1):
            own = [b - a for a, b in zip(self.group0, group1)]
            moved = [b - a for a, b in zip(self.disk0, disk1)]
            # under v1 the run's own buffered writes are written back outside its groups, during any later test
            v1_writeback = self.where[0] == "v1" and getattr(self.sandbox, "buffered", False)
            figures.update(dev_foreign_read_bytes=max(0, moved[0] - own[0]), dev_own_bytes=sum(own),
                           dev_foreign_write_bytes=None if v1_writeback else max(0, moved[1] - own[1]))
        return figures


def annotate(frame, evidence: dict, flags: list[str]) -> None:
    """Put the figures of ``evidence`` (:meth:`Probe.finish`) in ``frame``; ``contended`` into ``flags``
    when the test was starved or shared its device."""
    if "cpu_want_pct" not in evidence:
        return
    figures = dict(evidence)
    if "v1_writeback" in flags:  # its own writeback went outside every group: foreign writes unknown
        figures["dev_foreign_write_bytes"] = None
    known = [figures[k] for k in ("dev_foreign_read_bytes", "dev_foreign_write_bytes") if figures.get(k) is not None]
    figures["dev_foreign_bytes"] = sum(known) if known else None
    for column in COLUMNS:
        frame[column] = figures.get(column)
    if contended(figures):
        flags.append("contended")


def contended(figures: dict) -> bool:
    """Whether the figures say the test was starved of CPU, lost it to a hypervisor, or shared its device."""
    foreign, own = figures.get("dev_foreign_bytes"), figures.get("dev_own_bytes") or 0
    got = figures.get("cpu_got_pct")
    return bool(((figures.get("cpu_want_pct") or 0) >= CPU_WANT_PCT and got is not None and got <= STARVED_GOT_PCT)
                or (figures.get("steal_pct") or 0) >= STEAL_PCT
                or (foreign is not None and foreign >= max(FOREIGN_MIN_BYTES, FOREIGN_SHARE * own)))
