"""``iolab server [--socket PATH | --tcp-loopback-any-local-user [--port N]] [--allow-path PATH ...]``."""
from __future__ import annotations

import signal
import sys
import time

HELP = ("start a fio server on a Unix socket only you can reach, for `iolab run --hosts`; "
        "Ctrl-C or SIGTERM stops it")
DESCRIPTION = (
    "Start `fio --server` and keep it running until Ctrl-C or SIGTERM, then stop it and every process it "
    "forked. fio's server has no authentication: whoever can connect runs any job. By default it listens "
    "on a Unix socket (mode 0600) in a directory only you can enter (root: /run/iolab/servers/fio.sock); "
    "other machines reach it through SSH, which `iolab run --hosts` opens (inventory entry "
    "`ssh: user@host`, the socket forwarded). The server is confined by the kernel (bubblewrap): jobs can "
    "write only the --allow-path paths. TCP is used only with --tcp-loopback-any-local-user.")


def add_arguments(parser) -> None:
    parser.add_argument("--socket", metavar="PATH",
                        help="listen on this Unix socket (its directory must be yours alone, mode 0700; "
                             "default: /run/iolab/servers/fio.sock for root, a private directory of yours otherwise)")
    parser.add_argument("--tcp-loopback-any-local-user", action="store_true",
                        help="listen on TCP 127.0.0.1 instead: EVERY local user of this machine can then connect "
                             "and have the server run any job with your rights")
    parser.add_argument("--port", metavar="N",
                        help="with --tcp-loopback-any-local-user: the TCP port (default: fio's 8765; 0 picks a free one)")
    parser.add_argument("--allow-path", metavar="PATH", action="append", default=[],
                        help="a directory, file or block device jobs may write (repeatable); nothing else is "
                             "writable to the server")
    parser.add_argument("--unconfined", action="store_true",
                        help="run fio without the kernel's confinement where it cannot be had: jobs can then "
                             "write anything your user can")
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


def _where(args) -> dict:
    from iolab.core.errors import IolabError
    if args.tcp_loopback_any_local_user:
        if args.socket:
            raise IolabError("give --socket or --tcp-loopback-any-local-user, not both", context="--socket")
        from iolab.fleet import fioserver
        return {"port": fioserver.DEFAULT_PORT if args.port is None else _port(args.port)}
    if args.port is not None:
        raise IolabError("TCP on 127.0.0.1 lets every local user run jobs on this server; add "
                         "--tcp-loopback-any-local-user to mean that, or drop --port for the private Unix socket",
                         context="--port")
    return {"socket": args.socket} if args.socket else {}


def run(args) -> int:
    from iolab.fleet import fioserver
    from iolab.engine.store import hostname
    where = _where(args)
    server = fioserver.start(**where, writable=args.allow_path, confined=not args.unconfined)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    name = args.name or hostname()
    try:
        ep = server.endpoint
        confined = server.confinement
        print(f"fio server listening on {ep} (pid {server.pid}); Ctrl-C or SIGTERM stops it")
        if ep.kind == "tcp":
            print(f"  WARNING: every local user of this machine can connect to {ep} and run any job")
        print("  confined:         " + (f"yes; jobs may write {', '.join(confined['writable'] + confined['devices'])}"
                                        if confined["confined"] and confined["writable"] + confined["devices"]
                                        else "yes; jobs may write nothing" if confined["confined"]
                                        else f"NO ({confined.get('reason')})"))
        print(f"  plain fio:        fio --client={ep.client_spec} JOBFILE")
        if ep.kind == "unix":
            print(f"  inventory entry:  - {{name: {name}, socket: {ep.path}, target: /path/on/this/machine}}")
            print(f"  from elsewhere:   - {{name: {name}, ssh: USER@{name}, remote_socket: {ep.path}, "
                  "target: /path/on/this/machine}  (iolab forwards the socket over SSH)")
        else:
            print(f"  inventory entry:  - {{name: {name}, address: {ep.address}, port: {ep.port}, "
                  "target: /path/on/this/machine}")
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
