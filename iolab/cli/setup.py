"""``iolab setup PLAN.yaml``"""
from __future__ import annotations

import shlex
import sys

HELP = ("create loop devices, RAID0/RAID1 arrays, slow (dm-delay) and cached (dm-cache) devices, partitions, "
        "file systems and mounts from a YAML plan")
DESCRIPTION = (
    "Carry out a setup plan step by step: loop devices with direct I/O over new files, mdadm "
    "RAID0 (with a chunk size) or RAID1, dm-delay (a device slow inside the kernel: `delay:`), "
    "dm-cache (a slow origin cached on a fast device, smq, writethrough or writeback, metadata on "
    "its own device or carved from the cache: `cache:`), iSCSI disks (a plan device exported by LIO "
    "on 127.0.0.1 and logged in with open-iscsi: `iscsi:`), GPT partitions 1 MiB-aligned, mkfs "
    "ext4/xfs, mounts (examples in examples/plans/; the keys are documented in "
    "iolab/devices/plan/__init__.py, plan/dm.py and plan/iscsi.py). Each step is recorded in "
    "<plan dir>/.<plan>.state.json so that `iolab teardown PLAN.yaml` undoes it, also from "
    "another process. A failure or Ctrl-C tears down what was done. Existing devices must pass "
    "iolab's safety checks; --confirm DEVICE (the exact path, once per device) allows overwriting "
    "a device that carries a signature, never one that is mounted, swap, held or backs /.")


def add_arguments(parser) -> None:
    parser.add_argument("plan", metavar="PLAN.yaml", help="the setup plan")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the exact commands and what would stop setup; change nothing "
                             "(exit status 1 when setup would refuse to start)")
    parser.add_argument("--confirm", metavar="DEVICE", action="append", default=[],
                        help="allow overwriting the signature on exactly this device (repeat per device)")


def run(args) -> int:
    from iolab.devices import plan as setup_plan
    plan = setup_plan.load_plan(args.plan)
    if args.dry_run:
        print(f"# iolab setup {plan.path} (dry run: nothing is changed)")
        print("# <name> stands for a device that exists only once the steps before it ran")
        for argv in setup_plan.plan_commands(plan):
            print(shlex.join(argv))
        problems = setup_plan.preflight(plan, args.confirm or None)
        print(f"# state file: {plan.state_path}")
        if problems:
            print("# setup would refuse to start:")
            for problem in problems:
                print(f"#   {problem}")
            return 1
        print("# preflight checks passed")
        return 0

    def progress(command: str) -> None:
        print(f"+ {command}", file=sys.stderr, flush=True)

    result = setup_plan.setup(plan, confirm=args.confirm or None, progress=progress)
    for name, device in result["devices"].items():
        mount = result["mounts"].get(name)
        print(f"{name}\t{device}" + (f"\t{mount}" if mount else ""))
    print(f"# undo with: iolab teardown {shlex.quote(str(plan.path))}", file=sys.stderr)
    return 0
