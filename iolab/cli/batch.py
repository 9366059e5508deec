"""``iolab batch INVENTORY.yaml [--data DIR] [--dry-run] [--entry NAME]``"""
from __future__ import annotations

import sys

HELP = "run the measure notebook (papermill) for every entry of an inventory, one after the other"
DESCRIPTION = (
    "Run notebooks/measure.ipynb with papermill once per inventory entry, in sequence, with the entry's "
    "parameters. Each executed notebook is kept in the run directory it created (measure.ipynb); a failing "
    "entry is reported and the others still run. Prints one line per entry (status, name, run directories "
    "or the error), then the batch summary file last. Exit status: 0 if every entry completed, 1 if any "
    "failed, 2 for a bad inventory. See examples/batch-inventory.yaml.")


def add_arguments(parser) -> None:
    parser.add_argument("inventory", metavar="INVENTORY.yaml", help="inventory of entries (see examples/batch-inventory.yaml)")
    parser.add_argument("--data", metavar="DIR",
                        help="result store (default: the inventory's `data`, else ./data)")
    parser.add_argument("--entry", action="append", default=[], metavar="NAME",
                        help="run only this entry (repeat for several)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the inventory and every entry's targets; print job files and commands; run nothing")


def run(args) -> int:
    from iolab.fleet import batch

    inventory = batch.load_inventory(args.inventory)
    state = {"n": 0, "total": len(args.entry) or len(inventory.entries)}

    def on_event(kind, entry, result):
        if kind == "refused":
            state["total"] -= 1
            print(f"iolab batch: {entry.name}: cannot run, skipped: {result.error}", file=sys.stderr, flush=True)
        elif kind == "start":
            state["n"] += 1
            what = ", ".join(entry.recipes) + " on " + ", ".join(entry.targets)
            verb = "planning" if args.dry_run else "running"
            print(f"iolab batch: [{state['n']}/{state['total']}] {entry.name}: {verb} {what}", file=sys.stderr,
                  flush=True)
        elif result is not None and not result.ok:
            print(f"iolab batch: [{state['n']}/{state['total']}] {entry.name}: FAILED: {result.error}",
                  file=sys.stderr, flush=True)

    outcome = batch.run_batch(inventory, data_dir=args.data, dry_run=args.dry_run, only=args.entry,
                              on_event=on_event)
    width = max(len(e.name) for e in outcome.entries)
    for entry in outcome.entries:
        if args.dry_run and entry.plan:
            print(f"# ===== entry {entry.name}")
            print(entry.plan)
    for entry in outcome.entries:
        where = " ".join(str(p) for p in entry.run_dirs)
        if entry.ok:
            print(f"{entry.status:<9} {entry.name:<{width}} {where}".rstrip())
        else:
            kept = " ".join(str(p) for p in entry.notebooks)
            print(f"{'failed':<9} {entry.name:<{width}} {entry.error}" + (f" [notebook: {kept}]" if kept else ""))
    if outcome.failed:
        print(f"iolab batch: {len(outcome.failed)} of {len(outcome.entries)} entries failed: "
              + ", ".join(e.name for e in outcome.failed), file=sys.stderr)
    if outcome.directory is not None:
        print(outcome.directory / "batch.json")
    else:
        print("dry run: nothing was created or run")
    return 1 if outcome.failed else 0
