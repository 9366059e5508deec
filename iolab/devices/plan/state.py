"""A plan's state file (:class:`State`, :func:`status`) and what setup and teardown share: running a
command, holding signals off, whether the process that set up still runs (see :mod:`iolab.devices.plan`)."""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import shlex
import signal
import tempfile
import threading
from pathlib import Path

from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.core.files import atomic_write
from iolab.devices.plan.model import STATE_VERSION, Plan, state_path

log = logging.getLogger("iolab.devices.plan")
#: how long the kernel may take to make a device a step created appear (partitions, an array, a dm device)
DEVICE_WAIT = 10.0


# ------------------------------------------------------------------- state

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class State:
    """The state file of one plan: ``data`` as JSON, written atomically at every change."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def create(cls, plan: Plan) -> "State":
        """Create the state file, failing if it exists (written complete, then linked into
        place: a concurrent setup or teardown never sees it half-written)."""
        path = plan.state_path
        state = cls(path, {"state_version": STATE_VERSION, "plan": str(plan.path), "plan_name": plan.name,
                           "plan_sha256": plan.sha256, "started": _now(), "updated": _now(),
                           "status": "setting up", "pid": os.getpid(), "boot_id": _boot_id(),
                           "devices": {}, "steps": []})
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".new")
        except OSError as exc:
            raise IolabError(f"cannot create the state file {path}: {exc.strerror}", context=str(plan.path),
                             hint="the plan's directory must be writable") from exc
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(state.data, indent=2) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.link(tmp, path)
        except FileExistsError:
            raise IolabError(f"already set up, or a setup is running (state file {path})",
                             context=str(plan.path), hint=f"run: iolab teardown {plan.path}") from None
        except OSError as exc:
            raise IolabError(f"cannot create the state file {path}: {exc.strerror}", context=str(plan.path)) from exc
        finally:
            Path(tmp).unlink(missing_ok=True)
        return state

    @classmethod
    def read(cls, path: Path) -> "State | None":
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise IolabError(f"cannot read: {exc.strerror}", context=str(path)) from exc
        if not text.strip():  # created, then the process died before the first write
            return cls(path, {"steps": [], "devices": {}, "status": "empty"})
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise IolabError(f"unreadable state file: {exc}", context=str(path)) from exc
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise IolabError("not an iolab state file", context=str(path))
        return cls(path, data)

    def save(self) -> None:
        self.data["updated"] = _now()
        atomic_write(self.path, json.dumps(self.data, indent=2) + "\n")

    def begin(self, record: dict) -> dict:
        record["status"] = "pending"
        self.data["steps"].append(record)
        self.save()
        return record

    def done(self, record: dict, **fields) -> None:
        record.update(fields)
        record["status"] = "done"
        self.save()


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM logged and ignored while the block runs (teardown must finish); main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hold(signum, frame):
        log.warning("signal %s during teardown: finishing the teardown first", signum)

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_command(argv: list[str], progress) -> str:
    """Run one plan command (stdin empty: no tool may stop to ask a question)."""
    if progress:
        progress(shlex.join(argv))
    proc = commands.run(argv, input="", check=False)
    if proc.returncode != 0:
        raise IolabError(f"exited with {proc.returncode}: {_error_line(proc.stderr or proc.stdout)}",
                         context=shlex.join(argv))
    return proc.stdout


def _error_line(text: str) -> str:
    """The line that says what went wrong: the last one before a usage text (mkfs.xfs
    prints its whole usage after the error), else the last one."""
    lines = []
    for line in text.splitlines():
        if line.strip().lower().startswith("usage:"):
            break
        if line.strip():
            lines.append(line.strip())
    return lines[-1] if lines else "no output"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def setup_alive(pid: int, boot_id: str | None) -> bool:
    """Whether the setup process ``pid`` still runs (not a pid reused since a reboot)."""
    if boot_id is not None and boot_id != _boot_id():
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    # empty while the process is between fork and exec, or a zombie: count it as running
    return not cmdline.strip() or "iolab" in cmdline or "python" in cmdline


def status(plan: Plan | str | os.PathLike) -> dict | None:
    """What a set-up plan made (from its state file), or None when it is not set up."""
    path = plan.state_path if isinstance(plan, Plan) else state_path(plan)
    state = State.read(path)
    if state is None:
        return None
    mounts = {s["name"]: s["path"] for s in state.data["steps"] if s["kind"] == "mount" and s["status"] == "done"}
    return {"devices": dict(state.data.get("devices", {})), "mounts": mounts, "state": str(path),
            "status": state.data.get("status")}
