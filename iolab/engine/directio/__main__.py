"""``python -I -S iolab/engine/directio OP SPEC``: the directory runs as a script (see the package)."""
import sys

if __package__:
    from .worker import main
else:  # run as a directory: its modules are top-level, the standard library only
    from worker import main  # type: ignore[no-redef]

sys.exit(main())
