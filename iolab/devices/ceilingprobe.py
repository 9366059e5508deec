"""What this host can deliver under an emulated profile's declared limits: a short probe when the device is made.

An emulated device's limits are ceilings enforced by blk-throttle; whether a
test can reach them depends on the host: its loop device, its backing file
system, its CPU. The ``sata-ssd`` profile declares 20k IOPS, and a busy 2-core
host was measured at 444 IOPS at QD1 and 6,812 at QD32 (write): the loop
device, not the profile, set those figures. So when
:func:`iolab.devices.emulated.emulated_device` makes a throttled device it runs
this probe first (before any file system is made: it writes the raw device),
one fio job per declared limit, one after another, each
:data:`SECONDS` long, with direct I/O, inside a block cgroup carrying the
device's own throttle (:func:`iolab.isolation.sandbox.open_sandbox`) and with
the fio options the device needs (huge-page buffers), over the device's first
:data:`SPAN` bytes, written once beforehand without a throttle and untimed (a
sparse backing file's holes read back without touching its disk, and a first
write allocates blocks: neither is the device), each write job before its read:

=============  ===========================  ===================================
declared       job                          compared with
=============  ===========================  ===================================
``read_bps``   sequential read, 1 MiB, QD8  the profile's ceiling for 1 MiB reads
``write_bps``  sequential write, 1 MiB, QD8 the same for writes
``read_iops``  random read, 4 KiB, QD32     the profile's ceiling for 4 KiB reads
``write_iops`` random write, 4 KiB, QD32    the same for writes
=============  ===========================  ===================================

A job that stays below :data:`REACHED` (80%: a one-second window at a low IOPS
limit is counted coarsely) of its ceiling marks that limit *out of reach on this host*: the
figure it reached is recorded beside the declared one
(``targets[].emulated.reachable`` in the manifest) with what held it
(``cpu`` when fio used a whole core, else ``loop device``), and
:mod:`iolab.report.ceilings` says "ceiling not reached on this host". Nothing
is cached: every device made is probed again, because the host's load is part
of what is measured. The probe is skipped only when asked
(``emulated_device(..., probe=False)``), and the manifest then says so.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import time

from iolab.core import commands, processes
from iolab.core.errors import IolabError
from iolab.core.units import human_size
from iolab.isolation.sandbox import open_sandbox

log = logging.getLogger(__name__)

#: seconds each job is measured (four jobs at most: a few seconds in all)
SECONDS = 1.0
#: seconds each job runs first, unmeasured: blk-throttle's first slice (100 ms) is no part of the figure
RAMP = 0.25
#: a job within this share of its ceiling reached it. Not 90%: a 1 s window at a low IOPS limit (the hdd's
#: 150) counts too few I/Os for blk-throttle's 100 ms slices to even out (an easy 300 IOPS limit measured
#: 275, 92%), and a host that truly cannot reach a limit falls far short of it (a loop device: 2-4 GB/s, 60-80k IOPS)
REACHED = 0.80
#: fio's own CPU (user + system, % of one core) from which the CPU, not the loop device, held a job
CPU_BOUND_PCT = 90.0
#: the span of the device the jobs use (at most; a smaller device is used whole), written once before the jobs
#: run: reads of a sparse backing file's holes never reach its disk, and a first write allocates its blocks
SPAN = 64 * 1024**2
MiB = 1024**2
ENGINE = "libaio"
#: why the manifest has no probe when it was not run on purpose
SKIPPED = "skipped on request (iolab run --no-ceiling-probe; probe=False)"


@dataclasses.dataclass(frozen=True)
class Job:
    limit: str       # the declared field it checks (read_bps, write_bps, read_iops, write_iops)
    rw: str          # fio's rw
    bs: int
    iodepth: int

    @property
    def direction(self) -> str:
        return "read" if self.limit.startswith("read") else "write"

    @property
    def unit(self) -> str:
        return "bps" if self.limit.endswith("_bps") else "iops"


JOBS = (Job("write_bps", "write", MiB, 8), Job("read_bps", "read", MiB, 8),
        Job("write_iops", "randwrite", 4096, 32), Job("read_iops", "randread", 4096, 32))


def not_probed(reason: str) -> dict:
    """The record of a probe that did not run (``reason`` says why)."""
    return {"ran": False, "reason": reason, "jobs": [], "reachable": None}


def jobs_for(profile) -> list[Job]:
    """The jobs checking ``profile``'s declared limits (none for an unthrottled profile)."""
    return [job for job in JOBS if getattr(profile, job.limit) is not None]


def ceiling(profile, job: Job) -> float:
    """What ``job`` can reach under ``profile``'s limits, in the job's unit (bytes/s or IOPS)."""
    expected = profile.expected(bs=job.bs, rw=job.direction)
    return float(expected["bw_bps"] if job.unit == "bps" else expected["iops"])


