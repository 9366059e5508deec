"""``iolab run RECIPE --target PATH ...``"""
from __future__ import annotations

import sys

HELP = "run a recipe (or a .fio job file) on one or more targets; prints the run directory last"


def add_arguments(parser) -> None:
    parser.add_argument("recipe", help="recipe name (see `iolab recipes`), recipe .yaml file, or plain .fio job file")
    parser.add_argument("--target", action="append", metavar="PATH",
                        help="directory or file on a mounted file system, a block device (needs --confirm "
                             "when it carries data), or emulated:NAME; repeat for several targets "
                             "(required unless --hosts gives each host its target)")
    parser.add_argument("--label", help="a name for this system in reports (default: the host name)")
    parser.add_argument("--isolation", choices=["cgroup", "hugepages", "direct", "none"],
                        help="cache isolation (default: the recipe's; direct for O_DIRECT recipes)")
    parser.add_argument("--mem-limit", metavar="SIZE", help="memory the test may use for page cache (default 512M)")
    parser.add_argument("--size", metavar="SIZE", help="test file size, e.g. 1G")
    parser.add_argument("--runtime", metavar="SECONDS", help="seconds per test")
    parser.add_argument("--repeat", type=int, metavar="N", help="passes per test")
    parser.add_argument("--pause", metavar="SECONDS",
                        help="pause between tests (default: the recipe's, e.g. crystaldiskmark's 5 s; 0 for none)")
    parser.add_argument("--log-interval", metavar="MS",
                        help="also record fio's bandwidth, IOPS and latency logs of every test pass, one sample "
                             "per MS milliseconds (kept in the run's raw/, drawn over time in the report)")
    parser.add_argument("--ioengine", metavar="NAME",
                        help="fio I/O engine for every test (libaio, io_uring, psync...: `fio --enghelp` lists "
                             "them; default: the recipe's, io_uring where qd-sweep and crystaldiskmark prefer it "
                             "and the kernel offers it); recorded in the manifest")
    parser.add_argument("--preset", help="recipe preset (e.g. crystaldiskmark: default, nvme, peak, nvme-peak, "
                                         "real-world, demo, mix)")
    parser.add_argument("--mix", nargs="?", const="R70", metavar="R70",
                        help="also run each chosen test's mixed row (crystaldiskmark: MIX-<test>) after the reads "
                             "and writes, with this share of reads: R10 to R90 in steps of 10 (default R70, "
                             "as CrystalDiskMark and KDiskMark)")
    parser.add_argument("--tests", metavar="NAME,...", type=_test_names,
                        help="run only these tests of the recipe (comma-separated, see `iolab recipes NAME`)")
    parser.add_argument("--data", default="data", metavar="DIR", help="result store (default: ./data)")
    parser.add_argument("--confirm", metavar="PATH", action="append",
                        help="allow writing to this exact block device, or overwriting this existing file "
                             "(repeat for several)")
    parser.add_argument("--allow-path", metavar="PATH", action="append", default=[],
                        help="let the jobs open this file, device or directory tree outside the targets "
                             "(repeat for several; recorded in the manifest)")
    parser.add_argument("--allow-exec", action="store_true",
                        help="let the jobs run programs (exec_prerun/exec_postrun, ioengine=exec, external "
                             "engines, triggers); recorded in the manifest")
    parser.add_argument("--unconfined", action="store_true",
                        help="run even where bubblewrap cannot confine fio to the targets (the kernel then "
                             "enforces no boundary; the manifest and the report say the run was unconfined)")
    parser.add_argument("--keep-serials", action="store_true",
                        help="record the drives' serial numbers as they are (default: a SHA-256 digest of each)")
    parser.add_argument("--with-original", action="store_true",
                        help="also run the original tool (bonnie++, hdparm) where the recipe emulates one")
    parser.add_argument("--simultaneous", action="store_true",
                        help="measure all --target at the same time (one fio per pass, one job per target, e.g. "
                             "an array's members): each target keeps its rows, plus a total row (target "
                             "'a+b', column simultaneous=total); fio recipes only")
    parser.add_argument("--no-ceiling-probe", action="store_true",
                        help="make an emulated:PROFILE target without first probing what this host reaches under "
                             "its declared limits (a few seconds of fio; the manifest says the probe was skipped)")
    parser.add_argument("--dry-run", action="store_true", help="print the job files and commands; run nothing")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars (nor, when stderr is not a terminal, the line per finished test)")
    steady = parser.add_argument_group("steady state (the steady-state recipe; the round is --runtime)")
    steady.add_argument("--precondition-size", metavar="SIZE",
                        help="bytes preconditioning writes (default 2x the test area, as SNIA's PTS; 0: none)")
    steady.add_argument("--max-rounds", metavar="N", help="rounds at most (default 25, as the PTS; 5 or more)")
    steady.add_argument("--max-time", metavar="SECONDS",
                        help="time for preconditioning and rounds together, e.g. 2h (default: no bound)")
    fleet = parser.add_argument_group("many servers (fio client/server; see examples/inventory.yaml)")
    fleet.add_argument("--hosts", metavar="INVENTORY",
                       help="run on the fio servers of this inventory YAML, all at once through one fio client; "
                            "prints each host's run directory, then the fleet directory last")
    fleet.add_argument("--sequential", action="store_true", help="with --hosts: one host after another")
    fleet.add_argument("--scale-hosts", action="store_true",
                       help="with --hosts: run with the first 1, 2, ..., N hosts at once (throughput vs hosts)")
    fleet.add_argument("--insecure-network", action="store_true",
                       help="with --hosts: allow fio's unauthenticated protocol to non-loopback addresses "
                            "without an SSH tunnel (recorded in every manifest)")


