"""``iolab teardown PLAN.yaml``"""
from __future__ import annotations

import shlex
import sys

HELP = "undo what `iolab setup PLAN.yaml` did (umount, mdadm --stop, detach loops, delete its files)"
DESCRIPTION = (
    "Undo a setup in reverse order from its state file (<plan dir>/.<plan>.state.json), "
    "checking that every mount, array, loop device and file is still the one iolab made. "
    "Partition tables and file systems are not wiped. Nothing to tear down is not an error.")


def add_arguments(parser) -> None:
    parser.add_argument("plan", metavar="PLAN.yaml", help="the plan given to iolab setup")
    parser.add_argument("--dry-run", action="store_true", help="print the commands teardown would run")


def run(args) -> int:
    from iolab.devices import plan as setup_plan
    if args.dry_run:
        for argv in setup_plan.teardown_commands(args.plan):
            print(shlex.join(argv))
        return 0

    def progress(command: str) -> None:
        print(f"+ {command}", file=sys.stderr, flush=True)

    ran = setup_plan.teardown(args.plan, progress=progress)
    if not ran and setup_plan.status(args.plan) is None:
        print(f"nothing left to tear down for {args.plan}", file=sys.stderr)
    return 0
