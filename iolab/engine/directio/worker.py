"""The worker's entry: one operation by name, its spec as JSON on the command line, one JSON
document on stdout (see :mod:`iolab.engine.directio`)."""
from __future__ import annotations

import json
import signal
import sys

if __package__:
    from . import bonnie_ops, timed_reads
    from .common import WorkerError
else:  # run as a directory by the engines (python -I -S .../directio): no package, stdlib only
    import bonnie_ops  # type: ignore[no-redef]
    import timed_reads  # type: ignore[no-redef]
    from common import WorkerError  # type: ignore[no-redef]

OPS = {
    "gnome-transfer": timed_reads.gnome_transfer,
    "gnome-access": timed_reads.gnome_access,
    "hdparm-cached": timed_reads.hdparm_cached,
    "bonnie-putc": bonnie_ops.bonnie_putc,
    "bonnie-getc": bonnie_ops.bonnie_getc,
    "bonnie-rewrite": bonnie_ops.bonnie_rewrite,
    "bonnie-seeks": bonnie_ops.bonnie_seeks,
}


def _interrupt(signum, frame):
    """SIGTERM (the sandbox stopping us) unwinds like Ctrl-C: seek children are killed, files closed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in OPS:
        print(json.dumps({"error": f"usage: python -I -S directio {{{'|'.join(OPS)}}} SPEC_JSON"}))
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = OPS[argv[0]](json.loads(argv[1]))
    except KeyboardInterrupt:
        print(json.dumps({"error": "interrupted"}))
        return 130
    except (WorkerError, OSError, ValueError, KeyError) as exc:
        print(json.dumps({"error": str(exc) or type(exc).__name__}))
        return 1
    print(json.dumps(result))
    return 0