def _test_names(text: str) -> list[str]:
    """``--tests a,b``: the names, refusing a list that names none (``--tests ,``)."""
    import argparse
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no test named in {text!r} (e.g. --tests seq-read,rand-read)")
    return names


def run_options(args):
    """The run's :class:`~iolab.engine.runoptions.RunOptions` from the parsed command line (checked there)."""
    from iolab.engine.runoptions import Allowances, RunOptions
    return RunOptions(label=args.label, data_dir=args.data, isolation=args.isolation, mem_limit=args.mem_limit,
                      size=args.size, runtime=args.runtime, repeat=args.repeat, pause=args.pause,
                      preset=args.preset, tests=args.tests, mix=args.mix,
                      log_interval_ms=args.log_interval, ioengine=args.ioengine,
                      confirm=args.confirm, allow=Allowances(paths=tuple(args.allow_path), exec=args.allow_exec),
                      unconfined=args.unconfined, keep_serials=args.keep_serials, with_original=args.with_original,
                      simultaneous=args.simultaneous, ceiling_probe=not args.no_ceiling_probe,
                      progress=False if args.no_progress else None, argv=sys.argv)


def run(args) -> int:
    from iolab.engine import dryrun, runner
    from iolab.core.errors import IolabError
    if args.hosts:
        return _run_fleet(args)
    if args.sequential or args.scale_hosts or args.insecure_network:
        raise IolabError("--sequential, --scale-hosts and --insecure-network go with --hosts INVENTORY")
    if not args.target:
        raise IolabError("give --target PATH (or --hosts INVENTORY)", context="iolab run")
    options = run_options(args)
    from iolab.classic.steady_options import bounded  # typed into the recipe's options, for its engine
    recipe = bounded(args.recipe, precondition_size=args.precondition_size, max_rounds=args.max_rounds,
                     max_time=args.max_time)
    if args.dry_run:
        if options.simultaneous:
            from iolab.engine import simultaneous
            print(simultaneous.dry_run(*runner.plan(recipe, args.target, options)))
        else:
            print(dryrun.dry_run(recipe, args.target, options))
        print("dry run: nothing was created or run")
        return 0
    result = runner.run(recipe, args.target, options)
    status = result.manifest["status"]
    if status != "completed":
        print(f"iolab: run {status}: {result.manifest.get('reason')}", file=sys.stderr)
    print(result.path)
    return 0 if status == "completed" else 1


def _run_fleet(args) -> int:
    from iolab.fleet import runs as fleet
    options = run_options(args)  # the one value the local path takes too; the fleet uses what it can
    _refuse_with_hosts(args, options)
    if args.dry_run:
        print(fleet.dry_run(args.recipe, args.hosts, options, sequential=args.sequential,
                            insecure_network=args.insecure_network))
        print("dry run: nothing was created, run or connected")
        return 0
    if args.scale_hosts:
        results = fleet.scale(args.recipe, args.hosts, options, insecure_network=args.insecure_network)
    else:
        results = [fleet.run(args.recipe, args.hosts, options, sequential=args.sequential,
                             insecure_network=args.insecure_network)]
    ok = True
    for result in results:
        for name, path in result.hosts.items():
            print(path)
        for name, reason in result.failed_hosts.items():
            print(f"iolab: host {name} failed: {reason}", file=sys.stderr)
        if result.manifest["status"] != "completed":
            ok = False
            print(f"iolab: fleet run {result.manifest['status']}: {result.manifest.get('reason')}", file=sys.stderr)
        print(result.path)
    return 0 if ok else 1


def _refuse_with_hosts(args, options) -> None:
    """Refuse the run options a fleet run cannot honour, each by its flag and why."""
    from iolab.core.errors import IolabError
    where = "iolab run --hosts"
    for option, value in (("--target", args.target), ("--mem-limit", options.mem_limit),
                          ("--confirm", options.confirm), ("--with-original", options.with_original),
                          ("--unconfined", options.unconfined), ("--allow-path", options.allow.paths),
                          ("--allow-exec", options.allow.exec), ("--no-ceiling-probe", not options.ceiling_probe)):
        if value:
            raise IolabError(f"{option} does not go with --hosts: the inventory gives each host's target "
                             "(and 'confirm'); jobs run inside the fio servers, out of reach of cgroups", context=where)
    if options.simultaneous:
        raise IolabError("--simultaneous measures one host's targets together; --hosts already runs its hosts "
                         "at once (one target each)", context=where)
    if options.keep_serials:
        raise IolabError("--keep-serials does not go with --hosts: a fleet run records no drive identity yet",
                         context=where)
    steady = [flag for flag, value in (("--precondition-size", args.precondition_size),
                                       ("--max-rounds", args.max_rounds), ("--max-time", args.max_time))
              if value is not None]
    if steady:
        raise IolabError(f"{steady[0]} bounds a steady-state run on one host; a fleet run has no steady-state engine",
                         context=where)
    for option, value, why in (("--mix", options.mix, "a fleet run records no mixed figure"),
                               ("--ioengine", options.ioengine, "no fio server is probed for its engines"),
                               ("--log-interval", options.log_interval_ms, "a fleet run keeps its own IOPS log"),
                               ("--pause", options.pause, "the fleet uses the recipe's pause")):
        if value is not None:
            raise IolabError(f"{option} is not supported with --hosts yet: {why}", context=where)
    if args.sequential and args.scale_hosts:
        raise IolabError("--scale-hosts runs hosts at the same time; drop --sequential", context="iolab run")
