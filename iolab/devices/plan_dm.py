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
claimed like md members (:func:`iolab.devices.plan._claim`). The metadata's
first 4 KiB are zeroed before the cache is made: dm-cache formats metadata
whose superblock is all zeros and refuses anything else.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shlex
import time

from iolab.core.errors import IolabError
from iolab.devices import dmtable
from iolab.devices import inventory as devices
from iolab.devices.plan_model import (CACHE_KEYS, DELAY_KEYS, MAX_DELAY_MS, CacheSpec, DelaySpec, Plan, _Fields)
from iolab.devices.plan_state import _run

log = logging.getLogger("iolab.devices.plan")
DEFAULT_CACHE_BLOCK = 64 * 1024
FLUSH_TIMEOUT = 600.0


# ------------------------------------------------------------------ loading

def _milliseconds(f: _Fields, value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_MS:
        f.fail(field, f"must be a whole number of milliseconds, 0 to {MAX_DELAY_MS}, got {value!r}")
    return value


def load_delays(f: _Fields, data: dict, plan: Plan, define) -> None:
    """delay: dm-delay over a plan device."""
    for i, item in enumerate(f.items(data.get("delay"), "delay")):
        field = f"delay[{i}]"
        f.mapping(item, field, DELAY_KEYS, ("name", "device"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        if "read_ms" not in item:
            f.fail(f"{field}.read_ms", "missing (required)")
        read_ms = _milliseconds(f, item["read_ms"], f"{field}.read_ms")
        write_ms = _milliseconds(f, item.get("write_ms", read_ms), f"{field}.write_ms")
        plan.delays.append(DelaySpec(name=name, device=f.name(item["device"], f"{field}.device"),
                                     read_ms=read_ms, write_ms=write_ms))


def load_caches(f: _Fields, data: dict, plan: Plan, define) -> None:
    """cache: dm-cache of an origin on a fast device, metadata separate or carved."""
    for i, item in enumerate(f.items(data.get("cache"), "cache")):
        field = f"cache[{i}]"
        f.mapping(item, field, CACHE_KEYS, ("name", "origin", "cache"))
        name = f.name(item["name"], f"{field}.name")
        define(name, f"{field}.name")
        mode = f.text(item.get("mode"), f"{field}.mode") or "writethrough"
        if mode not in dmtable.CACHE_MODES:
            f.fail(f"{field}.mode", f"must be one of {', '.join(dmtable.CACHE_MODES)}, got {mode!r}")
        policy = f.text(item.get("policy"), f"{field}.policy") or "smq"
        if policy not in dmtable.CACHE_POLICIES:
            f.fail(f"{field}.policy", f"must be {' or '.join(dmtable.CACHE_POLICIES)}, got {policy!r}",
                   "smq is the kernel's default policy (mq is an alias of it since Linux 4.6)")
        block = f.size(item.get("block_size", DEFAULT_CACHE_BLOCK), f"{field}.block_size")
        if block % dmtable.CACHE_BLOCK_MIN or not dmtable.CACHE_BLOCK_MIN <= block <= dmtable.CACHE_BLOCK_MAX:
            f.fail(f"{field}.block_size", f"must be a multiple of 32K between 32K and 1G, got {item['block_size']!r}")
        metadata = item.get("metadata")
        metadata = f.name(metadata, f"{field}.metadata") if metadata is not None else None
        meta_size = None
        if item.get("metadata_size") is not None:
            if metadata is not None:
                f.fail(f"{field}.metadata_size", "only for metadata carved from the cache device: "
                       "remove it or the metadata device")
            meta_size = f.size(item["metadata_size"], f"{field}.metadata_size")
            if meta_size % (1024 ** 2) or meta_size < 4 * 1024 ** 2:
                f.fail(f"{field}.metadata_size", f"must be whole MiB, at least 4M, got {item['metadata_size']!r}")
        origin = f.name(item["origin"], f"{field}.origin")
        cache = f.name(item["cache"], f"{field}.cache")
        plan.caches.append(CacheSpec(name=name, origin=origin, cache=cache, metadata=metadata,
                                     metadata_size=meta_size, mode=mode, policy=policy, block_size=block))


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
            size = devices.size_bytes(devices.resolve(path)[1])
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

def execute(run, piece: DmPiece, argvs: list, record: dict, claim, wait_for) -> None:
    """Make one dm device: claim what it covers, create it, record name, uuid and table, check it."""
    for name in claims(piece):
        claim(run.devmap[name], confirm=run.confirm, ours=name in run.ours)
    if dmtable.find(piece.dm_name):
        raise IolabError("a device-mapper device of this name exists already", context=piece.dm_name)
    spec = piece.spec
    rec = run.state.begin({**record, "dm_name": piece.dm_name, "uuid": argvs[-1][argvs[-1].index("--uuid") + 1],
                           "table": argvs[-1][-1], "role": piece.role,
                           "mode": getattr(spec, "mode", None) if piece.role == "cache" else None})
    for argv in argvs:
        _run(argv, run.progress)
    path = dmtable.mapper_path(piece.dm_name)
    wait_for(lambda: os.path.exists(path) and dmtable.find(piece.dm_name) is not None, path)
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
    verdict = devices.assess(device)
    busy = [r.text for r in verdict.reasons if r.kind in (devices.MOUNTED, devices.SWAP, devices.HOLDERS)]
    if busy:
        raise IolabError(f"still in use: {'; '.join(busy)}", context=record.get("device") or kname)
    ran = []
    for argv in argvs:
        if argv[:2] == ["dmsetup", "remove"] and record.get("mode") == "writeback":
            _wait_clean(record["dm_name"])
        if progress:
            progress(shlex.join(argv))
        _run(argv, None)
        ran.append(argv)
    return ran


def _wait_clean(name: str) -> None:
    """Wait until the cleaner policy has written every dirty block back to the origin."""
    deadline = time.monotonic() + FLUSH_TIMEOUT
    while (dirty := dmtable.cache_counters(name)["dirty"]) > 0:
        if time.monotonic() > deadline:
            raise IolabError(f"{dirty} dirty cache blocks still not written back after {FLUSH_TIMEOUT:.0f} s",
                             context=name, hint="run iolab teardown again once the origin keeps up")
        time.sleep(0.2)
