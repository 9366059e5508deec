"""``iolab export RUN_DIR --format fio-plot|cdm-text OUT_DIR``"""
from __future__ import annotations

HELP = "write a run the way other tools read it: fio-plot's folders, CrystalDiskMark's text"
DESCRIPTION = (
    "fio-plot: one folder per pass (warmup, pass-1 ...) and best (per test, the pass with the highest "
    "bandwidth), each in bench-fio's <bs>/<rw>-<iodepth>-<numjobs>.json layout, ready for "
    "`fio-plot -i OUT_DIR/best/4k ...`. cdm-text: the run's figures in CrystalDiskMark 8's text "
    "layout (best pass, or --statistic mean), one file per target; `iolab import` reads it back. "
    "Prints what it wrote, one path a line.")


def add_arguments(parser) -> None:
    from iolab.interop.exports import FORMATS
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (data/<host>/<run_id>)")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="where to write (made if missing)")
    parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt", help="what to write")
    parser.add_argument("--statistic", default="best", choices=("best", "mean"),
                        help="cdm-text: the best pass (CrystalDiskMark's figure, default) or the mean of the passes")


def run(args) -> int:
    from iolab.interop import exports
    for path in exports.export(args.run_dir, args.out_dir, fmt=args.fmt, statistic=args.statistic):
        print(path)
    return 0