def span(size: int) -> int:
    """Bytes of the device the probe uses: :data:`SPAN`, or the whole of a smaller device (whole MiB)."""
    return max(MiB, min(size, SPAN) // MiB * MiB)


def prefill(device: str, nbytes: int) -> None:
    """Write ``nbytes`` of data at the start of ``device`` once, untimed and unthrottled (see :data:`SPAN`)."""
    block = (b"iolab-ceiling-probe " * (MiB // 20 + 1))[:MiB]
    fd = os.open(device, os.O_WRONLY)
    try:
        for offset in range(0, nbytes, MiB):
            os.pwrite(fd, block, offset)
        os.fsync(fd)
    except OSError as exc:
        raise IolabError(f"cannot write the probe's span: {exc.strerror}", context=f"ceiling probe on {device}") from None
    finally:
        os.close(fd)


def argv(device: str, size: int, jobs: list[Job], fio_options: dict, *, seconds: float = SECONDS) -> list[str]:
    """fio's command line: the jobs one after another (``stonewall``), JSON out."""
    line = [commands.which("fio"), "--output-format=json", f"--filename={device}", f"--size={span(size)}",
            f"--ioengine={ENGINE}", "--direct=1", "--time_based", f"--runtime={round(seconds * 1000)}ms",
            f"--ramp_time={round(RAMP * 1000)}ms",
            "--norandommap",
            "--randrepeat=0", *[f"--{key}={value}" for key, value in fio_options.items()]]
    for job in jobs:
        line += [f"--name={job.limit}", f"--rw={job.rw}", f"--bs={job.bs}", f"--iodepth={job.iodepth}",
                 "--stonewall"]
    return line


def judge(profile, jobs: list[Job], report: dict, *, seconds: float = SECONDS) -> dict:
    """The probe's record from fio's JSON ``report``: each job against its ceiling, and what is out of reach."""
    by_name = {job.get("jobname"): job for job in report.get("jobs") or []}
    judged = []
    for job in jobs:
        found = by_name.get(job.limit)
        if found is None:
            raise IolabError(f"fio's report has no job {job.limit!r}", context="ceiling probe")
        side = found.get(job.direction) or {}
        measured = float(side.get("bw_bytes" if job.unit == "bps" else "iops") or 0.0)
        top = ceiling(profile, job)
        cpu = float(found.get("usr_cpu") or 0.0) + float(found.get("sys_cpu") or 0.0)
        reached = measured >= REACHED * top
        judged.append({"limit": job.limit, "rw": job.rw, "bs": job.bs, "iodepth": job.iodepth,
                       "declared": getattr(profile, job.limit), "ceiling": top, "measured": measured,
                       "ratio": measured / top if top else None, "cpu_pct": round(cpu, 1), "reached": reached,
                       "held_by": None if reached else ("cpu" if cpu >= CPU_BOUND_PCT else "loop device")})
    reachable = {j["limit"]: j["measured"] for j in judged if not j["reached"]}
    held = sorted({j["held_by"] for j in judged if j["held_by"]})
    return {"ran": True, "seconds": seconds, "ramp_s": RAMP, "engine": ENGINE, "threshold": REACHED, "jobs": judged,
            "reachable": reachable, "held_by": held}


def collect(proc: subprocess.Popen, limit: float, *, context: str) -> tuple[bytes, bytes]:
    """fio's stdout and stderr once it has ended; past ``limit`` seconds it is ended with its job processes
    (:func:`iolab.core.processes.end`: SIGKILL at once, nothing left running, reaped) and the probe gives up."""
    try:
        return proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        processes.end(proc, first=[], family=True)
        proc.communicate()
        raise IolabError(f"fio did not finish within {limit:.0f} s", context=context) from None


def probe(device, *, seconds: float = SECONDS) -> dict:
    """Probe ``device`` (an :class:`iolab.devices.emulated.EmulatedDevice` before its file system is made).

    Returns the record :meth:`~iolab.devices.emulated.EmulatedDevice.describe` keeps as ``ceiling_probe``;
    its ``reachable`` maps each declared limit the host did not reach to the figure it reached.
    """
    profile = device.profile
    jobs = jobs_for(profile)
    if not jobs:
        return not_probed("no declared limits")
    line = argv(device.device, device.size, jobs, device.fio_options, seconds=seconds)
    started = time.monotonic()
    prefill(device.device, span(device.size))
    with open_sandbox("direct", buffered=False, throttles=device.throttles) as box:
        proc = box.popen(line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        out, err = collect(proc, (seconds + RAMP) * len(jobs) + 60,
                           context=f"ceiling probe of emulated:{profile.name} on {device.device}")
    text = out.decode(errors="replace")
    if proc.returncode != 0 or "{" not in text:
        detail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise IolabError(f"fio failed (exit {proc.returncode}): {'; '.join(detail) or 'no output'}",
                         context=f"ceiling probe of emulated:{profile.name} on {device.device}")
    try:
        report = json.loads(text[text.index("{"):])
    except json.JSONDecodeError as exc:
        raise IolabError(f"fio's JSON does not parse: {exc}",
                         context=f"ceiling probe of emulated:{profile.name}") from None
    record = judge(profile, jobs, report, seconds=seconds)
    record["elapsed_s"] = round(time.monotonic() - started, 2)
    record["span"] = human_size(span(device.size))
    for job in record["jobs"]:
        log.info("ceiling probe of emulated:%s: %s %s of %s%s", profile.name, job["limit"], _figure(job["measured"], job),
                 _figure(job["ceiling"], job), "" if job["reached"] else f" (out of reach: {job['held_by']})")
    return record


def _figure(value: float, job: dict) -> str:
    return f"{value / 1e6:,.1f} MB/s" if job["limit"].endswith("_bps") else f"{value:,.0f} IOPS"
