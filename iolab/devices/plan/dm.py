"""Device-mapper entries of a setup plan: ``delay`` (dm-delay: a slow origin) and ``cache`` (dm-cache).

::

    delay:                        # dm-delay: /dev/mapper/<name>, every I/O waits in the kernel
      - name: hdd
        device: hddraw            # a plan device (loop, device, array, partition)
        read_ms: 8                # 0..10000
        write_ms: 4               # optional, default read_ms
    cache:                        # dm-cache: /dev/mapper/<name> = origin cached on a fast device
      - name: hdd-cached
        origin: hdd               # the slow device (here: the delay above)
        cache: ssd                # the fast device
        metadata: ssdmeta         # optional: a device of its own; without it the first
        metadata_size: 8M         #   metadata_size (default: 4 MiB + 16 B per cache block) of
                                  #   `cache` is carved off (dm-linear <name>-cmeta, <name>-cdata)
        mode: writethrough        # writethrough (default), writeback or passthrough
        policy: smq               # smq (the kernel's default policy)
        block_size: 64K           # cache block: a multiple of 32K, 32K..1G (default 64K)

Each dm device is one step (recorded before it acts, with its uuid
``IOLAB-...``): teardown removes only a device with that name *and* uuid, a
writeback cache after its dirty blocks were written back (the ``cleaner``
policy), so no write is lost on the origin. Devices under a dm target are
claimed like md members (:meth:`iolab.devices.plan.steps.SetupRun.claim`). The metadata's
first 4 KiB are zeroed before the cache is made: dm-cache formats metadata
whose superblock is all zeros and refuses anything else.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shlex

from iolab.core.deadline import wait_until
from iolab.core.errors import IolabError
from iolab.devices import blockdev, dmtable, safety
from iolab.devices.plan.model import CacheSpec, Plan
from iolab.devices.plan.state import DEVICE_WAIT, run_command

log = logging.getLogger("iolab.devices.plan")
FLUSH_TIMEOUT = 600.0


# ------------------------------------------------------------------ checking (the fields: plan.schema)

def references(plan: Plan):
    """(plan name, field) of every device a dm entry uses."""
    for i, delay in enumerate(plan.delays):
        yield delay.device, f"delay[{i}].device"
    for i, cache in enumerate(plan.caches):
        yield cache.origin, f"cache[{i}].origin"
        yield cache.cache, f"cache[{i}].cache"
        if cache.metadata:
            yield cache.metadata, f"cache[{i}].metadata"


def check_sizes(plan: Plan, sizes: dict, fail) -> None:
    """A carved cache leaves room for at least one cache block; a metadata device is big enough."""
    for i, cache in enumerate(plan.caches):
        size = sizes.get(cache.cache)
        if size is None:
            continue
        if cache.metadata is None:
            meta = cache.metadata_size or dmtable.metadata_size(size, cache.block_size)
            if size - meta < cache.block_size:
                fail(f"cache[{i}].cache", f"{cache.cache} ({size // 1024 ** 2} MiB) has no room for a cache block "
                     f"after {meta // 1024 ** 2} MiB of metadata")
            data = size - meta
        else:
            data = size
        need = dmtable.metadata_size(data, cache.block_size)
        have = cache.metadata_size if cache.metadata is None else sizes.get(cache.metadata)
        if have is not None and have < need:
            where = f"cache[{i}].metadata_size" if cache.metadata is None else f"cache[{i}].metadata"
            fail(where, f"dm-cache needs {need // 1024 ** 2} MiB of metadata for {data // cache.block_size} "
                 f"cache blocks, the plan gives {have / 1024 ** 2:.0f} MiB")


# ------------------------------------------------------------------ steps

@dataclasses.dataclass
class DmPiece:
    """One dm device a plan entry makes: ``role`` delay, cmeta, cdata (carved pieces) or cache."""
    dm_name: str
    role: str
    spec: object

    @property
    def key(self) -> str:
        """Its key in the plan's device map (pieces of a carved cache are not plan names)."""
        return self.spec.name if self.role in ("delay", "cache") else f"{self.spec.name}/{self.role}"


