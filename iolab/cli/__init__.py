"""Command line: ``iolab <command> ...``.

Each command is a module in this package defining ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; commands are discovered,
so adding a module adds a command. Commands parse and call the library;
:func:`main` is the only place that turns an :class:`~iolab.core.errors.IolabError`
into a message and an exit code.

Nothing imports the CLI.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from iolab import __version__
from iolab.core.errors import IolabError

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation", "devices", "engine", "classic", "fleet", "interop", "report", "explorer",
              "lab")

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def _commands() -> dict:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "run") and hasattr(module, "add_arguments"):
            found[getattr(module, "NAME", info.name)] = module
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iolab", description="Reproducible storage benchmarks with fio, cache isolation and article-style reports.")
    parser.add_argument("--version", action="version", version=f"iolab {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _commands().items():
        command = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="iolab: %(levelname)s: %(message)s")
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USER_ERROR
    from iolab.engine.runner import sigterm_interrupts
    try:
        with sigterm_interrupts():  # SIGTERM cleans up like Ctrl-C: devices, cgroups, fio
            return int(args._run(args) or 0)
    except IolabError as exc:
        print(f"iolab: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("iolab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `iolab devices | head`: the reader has gone, which is fine
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def entry_point() -> None:  # console script
    sys.exit(main())
