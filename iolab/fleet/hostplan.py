"""A host during a fleet run (:class:`HostPlan`) and what is decided for it before anything runs:
its target's kind, its job files (rendered and checked), the isolation the servers can give,
its run directory.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import secrets
from pathlib import Path

from iolab.engine import fio, targets as targets_mod
from iolab.engine.jobfile import check as jobcheck
from iolab.engine.store import Run, safe_name, utcnow
from iolab.fleet import fioserver, gate as fleetgate
from iolab.fleet.inventory import Host, Inventory
from iolab.fleet.tunnel import Tunnel
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: IOPS log interval (ms) behind ``start_ms``.
LOG_MS = 100

@dataclasses.dataclass
class HostPlan:
    """A host during a run: its target, run directory, job files, endpoint, state."""

    host: Host
    kind: str                       # dir | file | device
    path: str                       # target as fio sees it on the server
    test_file: str | None = None    # file iolab lays out in a dir target
    run: Run | None = None
    jobs: dict = dataclasses.field(default_factory=dict)   # step id -> job file path
    endpoint: fioserver.Endpoint | None = None
    tunnel: Tunnel | None = None
    status: str = "pending"         # pending | running | completed | failed | interrupted
    reason: str | None = None
    failed_at: str | None = None

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def alive(self) -> bool:
        return self.status in ("pending", "running")

    @property
    def filename(self) -> str:
        return self.test_file or self.path

    def fail(self, reason: str, where: str | None = None) -> None:
        if self.alive:
            self.status, self.reason, self.failed_at = "failed", reason, where
            log.warning("host %s failed%s: %s", self.name, f" at {where}" if where else "", reason)


def target_kind(host: Host, recipe, writes: bool) -> tuple[str, str]:
    """(kind, path) of a host's target; local servers' targets are checked here like --target."""
    if host.target.startswith(targets_mod.EMULATED_PREFIX):
        raise IolabError("emulated devices need the single-host engine (iolab run --target)",
                         context=f"{host.context}.target")
    if host.local:
        resolved = targets_mod.resolve([host.target], size=recipe.size, writes=writes, confirm=host.confirm)[0]
        kind = {"block": "device"}.get(resolved.kind, resolved.kind)
        if host.target_kind and host.target_kind != kind:
            raise IolabError(f"is a {kind} here, not a {host.target_kind}", context=f"{host.context}.target")
        return kind, resolved.path
    kind = host.target_kind or ("device" if host.target.startswith("/dev/") else "dir")
    if kind == "device" and writes and host.confirm != host.target:
        raise IolabError(
            "writing to a device on another machine: iolab cannot check there whether it is mounted or "
            "holds data", context=f"{host.context}.target",
            hint=f"add 'confirm: {host.target}' to this host if that device may be overwritten")
    return kind, host.target


def check_job(text: str, source: str, plan: HostPlan, inventory: Inventory) -> None:
    """What a fio server would run (jobcheck) and open (fleetgate: only inside the host's target)."""
    jobcheck.check_text(text, source, allow=inventory.allow_job_options)
    fleetgate.check(text, source, root=plan.path, local=plan.host.local, context=plan.host.context,
                    allow_code="exec" in inventory.allow_job_options)


def writes_data(recipe) -> bool:
    return recipe.jobfile is not None or any(
        "write" in s.rw or s.rw in ("rw", "readwrite", "randrw", "trimwrite") for s in recipe.steps())


def isolation_of(recipe) -> dict:
    requested = recipe.isolation
    mode = "none" if requested == "none" else "direct"
    forced = mode == "direct" and requested != "direct" and recipe.buffered and recipe.jobfile is None
    info = {"mode": mode, "requested": requested, "fallback": mode != requested,
            "forced_o_direct": forced, "buffered": recipe.buffered, "verified": None,
            "note": "jobs run inside the fio servers, out of reach of iolab's cgroups and hugepage "
                    "reservations; O_DIRECT keeps the page cache out" if mode == "direct" else
                    "deliberately cached (isolation none)"}
    if mode != requested:
        log.warning("isolation %s cannot be applied to jobs run by fio servers; using direct (O_DIRECT)",
                    requested)
    return info


def job_text(recipe, step, plan: HostPlan, *, force_direct: bool, last_step: bool) -> str:
    logging_options = {"write_iops_log": plan.name, "log_unix_epoch": 1, "log_avg_msec": LOG_MS}
    if recipe.jobfile is not None:
        lines = [f"; written by iolab for host {plan.name}: these [global] options come first,",
                 "; the job file follows as it was given", "[global]"]
        for key, value in {**fio.REPORTING_OPTIONS, **logging_options}.items():
            lines.append(f"{key}={value}")
        if plan.kind == "dir":
            lines.append(f"directory={plan.path}")
        return "\n".join(lines) + "\n\n" + recipe.jobfile
    from iolab.engine.fio import job_options
    target = targets_mod.Target(spec=plan.host.target, kind={"device": "block"}.get(plan.kind, plan.kind),
                                path=plan.path, name=plan.name, test_file=plan.test_file)
    global_options, options = job_options(recipe, step, target, force_direct=force_direct)
    global_options.update(logging_options)
    if plan.kind == "dir" and last_step:
        global_options["unlink"] = 1  # the server removes iolab's test file after the last test
    return fio.render_job(step.id, options, global_options)


def new_fleet_id(recipe_name: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{safe_name(recipe_name)}-{secrets.token_hex(2)}"


def new_run(data_dir, host: str, run_id: str, *, recipe: str, label: str, directory: str | None = None,
             **manifest) -> Run:
    """A run directory ``data_dir/<directory or host>/<run_id>`` (the id is given: hosts share the fleet's)."""
    parent = Path(data_dir) / (directory or host)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        (parent / run_id).mkdir()
    except FileExistsError as exc:
        raise IolabError("a run directory with this id exists already", context=str(parent / run_id)) from exc
    except OSError as exc:
        raise IolabError(f"cannot create the run directory: {exc.strerror}", context=str(parent / run_id)) from exc
    base = {"schema": 1, "run_id": run_id, "host": host, "label": label, "recipe": recipe,
            "status": "running", "started": utcnow(), "ended": None}
    run = Run(parent / run_id, {**base, **manifest})
    run.save_manifest()
    return run


# =========================================================================== results
