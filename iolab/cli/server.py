"""``iolab server [--port N | --socket PATH]``: a fio server for ``iolab run --hosts``."""
from __future__ import annotations

import signal
import sys
import time

HELP = "start a fio server on 127.0.0.1 or a Unix socket for `iolab run --hosts`; Ctrl-C or SIGTERM stops it"
DESCRIPTION = (
    "Start `fio --server` bound to 127.0.0.1 (or a Unix socket, mode 0600) and keep it running until "
    "Ctrl-C or SIGTERM, then stop it and every process it forked. fio's server has no authentication: "
    "it is never put on a network address; other machines reach it through an SSH tunnel that "
    "`iolab run --hosts` opens (inventory entry `ssh: user@host`).")


def add_arguments(parser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", metavar="N",
                       help="TCP port on 127.0.0.1 (default: fio's 8765; 0 picks a free port)")
    where.add_argument("--socket", metavar="PATH",
                       help="listen on this Unix socket instead (mode 0600: only its owner can connect)")
    parser.add_argument("--name", help="host name to show in the inventory entry (default: this machine's)")


class _Stop(Exception):
    pass


def _on_sigterm(signum, frame):
    raise _Stop()


def _port(text: str) -> int:
    """``--port`` checked before anything starts: a number 0-65535 (0: a free one)."""
    from iolab.fleet import fioserver
    from iolab.core.errors import IolabError
    try:
        port = int(text.strip())
    except ValueError:
        raise IolabError(f"must be a TCP port number, got {text!r}", context="--port") from None
    return fioserver.check_port(port, context="--port")


def run(args) -> int:
    from iolab.fleet import fioserver
    from iolab.engine.store import hostname
    port = None if args.socket else (fioserver.DEFAULT_PORT if args.port is None else _port(args.port))
    server = fioserver.start(port=port, socket=args.socket)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    name = args.name or hostname()
    try:
        ep = server.endpoint
        print(f"fio server listening on {ep} (pid {server.pid}); Ctrl-C or SIGTERM stops it")
        print(f"  plain fio:        fio --client={ep.client_spec} JOBFILE")
        if ep.kind == "unix":
            print(f"  inventory entry:  - {{name: {name}, socket: {ep.path}, target: /path/on/this/machine}}")
        else:
            print(f"  inventory entry:  - {{name: {name}, address: {ep.address}, port: {ep.port}, "
                  "target: /path/on/this/machine}")
            print(f"  from elsewhere:   - {{name: {name}, ssh: USER@{name}, port: {ep.port}, "
                  "target: /path/on/this/machine}  (iolab opens the SSH tunnel)")
        sys.stdout.flush()
        while server.running:
            time.sleep(0.5)
        print(f"iolab: the fio server exited by itself: {server.output().strip() or 'no message'}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        print("fio server stopped", file=sys.stderr)
