"""``iolab import PATH... [--data DIR] [--label TEXT] [--host NAME]``"""
from __future__ import annotations

NAME = "import"
HELP = "bring in fio JSON, bench-fio trees and CrystalDiskMark/KDiskMark text exports as runs"
DESCRIPTION = (
    "Each PATH is a fio JSON output file (json or json+, also with fio's text around it, several "
    "documents, client/server output), a folder of them, a bench-fio output tree "
    "(<target>/<bs>/<rw>-<iodepth>-<numjobs>.json: one run per target) or a CrystalDiskMark (3.x, "
    "5.x/6.x, 7.x/8.x) or KDiskMark text export. Each becomes a run in DIR/<host>/<run_id>/ with the "
    "imported files untouched in raw/ and a manifest saying where it came from and which tool "
    "measured it (not iolab). Prints each run directory, the last one last.")


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a file or a directory to import")
    parser.add_argument("--data", default="data", metavar="DIR", help="results directory (default: data)")
    parser.add_argument("--label", help="the system's name in reports (default: the file's or target's name)")
    parser.add_argument("--host", help="the machine that was measured (default: 'imported')")


def run(args) -> int:
    from iolab.interop import imports
    for run_dir in imports.import_paths(args.paths, data_dir=args.data, label=args.label, host=args.host):
        print(run_dir)
    return 0