def pieces(kind: str, spec) -> list[DmPiece]:
    if kind == "delay":
        return [DmPiece(spec.name, "delay", spec)]
    carved = [] if spec.metadata else [DmPiece(f"{spec.name}-cmeta", "cmeta", spec),
                                       DmPiece(f"{spec.name}-cdata", "cdata", spec)]
    return carved + [DmPiece(spec.name, "cache", spec)]


def _sectors(name: str, devmap: dict, known: dict) -> int | str:
    path = devmap.get(name)
    if path and not path.startswith("<") and os.path.exists(path):
        try:
            size = blockdev.size_bytes(blockdev.resolve(path)[1])
            if size:
                return size // dmtable.SECTOR
        except IolabError:
            pass
    if name in known:
        return known[name] // dmtable.SECTOR
    return f"<sectors of {name}>"


def _meta_sectors(spec: CacheSpec, devmap: dict, known: dict) -> int | str:
    if spec.metadata_size:
        return spec.metadata_size // dmtable.SECTOR
    total = _sectors(spec.cache, devmap, known)
    if isinstance(total, str):
        return f"<metadata sectors of {spec.cache}>"
    return dmtable.metadata_size(total * dmtable.SECTOR, spec.block_size) // dmtable.SECTOR


def table(piece: DmPiece, devmap: dict, known: dict) -> str:
    spec, dev = piece.spec, (lambda name: devmap.get(name, f"<{name}>"))
    if piece.role == "delay":
        return dmtable.delay_table(_sectors(spec.device, devmap, known), dev(spec.device), spec.read_ms,
                                   spec.write_ms)
    if piece.role in ("cmeta", "cdata"):
        meta = _meta_sectors(spec, devmap, known)
        if piece.role == "cmeta":
            return dmtable.linear_table(meta, dev(spec.cache), 0)
        total = _sectors(spec.cache, devmap, known)
        rest = total - meta if isinstance(total, int) and isinstance(meta, int) else f"<{spec.cache} less metadata>"
        return dmtable.linear_table(rest, dev(spec.cache), meta)
    if spec.metadata:
        meta, data = dev(spec.metadata), dev(spec.cache)
    else:
        meta = devmap.get(f"{spec.name}/cmeta", f"<{spec.name}-cmeta>")
        data = devmap.get(f"{spec.name}/cdata", f"<{spec.name}-cdata>")
    return dmtable.cache_table(_sectors(spec.origin, devmap, known), meta, data, dev(spec.origin), spec.block_size,
                               spec.mode, spec.policy)


def uuid(plan: Plan, piece: DmPiece) -> str:
    digest = hashlib.sha256(str(plan.path).encode()).hexdigest()[:12]
    return f"{dmtable.UUID_PREFIX}{digest}-{piece.dm_name}"


def commands(plan: Plan, piece: DmPiece, devmap: dict, known: dict) -> list[list[str]]:
    argvs = []
    if piece.role == "cache":  # dm-cache formats only all-zero metadata
        key = piece.spec.metadata or f"{piece.spec.name}/cmeta"
        meta = devmap.get(key, f"<{piece.spec.metadata or piece.spec.name + '-cmeta'}>")
        argvs.append(["dd", "if=/dev/zero", f"of={meta}", "bs=4096", "count=1", "oflag=direct", "conv=fsync",
                      "status=none"])
    argvs.append(dmtable.create_argv(piece.dm_name, uuid(plan, piece), table(piece, devmap, known)))
    return argvs


def claims(piece: DmPiece) -> list[str]:
    """Plan devices to check (and open O_EXCL) right before this piece is made."""
    spec = piece.spec
    if piece.role == "delay":
        return [spec.device]
    if piece.role == "cmeta":
        return [spec.cache]
    if piece.role == "cdata":
        return []  # the same device, claimed for cmeta (now it has a holder)
    return [spec.origin] + ([spec.cache, spec.metadata] if spec.metadata else [])


