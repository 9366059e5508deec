"""The skeleton shared by the database engines (pgbench on PostgreSQL, sql-bench on MariaDB).

Both run a throw-away server on one target (a directory, or an emulated device
with a file system) inside the run's sandbox, measure test by test, and stop
and remove the server afterwards, also after errors, Ctrl-C and SIGTERM.
:class:`DatabaseEngine` holds what is the same: the target checks, opening the
target and the sandbox, the device counters, the server's removal and a test
record's life in the manifest. A subclass names itself (:attr:`TOOL`,
:attr:`SECTION`) and says what differs in its messages.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

from iolab.core.errors import IolabError
from iolab.core.signals import sigterm_raises
from iolab.engine import targets as targets_mod
from iolab.engine.interface import Engine
from iolab.engine.store import utcnow

log = logging.getLogger(__name__)


@contextlib.contextmanager
def signals(signum, handler):
    """``handler`` for ``signum`` while the block runs (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


class DatabaseEngine(Engine):
    """What pgbench's and sqlbench's engines share; built and driven by :func:`iolab.engine.runner.run`.

    An :class:`iolab.engine.interface.Engine`: :meth:`prepare` makes the database, :meth:`measure_step` runs
    one measurement, :meth:`annotate` makes its result row and :meth:`store` keeps it."""

    #: the engine's name in messages ("pgbench", "sqlbench") and its manifest section
    TOOL = ""
    #: what the server's files are called in messages ("cluster", "server")
    SERVER_WORD = "server"
    #: hint when the target is not a directory
    SETUP_HINT = "make a file system on the device and mount it, then give its directory"
    #: refusal of --isolation direct: (message, hint)
    DIRECT_REFUSAL = ("", "")
    #: refusal of cgroup/hugepages isolation without root: (message suffix, hint)
    ROOT_REFUSAL = ("", "")
    #: the cleanup record's key saying the server's files are gone
    REMOVED_KEY = "server_removed"

    def __init__(self, recipe, targets, run_, *, mem_limit, progress, scratch_dir):
        self.recipe, self.targets, self.run = recipe, targets, run_
        self.mem_limit, self.progress, self.scratch_dir = mem_limit, progress, scratch_dir

    # ---- checks before anything is created on the target
    def check_target(self):
        """The one target, a directory or an emulated device; isolation the server's I/O allows."""
        if len(self.targets) != 1:
            raise IolabError(f"{self.TOOL} runs on one target at a time, got {len(self.targets)}",
                             context="--target", hint="run the recipe once per target; iolab.load() merges the runs")
        target = self.targets[0]
        if target.kind not in ("dir", "emulated"):
            raise IolabError(f"{self.TOOL} needs a directory on a mounted file system, not a {target.kind}",
                             context=f"--target {target.spec}", hint=self.SETUP_HINT)
        if self.recipe.isolation == "direct":
            raise IolabError(self.DIRECT_REFUSAL[0], context="--isolation direct", hint=self.DIRECT_REFUSAL[1])
        if os.geteuid() != 0 and self.recipe.isolation in ("cgroup", "hugepages"):
            raise IolabError(f"{self.recipe.isolation} isolation needs root{self.ROOT_REFUSAL[0]}",
                             context=f"--isolation {self.recipe.isolation}", hint=self.ROOT_REFUSAL[1])
        return target

    # ---- the target and the sandbox
    def open_target(self, stack: contextlib.ExitStack, target):
        """Open the target and the sandbox in ``stack`` (SIGTERM cleans up like Ctrl-C); (base dir, sandbox)."""
        from iolab.isolation.sandbox import open_sandbox
        stack.enter_context(sigterm_raises(lambda: KeyboardInterrupt("signal SIGTERM")))  # `kill`: like Ctrl-C
        stack.enter_context(targets_mod.opened(
            target, run_id=self.run.run_id, size=self.recipe.size, filesystem=self.recipe.filesystem,
            scratch_dir=self.scratch_dir))
        base = self.base_dir(target)
        self.run.update(targets=[target.describe()])
        throttles = list(target.emulated.throttles) if target.emulated is not None else []
        sandbox = stack.enter_context(open_sandbox(
            self.recipe.isolation, mem_limit=self.mem_limit, throttles=throttles, buffered=True))
        return base, sandbox

    def base_dir(self, target) -> str:
        """The directory the server's files go in; iolab lays out no test file there."""
        if target.kind == "dir":
            target.test_file, target.created_file = None, False
            return target.path
        mountpoint = target.emulated.mountpoint if target.emulated is not None else None
        if not mountpoint:
            raise IolabError(f"the emulated device has no file system for the {self.SERVER_WORD}",
                             context=target.spec, hint="set `filesystem: ext4` in the recipe")
        target.test_file = None
        return mountpoint

    def device_counter(self, base: str):
        """The block device counters of ``base``'s device, or None (the reason is in the manifest)."""
        from iolab.isolation.blockstat import BlockCounter
        try:
            return BlockCounter.for_path(base)
        except IolabError as exc:
            log.warning("no device I/O counters for %s: %s", base, exc)
            self.run.manifest[self.TOOL]["device_counters"] = str(exc)
            return None

    def destroy(self, server, info: dict) -> None:
        """Stop and remove the server; a second Ctrl-C or SIGTERM does not cut this short."""
        try:
            with signals(signal.SIGINT, signal.SIG_IGN), signals(signal.SIGTERM, signal.SIG_IGN):
                steps = server.destroy()
            info["cleanup"] = {"stop": steps, self.REMOVED_KEY: not server.root.exists(), "at": utcnow()}
        finally:
            self.run.save_manifest()

    # ---- a test's record in the manifest
    def run_test(self, record: dict, measure) -> None:
        """Run ``measure()`` (it returns the errors of its measurements) with ``record`` kept up to date:
        running, then completed, failed (its errors) or interrupted."""
        self.run.save_manifest()
        try:
            errors = measure()
        except KeyboardInterrupt:
            record.update(status="interrupted", ended=utcnow())
            self.run.save_manifest()
            raise
        except IolabError as exc:
            record.update(status="failed", ended=utcnow(), error=str(exc))
            self.run.save_manifest()
            raise
        record.update(status="failed" if errors else "completed", ended=utcnow(), error="; ".join(errors) or None)
        self.run.save_manifest()
