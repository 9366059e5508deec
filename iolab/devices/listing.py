"""The listing of block devices (``iolab devices``): one row per disk, partition and attached loop
device, with its properties and iolab's verdict on writing it (:mod:`iolab.devices.safety`).

(Called "the inventory" until issue 22: a fleet's inventory is :mod:`iolab.fleet.inventory`.)

The facts come from :mod:`iolab.devices.blockdev`; what serves a path, for a run
manifest, from :mod:`iolab.devices.provenance`.
"""
from __future__ import annotations

from pathlib import Path

from iolab.core.errors import IolabError
from iolab.core.units import human_size
from iolab.devices.blockdev import (
    devno_of_name, firmware, listed_names, model, queue, rotational, serial, holders, is_partition,
    mounts, mounts_of, parent_disk, partitions, scheduler, size_bytes, swap_devnos)
from iolab.devices.safety import UNREADABLE, Reason, Verdict, assess, root_chain


COLUMNS = [
    "device", "name", "type", "parent", "size_bytes", "size", "model", "serial", "firmware",
    "rotational", "logical_sector", "physical_sector", "scheduler", "mountpoints", "holders",
    "swap", "root_chain", "signatures", "writable", "why_not", "confirmable",
]


def table() -> "pandas.DataFrame":  # noqa: F821 - imported lazily
    """One row per block device (disks, partitions, attached loop devices).

    ``writable`` is iolab's verdict without confirmation; ``why_not`` lists the
    reasons; ``confirmable`` says whether ``--confirm DEVICE`` would allow a
    write (only signatures stand in the way). Columns: :data:`COLUMNS`.
    """
    import pandas as pd

    return pd.DataFrame(records(), columns=COLUMNS)


def records() -> list[dict]:
    """:func:`table` as plain dicts (JSON-ready)."""
    table, swaps, chain = mounts(), swap_devnos(), root_chain()
    rows = []
    for name in listed_names():
        path = f"/dev/{name}"
        if not Path(path).exists():
            continue
        try:
            verdict = assess(path, mount_table=table, swaps=swaps, chain=chain)
        except IolabError as exc:
            verdict = Verdict(path, name, [Reason(UNREADABLE, exc.message)], [])
        family = [name] + (partitions(name) if not is_partition(name) else [])
        mountpoints = []
        for member in family:
            for mount in mounts_of(member, table):
                mountpoints.append(mount.target if member == name else f"{member}:{mount.target}")
        q = queue(name)
        size = size_bytes(name)
        rows.append({
            "device": path, "name": name,
            "type": "part" if is_partition(name) else ("loop" if name.startswith("loop") else "disk"),
            "parent": parent_disk(name) if is_partition(name) else None,
            "size_bytes": size, "size": human_size(size) if size is not None else None,
            "model": model(name), "serial": serial(name), "firmware": firmware(name),
            "rotational": rotational(name),
            "logical_sector": q["logical_block_size"], "physical_sector": q["physical_block_size"],
            "scheduler": scheduler(name), "mountpoints": mountpoints,
            "holders": sorted({h for m in family for h in holders(m)}),
            "swap": any(devno_of_name(m) in swaps for m in family),
            "root_chain": name in chain,
            "signatures": list(dict.fromkeys(s["type"] for s in verdict.signatures)),
            "writable": verdict.writable, "why_not": verdict.why_not,
            "confirmable": bool(verdict.reasons) and verdict.allowed(True),
        })
    return rows