def preflight(plan: Plan) -> list[str]:
    if not (plan.delays or plan.caches):
        return []
    problems = []
    if not os.path.exists("/dev/mapper/control"):
        problems.append("device-mapper is not available in this kernel (no /dev/mapper/control; try: modprobe dm_mod)")
    for kind, specs in (("delay", plan.delays), ("cache", plan.caches)):
        for spec in specs:
            for piece in pieces(kind, spec):
                if dmtable.find(piece.dm_name) or os.path.lexists(dmtable.mapper_path(piece.dm_name)):
                    problems.append(f"a device-mapper device {piece.dm_name!r} exists already")
    return problems


# ------------------------------------------------------------------ setup and teardown

def execute(run, piece: DmPiece, argvs: list, record: dict) -> None:
    """Make one dm device: claim what it covers, create it, record name, uuid and table, check it
    (``run``: the setup's :class:`~iolab.devices.plan.steps.SetupRun`)."""
    for name in claims(piece):
        run.claim(name)
    if dmtable.find(piece.dm_name):
        raise IolabError("a device-mapper device of this name exists already", context=piece.dm_name)
    spec = piece.spec
    rec = run.state.begin({**record, "dm_name": piece.dm_name, "uuid": argvs[-1][argvs[-1].index("--uuid") + 1],
                           "table": argvs[-1][-1], "role": piece.role,
                           "mode": getattr(spec, "mode", None) if piece.role == "cache" else None})
    for argv in argvs:
        run_command(argv, run.progress)
    path = dmtable.mapper_path(piece.dm_name)
    wait_until(lambda: os.path.exists(path) and dmtable.find(piece.dm_name) is not None, DEVICE_WAIT, what=path)
    kname = dmtable.find(piece.dm_name)
    run.devmap[piece.key] = path
    run.state.done(rec, device=path, kname=kname)
    if piece.role == "cache":
        line = dmtable.status(piece.dm_name)
        if spec.mode not in line.split():
            raise IolabError(f"the cache is not in {spec.mode} mode: {line}", context=path)


def undo_commands(record: dict) -> tuple[list[list[str]], str | None]:
    name = record.get("dm_name") or record["name"]
    kname = dmtable.find(name)
    if kname is None:
        return [], "the dm device is gone"
    if dmtable.uuid_of(kname) != record.get("uuid"):
        return [], f"{name} is not the device this plan made (uuid {dmtable.uuid_of(kname)!r}); leaving it"
    argvs = []
    if record.get("mode") == "writeback" and record.get("table"):
        argvs += [["dmsetup", "reload", "--noudevsync", name, "--table", dmtable.cleaner_table(record["table"])],
                  ["dmsetup", "resume", "--noudevsync", name]]
    return argvs + [dmtable.remove_argv(name)], None


def undo(record: dict, progress) -> list[list[str]]:
    """Remove one dm device of the plan (a writeback cache cleaned first); returns the commands run."""
    argvs, skip = undo_commands(record)
    if skip:
        log.info("dm %s: %s", record.get("name"), skip)
        return []
    kname = dmtable.find(record.get("dm_name") or record["name"])
    device = record.get("device") if record.get("device") and os.path.exists(record["device"]) else f"/dev/{kname}"
    verdict = safety.assess(device)
    busy = [r.text for r in verdict.reasons if r.kind in (safety.MOUNTED, safety.SWAP, safety.HOLDERS)]
    if busy:
        raise IolabError(f"still in use: {'; '.join(busy)}", context=record.get("device") or kname)
    ran = []
    for argv in argvs:
        if argv[:2] == ["dmsetup", "remove"] and record.get("mode") == "writeback":
            _wait_clean(record["dm_name"])
        if progress:
            progress(shlex.join(argv))
        run_command(argv, None)
        ran.append(argv)
    return ran


def _wait_clean(name: str) -> None:
    """Wait until the cleaner policy has written every dirty block back to the origin."""
    dirty = {}

    def clean() -> bool:
        dirty["blocks"] = dmtable.cache_counters(name)["dirty"]
        return dirty["blocks"] == 0

    if not wait_until(clean, FLUSH_TIMEOUT, interval=0.2):
        raise IolabError(f"{dirty['blocks']} dirty cache blocks still not written back after {FLUSH_TIMEOUT:.0f} s",
                         context=name, hint="run iolab teardown again once the origin keeps up")
