"""``iolab devices``"""
from __future__ import annotations

import json

HELP = "list block devices and whether iolab would write to them (and why not)"
DESCRIPTION = (
    "List every block device (disks, partitions, attached loop devices) with model, size, "
    "rotational flag, sector sizes, scheduler, mounts, holders and signatures, and iolab's "
    "verdict: writable, writable only with --confirm DEVICE (a signature is in the way), "
    "never (mounted, swap, held, backs /), or stale (a loop device left by an iolab process "
    "that is gone: `iolab cleanup` removes it). Signatures need root to probe.")


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    parser.add_argument("--all", action="store_true",
                        help="show every column (serial, firmware, ...) in the table")


def _mark_stale(rows: list[dict]) -> None:
    """A loop device left by a dead iolab process is not a device to benchmark: say so."""
    from iolab.engine import reaper
    stale = reaper.stale_loops()
    for row in rows:
        pid = stale.get(row["device"])
        row["stale"] = pid is not None
        if pid is None:
            continue
        reason = f"stale: left by iolab process {pid}, which is gone (iolab cleanup removes it)"
        row["writable"] = False
        row["confirmable"] = False
        row["why_not"] = "; ".join(x for x in (reason, row.get("why_not")) if x)


def _verdict(row: dict) -> str:
    if row.get("stale"):
        return "stale"
    if row["writable"]:
        return "yes"
    return "confirm" if row["confirmable"] else "no"


def _text(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def run(args) -> int:
    from iolab.devices import listing
    rows = listing.records()
    _mark_stale(rows)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    columns = [("DEVICE", "device"), ("SIZE", "size"), ("MODEL", "model"), ("ROT", "rotational"),
               ("SECTOR", None), ("SCHED", "scheduler"), ("MOUNTS", "mountpoints"),
               ("HOLDERS", "holders"), ("SIGNATURES", "signatures"), ("WRITE", None), ("WHY NOT", "why_not")]
    if args.all:
        columns[3:3] = [("SERIAL", "serial"), ("FIRMWARE", "firmware")]
    table = []
    for row in rows:
        cells = []
        for title, key in columns:
            if title == "SECTOR":
                cells.append(f"{_text(row['logical_sector'])}/{_text(row['physical_sector'])}")
            elif title == "WRITE":
                cells.append(_verdict(row))
            else:
                cells.append(_text(row[key]) if row[key] != "" else "-")
        table.append(cells)
    widths = [max([len(t)] + [len(r[i]) for r in table]) for i, (t, _) in enumerate(columns)]
    print("  ".join(t.ljust(w) for (t, _), w in zip(columns, widths)).rstrip())
    for cells in table:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
    if not rows:
        print("(no block devices visible)")
    print()
    print("WRITE: yes = iolab may write; confirm = only with --confirm <exact device path> "
          "(a signature would be overwritten); no = never (mounted, swap, held, backs /, read-only, empty); "
          "stale = left by a dead iolab process (iolab cleanup)")
    return 0
