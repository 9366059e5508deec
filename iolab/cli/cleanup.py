"""``iolab cleanup [--dry-run] [--data DIR]``"""
from __future__ import annotations

HELP = "undo what killed or crashed iolab runs left behind (loop devices, mounts, cgroups, huge pages)"
DESCRIPTION = (
    "Find every object an iolab process made and did not undo because it died (kill -9, a crash): "
    "database clusters, tasks left in its cgroups, mounts, loop devices, backing files, cgroups and "
    "systemd scopes, huge pages added to the pool; undo them in that order, and mark run manifests "
    "left 'running' by a dead process as 'interrupted'. Objects of live iolab processes are never "
    "touched (the owner is the PID with its start time and boot). Objects whose owner lives in "
    "another PID namespace (a container, unshare --pid) are not judged: a line names each and why. "
    "The ledger is kept in /run/iolab (mode 0700, root's); a damaged or planted entry is named and "
    "left alone. Exit status 1 when something could not be undone or an entry is damaged. "
    "Every `iolab run` does this first.")


def add_arguments(parser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="only print what would be undone")
    parser.add_argument("--data", default="data", metavar="DIR",
                        help="results directory whose runs stuck at 'running' are checked (default: data)")


def run(args) -> int:
    from iolab.engine import reaper
    lines = reaper.reap(dry_run=args.dry_run, data_dir=args.data)
    for line in lines:
        print(line)
    if not lines:
        print("nothing to clean up: no object of a dead iolab process found")
    failed = [line for line in lines if ": could not " in line or line.startswith("skipped damaged ledger entry")]
    return 1 if failed else 0
