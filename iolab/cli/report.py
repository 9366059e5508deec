"""``iolab report [RUN_DIR ...] [--data DIR] [--lang en|ja] [--out DIR]``"""
from __future__ import annotations

HELP = "render a report (HTML without code, Markdown, executed notebook) from runs; prints the HTML path last"

DESCRIPTION = (
    "Execute the report notebook (or the comparison article with --notebook compare) with papermill for the "
    "given run directories (or every run under --data) and write NAME.ipynb, NAME.html (no code, images "
    "embedded, opens offline) and NAME.md with its figures into --out. The HTML path is the last line printed."
)


def add_arguments(parser) -> None:
    from iolab.report.i18n import LANGS
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR",
                        help="run directories, or directories holding runs (default: every run under --data)")
    parser.add_argument("--data", default="data", metavar="DIR", help="result store to read when no RUN_DIR is given (default: ./data)")
    parser.add_argument("--lang", default="en", help=f"report language: {' or '.join(LANGS)} (default: en)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: reports/<timestamp>/)")
    parser.add_argument("--notebook", default="report", metavar="NAME",
                        help="report (one table per recipe, default), compare (the article) or a notebook path")
    parser.add_argument("--reference", metavar="ARTICLE",
                        help="render a published article from data/reference/ instead of runs, "
                             "e.g. dedicated-server-2013")
    parser.add_argument("--host", action="append", help="only runs of this host (repeatable)")
    parser.add_argument("--label", action="append", help="only runs with this label (repeatable)")
    parser.add_argument("--recipe", action="append", help="only runs of this recipe (repeatable)")
    parser.add_argument("--title", help="report title (default: per language)")


def run(args) -> int:
    from iolab.report import notebooks as report
    files = report.report(args.runs, data=args.data, lang=args.lang, out=args.out, notebook=args.notebook,
                          reference=args.reference, title=args.title, host=args.host, label=args.label,
                          recipe=args.recipe)
    print(f"notebook: {files.notebook}")
    print(f"markdown: {files.markdown} ({len(files.figures)} figure files)")
    print(files.html)
    return 0
