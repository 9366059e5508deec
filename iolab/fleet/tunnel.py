"""SSH forwarding of fio servers' Unix sockets: ``ssh -N -L <private local socket>:<remote socket> user@host``.

fio's protocol has no authentication. The far end is the server's socket in a
directory only its owner can enter (``iolab server``'s default
``/run/iolab/servers/fio.sock``): sshd connects to it as the user SSH logged in
as, so only someone who can log in as the server's owner reaches it. The near
end is a socket (mode 0600, ``StreamLocalBindMask=0177``) in a private
directory (0700) of the user running iolab: no TCP port another local user
could connect to exists on either side.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time

from iolab.fleet import fioserver, privatedir
from iolab.fleet.inventory import Host
from iolab.core.deadline import Deadline
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: How long an SSH tunnel gets to come up.
TUNNEL_TIMEOUT_S = 20.0

class Tunnel:
    """``ssh -N -L <private local socket>:<remote socket> user@host`` for one host."""

    def __init__(self, host: Host, workdir: str | os.PathLike):
        self.host = host
        self.path = os.path.join(os.fspath(workdir), f"{host.name}.sock")
        self._proc: subprocess.Popen | None = None
        self._err = None
        self._argv: list[str] | None = None

    @property
    def endpoint(self) -> fioserver.Endpoint:
        return fioserver.Endpoint("unix", path=self.path)

    def argv(self) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise IolabError("ssh is not installed", context=self.host.context,
                             hint="install it with: apt-get install openssh-client")
        argv = [ssh, "-N", "-T", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                "-o", "StreamLocalBindUnlink=yes", "-o", "StreamLocalBindMask=0177",
                "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.host.ssh_port:
            argv += ["-p", str(self.host.ssh_port)]
        if self.host.identity:
            argv += ["-i", self.host.identity, "-o", "IdentitiesOnly=yes"]
        for key, value in self.host.ssh_options.items():
            argv += ["-o", f"{key}={value}"]
        argv += ["-L", f"{self.path}:{self.host.remote_socket}", "--", self.host.ssh]
        return argv

    def open(self, timeout: float = TUNNEL_TIMEOUT_S) -> "Tunnel":
        privatedir.check_socket_dir(self.path)  # the near end: in a directory only this user can enter
        argv = self._argv = self.argv()
        if len(self.path.encode()) >= 108:
            raise IolabError("tunnel socket path too long", context=self.path)
        self._err = tempfile.TemporaryFile(prefix="iolab-ssh-")
        log.info("opening SSH tunnel: %s", " ".join(argv))
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._err, start_new_session=True)
        deadline = Deadline(timeout)
        while not fioserver.listening(self._proc.pid, self.endpoint):
            if self._proc.poll() is not None or deadline.expired():
                detail = self._stderr() or (f"ssh exited with {self._proc.returncode}" if self._proc.poll() is not None
                                            else f"no tunnel within {timeout:g} s")
                self.close()
                raise IolabError(f"SSH tunnel to {self.host.ssh} failed: {detail}", context=self.host.context)
            time.sleep(0.05)
        log.info("SSH tunnel to %s up (pid %d): %s -> %s", self.host.ssh, self._proc.pid, self.path,
                 self.host.remote_socket)
        return self

    def _stderr(self) -> str:
        if self._err is None or self._err.closed:
            return ""
        self._err.seek(0)
        lines = [l.strip() for l in self._err.read().decode(errors="replace").splitlines() if l.strip()]
        lines = [l for l in lines if not l.startswith("Warning: Permanently added")]
        return "; ".join(lines[-3:])

    def describe(self) -> dict:
        return {"ssh": self.host.ssh, "ssh_port": self.host.ssh_port, "local_socket": self.path,
                "remote": f"unix:{self.host.remote_socket}",
                "argv": self._argv}

    def close(self) -> None:
        if self._proc is not None:
            fioserver.stop_group(self._proc, grace=3.0)
            log.info("SSH tunnel to %s closed", self.host.ssh)
            self._proc = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._err is not None and not self._err.closed:
            self._err.close()

    def __enter__(self) -> "Tunnel":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


