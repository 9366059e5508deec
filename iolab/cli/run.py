"""``iolab run RECIPE --target PATH ...``"""
from __future__ import annotations

import sys

HELP = "run a recipe (or a .fio job file) on one or more targets; prints the run directory last"


def add_arguments(parser) -> None:
    parser.add_argument("recipe", help="recipe name (see `iolab recipes`), recipe .yaml file, or plain .fio job file")
    parser.add_argument("--target", action="append", required=True, metavar="PATH",
                        help="directory or file on a mounted file system, a block device (needs --confirm "
                             "when it carries data), or emulated:NAME; repeat for several targets")
    parser.add_argument("--label", help="a name for this system in reports (default: the host name)")
    parser.add_argument("--isolation", choices=["cgroup", "hugepages", "direct", "none"],
                        help="cache isolation (default: the recipe's; direct for O_DIRECT recipes)")
    parser.add_argument("--mem-limit", metavar="SIZE", help="memory the test may use for page cache (default 512M)")
    parser.add_argument("--size", metavar="SIZE", help="test file size, e.g. 1G")
    parser.add_argument("--runtime", metavar="SECONDS", help="seconds per test")
    parser.add_argument("--repeat", type=int, metavar="N", help="passes per test")
    parser.add_argument("--preset", help="recipe preset (e.g. crystaldiskmark: default, nvme, peak, real-world, mix)")
    parser.add_argument("--data", default="data", metavar="DIR", help="result store (default: ./data)")
    parser.add_argument("--confirm", metavar="DEVICE", help="allow writing to this exact block device")
    parser.add_argument("--with-original", action="store_true",
                        help="also run the original tool (bonnie++, hdparm) where the recipe emulates one")
    parser.add_argument("--dry-run", action="store_true", help="print the job files and commands; run nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    from .. import runner
    options = dict(size=args.size, runtime=args.runtime, repeat=args.repeat, isolation=args.isolation,
                   preset=args.preset, confirm=args.confirm, mem_limit=args.mem_limit)
    if args.dry_run:
        print(runner.dry_run(args.recipe, args.target, **options))
        print("dry run: nothing was created or run")
        return 0
    result = runner.run(args.recipe, args.target, label=args.label,
                        data_dir=args.data, progress=False if args.no_progress else None,
                        argv=sys.argv, with_original=args.with_original, **options)
    status = result.manifest["status"]
    if status != "completed":
        print(f"iolab: run {status}: {result.manifest.get('reason')}", file=sys.stderr)
    print(result.path)
    return 0 if status == "completed" else 1
