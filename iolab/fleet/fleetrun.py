"""One fleet run: every host's run directory and job files, its connection, and each test and
repetition through one ``fio --client=H1 job1 --client=H2 job2 ...`` (see :mod:`iolab.fleet.runs`).

:class:`FleetRun` is an :class:`iolab.engine.interface.Engine`: :meth:`FleetRun.prepare` writes every
host's run directory and checked job files, :meth:`FleetRun.measure_step` runs one test repetition on
every host at once, :meth:`FleetRun.annotate` adds a host's run columns and :meth:`FleetRun.store`
keeps its rows.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from iolab.engine import fio, sysinfo
from iolab.engine.fio.parse import documents
from iolab.engine.interface import Engine
from iolab.engine.runner import expected_seconds
from iolab.engine.store import Run, utcnow
from iolab.fleet import fioserver, privatedir
from iolab.fleet.hostplan import HostPlan, check_job, isolation_of, job_text, new_run, target_kind, writes_data
from iolab.fleet.hostresults import (aggregate, client_key, host_document, match, missing_reason, rows_by_host,
                                     start_times)
from iolab.fleet.inventory import ALL_HOSTS, FLEET_DIR, Host, Inventory
from iolab.fleet.tunnel import Tunnel
from iolab.core import progress as progress_, statedir
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)


class FleetRun(Engine):
    """The fleet's engine: one recipe on many hosts' fio servers, driven by :func:`iolab.fleet.runs.run`."""

    def __init__(self, recipe, hosts: list[Host], *, inventory: Inventory, fleet_id: str, data_dir, label,
                 sequential: bool, insecure_network: bool, exposed: list, argv, progress, timeout):
        self.recipe, self.hosts, self.inventory = recipe, hosts, inventory
        self.fleet_id, self.data_dir, self.label = fleet_id, Path(data_dir), label
        self.sequential, self.insecure, self.exposed = sequential, insecure_network, exposed
        self.argv, self.progress, self.timeout = argv, progress, timeout
        self.isolation = isolation_of(recipe)
        self.force_direct = self.isolation["forced_o_direct"]
        self.steps = recipe.steps()
        self.plans: list[HostPlan] = []
        self.fleet: Run | None = None
        self.frames: list[pd.DataFrame] = []

    # -- set-up ---------------------------------------------------------------------
    def prepare(self) -> None:
        writes = writes_data(self.recipe)
        kinds = [(host, *target_kind(host, self.recipe, writes)) for host in self.hosts]
        for host, kind, path in kinds:  # refuse unsafe job files before anything is created
            draft = HostPlan(host=host, kind=kind, path=path,
                             test_file=f"{path.rstrip('/')}/iolab-draft.dat" if kind == "dir" else None)
            for index, step in enumerate(self.steps):
                text = job_text(self.recipe, step, draft, force_direct=self.force_direct,
                                 last_step=index == len(self.steps) - 1)
                check_job(text, f"{host.name}: jobs/{step.id}.fio", draft, self.inventory)
        n = 1 if self.sequential else len(self.hosts)
        security = {"insecure_network": self.insecure, "hosts_over_network": self.exposed,
                    "tunnelled": [h.name for h in self.hosts if h.connection == "ssh"],
                    "allow_job_options": sorted(self.inventory.allow_job_options)}
        fleet_info = {"id": self.fleet_id, "mode": "sequential" if self.sequential else "simultaneous",
                      "inventory": os.path.abspath(self.inventory.source), "hosts": [h.name for h in self.hosts],
                      "n_hosts": n, "dir": str(self.data_dir / FLEET_DIR / self.fleet_id)}
        common = dict(recipe_description=self.recipe.description, tool=self.recipe.tool,
                      statistic=self.recipe.statistic,  # how the tool combines passes (as iolab.engine.runner)
                      versions=sysinfo.versions(), argv=self.argv, isolation=self.isolation, security=security,
                      options={"size": self.recipe.size, "runtime": self.recipe.runtime,
                               "repeat": self.recipe.repeat, "preset": self.recipe.preset,
                               "warmup": self.recipe.warmup,
                               "pause": self.recipe.pause})
        self.fleet = new_run(self.data_dir, ALL_HOSTS, self.fleet_id, directory=FLEET_DIR,
                              recipe=self.recipe.name,
                              label=self.label or f"{len(self.hosts)} hosts", controller=sysinfo.system(),
                              fleet={**fleet_info, "role": "fleet"}, hosts=[h.describe() for h in self.hosts],
                              **common)
        self.fleet.write("recipe.yaml", yaml.safe_dump(self.recipe.to_dict(), sort_keys=False, allow_unicode=True))
        self.fleet.write("inventory.yaml", yaml.safe_dump(
            {"hosts": [h.describe() for h in self.hosts]}, sort_keys=False, allow_unicode=True))
        for host, kind, path in kinds:
            run_id = f"{self.fleet_id}-{host.name}"
            plan = HostPlan(host=host, kind=kind, path=path)
            if kind == "dir":
                plan.test_file = f"{path.rstrip('/')}/iolab-{run_id}.dat"
            system = sysinfo.system() if host.local else {
                "note": f"not collected: the fio server runs on {host.ssh or host.address}"}
            target = {"spec": host.target, "kind": kind, "name": host.name, "path": path,
                      "test_file": plan.test_file, "server": host.describe()}
            if host.local:
                target.update(sysinfo.mount_of(path))
            plan.run = new_run(self.data_dir, host.name, run_id, recipe=self.recipe.name, label=host.label,
                                system=system, targets=[target], fleet={**fleet_info, "role": "host"},
                                tests=[{"name": s.id, "test": s.test, "rw": s.rw, "status": "pending", "reps": 0}
                                       for s in self.steps], **common)
            plan.run.write("recipe.yaml", yaml.safe_dump(self.recipe.to_dict(), sort_keys=False,
                                                         allow_unicode=True))
            self.plans.append(plan)
        self._write_jobs()

    def _write_jobs(self) -> None:
        """Render, check (jobcheck, then fio --parse-only) and keep every job file before anything runs."""
        paths = []
        for plan in self.plans:
            for index, step in enumerate(self.steps):
                text = job_text(self.recipe, step, plan, force_direct=self.force_direct,
                                 last_step=index == len(self.steps) - 1)
                path = plan.run.write(f"jobs/{step.id}.fio", text)
                check_job(text, str(path), plan, self.inventory)
                plan.jobs[step.id] = path
                paths.append(path)
        # fio --parse-only takes a few hundred ms each (fio's start-up): check them side by side
        with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
            for future in [pool.submit(fio.check_job, path) for path in paths]:
                future.result()

    def connect(self, stack: contextlib.ExitStack) -> None:
        """Open SSH tunnels and check every host answers; a host that does not is failed, not fatal."""
        # the SSH tunnels' local sockets: a fresh directory (mkdtemp: 0700) in this user's state directory
        # (root: /run/iolab/tunnels), checked without following links; nothing of iolab's in /tmp
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-", dir=statedir.private("tunnels")))
        privatedir.ensure(workdir, create=0)
        for plan in self.plans:
            if plan.host.connection == "ssh":
                tunnel = Tunnel(plan.host, workdir)
                stack.callback(tunnel.close)
                plan.tunnel = tunnel
            else:
                plan.endpoint = plan.host.direct_endpoint()

        def reach(plan: HostPlan) -> None:
            if plan.tunnel is not None:
                try:
                    plan.tunnel.open()
                except IolabError as exc:
                    plan.fail(exc.message, "connect")
                    return
                plan.endpoint = plan.tunnel.endpoint
            problem = fioserver.probe(plan.endpoint)
            if problem:
                plan.fail(f"did not answer at {plan.endpoint}: {problem}", "connect")

        with ThreadPoolExecutor(max_workers=min(16, len(self.plans))) as pool:
            for future in [pool.submit(reach, plan) for plan in self.plans]:
                future.result()
        for plan in self.plans:
            plan.run.update(connection={"endpoint": plan.endpoint.describe() if plan.endpoint else None,
                                        "tunnel": plan.tunnel.describe() if plan.tunnel else None})

    # -- running --------------------------------------------------------------------
    def execute(self) -> None:
        reps = ([0] if self.recipe.warmup else []) + list(range(1, self.recipe.repeat + 1))
        pause = self.recipe.pause
        groups = [[p] for p in self.plans] if self.sequential else [self.plans]
        for group in groups:
            for index, step in enumerate(self.steps):
                active = [p for p in group if p.alive]
                if not active:
                    break
                if index and pause:
                    time.sleep(pause)
                for plan in active:
                    plan.status = "running"
                    record = plan.run.manifest["tests"][index]
                    record.update(status="running", started=utcnow())
                    plan.run.save_manifest()
                for rep in reps:
                    active = [p for p in active if p.alive]
                    if not active:
                        break
                    self.measure_step(active, step, rep, n_hosts=len(group))
                for plan in group:
                    record = plan.run.manifest["tests"][index]
                    if record["status"] != "running":
                        continue
                    if not plan.alive:
                        record.update(status="failed", error=plan.reason, ended=utcnow())
                    else:
                        errors = record.pop("_errors", [])
                        record.update(status="failed" if errors else "completed", ended=utcnow(),
                                      error="; ".join(dict.fromkeys(errors)) or None)
                    plan.run.save_manifest()

    def measure_step(self, active: list[HostPlan], step, rep: int, *, n_hosts: int) -> None:
        """One test repetition on every active host through one fio client; rows per host and aggregate."""
        suffix = "warmup" if rep == 0 else str(rep)
        sub = f"{active[0].name}/" if self.sequential else ""
        logdir = self.fleet.path / "logs" / f"{sub}{step.id}-{suffix}"
        logdir.mkdir(parents=True, exist_ok=True)
        specs, argv, links = self._client_argv(active, step, logdir)
        raw = self.fleet.path / f"raw/{sub}{step.id}-{suffix}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        commands = self.fleet.manifest.setdefault("commands", {})
        commands[f"{sub}{step.id}"] = argv
        self.fleet.save_manifest()
        try:
            stderr, timed_out, wall = self._run_client(argv, raw, logdir, active, step, rep)
        finally:
            for link in links:
                with contextlib.suppress(FileNotFoundError):
                    link.unlink()
        text = raw.read_text(errors="replace")
        frames = self._collect(text, stderr, specs, active, step, rep, n_hosts=n_hosts, timed_out=timed_out,
                               starts=start_times(logdir, [p.name for p in active]), wall=wall)
        if rep and not self.sequential:
            agg = aggregate(frames, fleet_id=self.fleet_id, label=self.fleet.manifest["label"],
                            expected=[p.name for p in active])
            if len(agg):
                self.store(agg, self.fleet)

    def _client_argv(self, active: list[HostPlan], step, logdir: Path) -> tuple[dict, list, list]:
        """fio's client command line, each host's (hostname, port, kind) in its output, and links made."""
        specs, argv = {}, [fio.fio_binary(), f"--output-format={self.recipe.output_format}"]
        links = []
        for plan in active:
            endpoint = plan.endpoint
            if endpoint.kind == "unix":
                # fio names the client's logs "<name>_iops.N.log.<client host>"; a socket path
                # holds "/", so the client connects through a link named after the host
                link = logdir / f"{plan.name}.sock"
                with contextlib.suppress(FileNotFoundError):
                    link.unlink()
                link.symlink_to(endpoint.path)
                links.append(link)
                spec, key = f"sock:{link.name}", (link.name, None, "unix")
            else:
                spec = endpoint.client_spec
                ip = fioserver.parse_ip(endpoint.address)
                key = (str(ip) if ip is not None else endpoint.address, endpoint.port, "tcp")
            specs[plan.name] = key
            argv += [f"--client={spec}", os.path.abspath(plan.jobs[step.id])]  # fio runs in logdir
        return specs, argv, links

    def _run_client(self, argv, raw: Path, logdir: Path, active, step, rep) -> tuple[str, bool, float]:
        """Run fio's client (output to ``raw``); its stderr, whether iolab stopped it, its wall time."""
        expected = expected_seconds(self.recipe, step)
        limit = self.timeout if self.timeout is not None else (2 * expected + 60 if expected else None)
        label = f"{step.id} x{len(active)} host{'s' if len(active) > 1 else ''}" + (
            " warm-up" if rep == 0 else f" {rep}/{self.recipe.repeat}")
        started = time.monotonic()
        with open(raw, "wb") as out, tempfile.TemporaryFile() as err:
            proc = fio.start(argv, stdout=out, stderr=err, cwd=str(logdir))
            try:
                timed_out = _wait(proc, label, expected, limit, self.progress)
            except BaseException:
                progress_.stop(proc)
                raise
            err.seek(0)
            stderr = err.read().decode(errors="replace")
        return stderr, timed_out, time.monotonic() - started

    def _collect(self, text: str, stderr: str, specs: dict, active, step, rep, *, n_hosts, timed_out, starts,
                 wall) -> dict:
        """Split fio's output per host: raw documents and rows kept, hosts without results failed."""
        docs = documents(text)
        doc = docs[-1] if docs else {}
        entries = [e for e in doc.get("client_stats", []) if e.get("jobname") != "All clients"]
        per_host: dict[str, list] = {p.name: [] for p in active}
        for entry in entries:
            name = match(entry, specs)
            if name is None:
                log.warning("fio output entry from %s:%s matches no host", *client_key(entry))
                continue
            per_host[name].append(entry)
        combined = text + "\n" + stderr
        parsed = rows_by_host(combined, per_host) if docs else {}
        frames = {}
        for plan in active:
            hostname, port, kind = specs[plan.name]
            if not per_host[plan.name]:
                where = f"{step.id} rep {rep}" if rep else f"{step.id} warm-up"
                plan.fail(missing_reason(combined, hostname, port, timed_out), where)
                continue
            host_doc = host_document(doc, per_host[plan.name], hostname, plan.jobs[step.id].read_text())
            plan.run.write(f"raw/{step.id}-{'warmup' if rep == 0 else rep}.json",
                           json.dumps(host_doc, indent=2) + "\n")
            frame = self.annotate(parsed[plan.name], plan, step, rep, n_hosts=n_hosts,
                                  start_ms=starts.get(plan.name), wall=wall)
            record = plan.run.manifest["tests"][self.steps.index(step)]
            record["reps"] = rep
            if rep == 0:
                continue
            errors = [e for e in frame["error"].dropna().unique() if e]
            if errors:
                record.setdefault("_errors", []).extend(errors)
            self.store(frame, plan.run)
            frames[plan.name] = frame
            plan.run.save_manifest()
        return frames

    def annotate(self, frame, plan: HostPlan, step, rep, *, n_hosts, start_ms, wall) -> pd.DataFrame:
        """A host's run columns (and the fleet's: fleet_id, n_hosts, start_ms) on its rows of one repetition."""
        frame = frame.copy()
        frame.insert(0, "run_id", plan.run.run_id)
        frame["host"] = plan.name
        frame["label"] = plan.host.label
        frame["recipe"] = self.recipe.name
        frame["test"] = frame["job"] if self.recipe.jobfile is not None else step.test
        frame["rep"] = rep
        frame["isolation"] = self.isolation["mode"]
        frame["target"] = plan.host.target
        frame["tool"] = "fio"
        frame["wall_s"] = round(wall, 3)
        frame["flags"] = None
        frame["valid"] = frame["error"].isna()
        frame["fleet_id"] = self.fleet_id
        frame["n_hosts"] = n_hosts
        frame["start_ms"] = start_ms
        return frame

    def store(self, frame, run) -> None:
        """Keep rows in ``run``'s results (a host's run, or the fleet's for the aggregate) and for the summary."""
        run.add_results(frame)
        self.frames.append(frame)

    # -- the end --------------------------------------------------------------------
    def finish(self, status_override: str | None = None, reason: str | None = None) -> None:
        for plan in self.plans:
            if plan.run is None or plan.run.manifest.get("ended"):
                continue
            if status_override and plan.alive:
                plan.status, plan.reason = status_override, reason
                for record in plan.run.manifest["tests"]:
                    record.pop("_errors", None)
                    if record["status"] in ("running", "pending"):
                        record["status"] = status_override if record["status"] == "running" else "pending"
            elif plan.alive:
                failed = [t for t in plan.run.manifest["tests"] if t["status"] != "completed"]
                plan.status = "failed" if failed else "completed"
                plan.reason = "; ".join(f"{t['name']}: {t.get('error') or t['status']}" for t in failed) or None
            plan.run.update(fleet={**plan.run.manifest["fleet"], "failed_at": plan.failed_at})
            plan.run.finish(plan.status, plan.reason)
        completed = [p.name for p in self.plans if p.status == "completed"]
        failed = {p.name: p.reason for p in self.plans if p.status == "failed"}
        if self.fleet is None:
            return
        self.fleet.update(completed_hosts=completed, failed_hosts=failed,
                          host_runs={p.name: {"status": p.status, "reason": p.reason,
                                              "run_dir": str(p.run.path) if p.run else None,
                                              "failed_at": p.failed_at} for p in self.plans})
        if status_override:
            self.fleet.finish(status_override, reason)
        elif failed or len(completed) < len(self.plans):
            not_done = {p.name: p.reason or p.status for p in self.plans if p.status != "completed"}
            self.fleet.finish("failed", f"{len(not_done)} of {len(self.plans)} hosts did not complete: "
                              + "; ".join(f"{k}: {v}" for k, v in not_done.items()))
        else:
            self.fleet.finish("completed")

    def cleanup_local_files(self) -> None:
        for plan in self.plans:
            if plan.host.local and plan.test_file:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(plan.test_file)
                    log.info("removed test file %s", plan.test_file)


def _wait(proc, label: str, expected: float | None, limit: float | None, progress) -> bool:
    """Wait for the fio client; True when iolab had to stop it at ``limit`` seconds."""
    if progress_.wait(proc, label, expected, progress=progress, limit=limit, poll=0.1) == progress_.LIMIT:
        log.warning("%s: no end after %.0f s; stopping fio", label, limit)
        progress_.stop(proc)
        return True
    return False


