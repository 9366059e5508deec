"""Many servers: an inventory of fio servers and coordinated runs on fio's client/server engine.

``iolab run RECIPE --hosts inventory.yaml`` renders the recipe's job files for
every host (each with its own target), checks them here (:mod:`iolab.engine.jobfile.check`,
then ``fio --parse-only``), and runs every host **at once** through one
``fio --client=H1 job1 --client=H2 job2 ...`` per test and repetition: fio's
client sends every job first and starts them together. ``--sequential`` runs
the hosts one after another instead.

Inventory (YAML; errors name the file and the field)::

    defaults:                   # optional, for every host: port (TCP hosts), target,
      target: /srv/iolab        # ssh_port, identity, ssh_options, remote_socket, target_kind
    allow_job_options: []       # optional: exec | trigger | include | expansion (jobcheck)
    hosts:
      - name: web2
        socket: /run/iolab/servers/fio.sock   # a fio server on this machine (iolab server) ...
        target: /srv/test       # directory, file or device *on the server*
        label: web2 (NVMe)      # name in reports (default: name)
      - name: db1
        ssh: admin@db1.example.net    # ... or elsewhere: its socket forwarded over SSH
        remote_socket: /run/iolab/servers/fio.sock   # optional (this is the default)
        ssh_port: 22            # optional: identity: ~/.ssh/id_ed25519,
        target: /mnt/test       #   ssh_options: {UserKnownHostsFile: ...}
      - name: web1
        address: 127.0.0.1      # a server started with --tcp-loopback-any-local-user
        port: 8765              # (every local user can reach it: only on purpose)
        target: /mnt/scratch

**Security.** fio's server has no authentication and runs whatever it is sent
(writing any device, running programs). ``iolab server`` listens on a Unix
socket in a directory only its owner can enter; a host elsewhere is reached
by forwarding that socket over SSH (iolab runs ``ssh -N -L <private local
socket>:<remote socket> user@host`` with ``BatchMode=yes`` and
``ExitOnForwardFailure=yes``, the local end a 0600 socket in a 0700 directory,
and stops it afterwards), so no TCP port exists that another local user on
either machine could use. An ssh host with the old ``port``/``remote_address``
(a TCP server on the far loopback) is refused with the way to update it. iolab
never talks to a server on a non-loopback address unless the caller passes
``insecure_network=True`` (``--insecure-network``), which every manifest of the
run records. ``0.0.0.0``/``::`` are refused always. The
check is made on the inventory before any connection. Job files are checked by
:func:`iolab.engine.jobfile.check.check_text` (what the server would run) and
:func:`iolab.fleet.gate.check` (every path a job opens, reads a pattern from or
logs to must be inside that host's ``target``; no ``..``) before anything
connects.

**Where results go.** One run directory per host, ``data/<host>/<fleet_id>-<host>/``,
with the usual layout (``jobs/`` exact job files sent to that host,
``raw/<test>-<rep>.json``: that host's part of fio's output as a standalone
fio JSON document with ``jobs``, ``results.csv``, ``manifest.json`` with a
``fleet`` section), and the fleet's own directory ``data/_fleet/<fleet_id>/``
holding fio's untouched combined output (``raw/``), per-host IOPS logs
(``logs/``), a manifest saying which hosts completed and which failed (and
why), and — for simultaneous runs — ``results.csv`` with the **aggregate**:
host ``all``, one row per test x repetition x direction, ``io_bytes`` summed over
the hosts that delivered results, ``bw_mbps`` and ``iops`` their I/O over the
longest host's runtime and ``lat_mean_us`` weighted by each host's I/O count
(:mod:`iolab.analysis.together`, as ``--simultaneous`` adds up targets: a host
that finished early does not count as if it had run the whole time),
``lat_max_us`` the maximum, percentiles left empty (a
percentile of a union is not a function of the parts' percentiles; per-host
tails are in the host rows), ``n_hosts``/``hosts_measured``, and
``start_spread_ms``. A sequential run has no aggregate (the hosts did not run
together). Rows of every host carry ``fleet_id``, ``n_hosts`` (hosts running
at the same time) and ``start_ms``.

**Start times.** fio 3.33's JSON has no per-job start time in client/server
mode (``job_start`` came later), so every job writes an IOPS log
(``write_iops_log=<host>``, ``log_unix_epoch=1``, ``log_avg_msec=100``), which
fio's client collects; ``start_ms`` is the first sample's Unix time minus one
interval — by the *server's* clock (keep the clocks in sync with NTP to compare
machines). fio's client sends every job first and then starts them together;
a host that must first lay out a larger test file starts its I/O later, and
``start_ms`` shows that (on loopback the spread is about 0.1 s).

**Failures.** A host that does not answer (checked before each run; fio's own
connect and command time-outs) or disappears mid-run is reported in its
manifest (``failed``, with fio's reason) and in the fleet manifest
(``failed_hosts``); the other hosts' results are kept and the host is left out
of the remaining tests. fio exits 0 when a client cannot connect, so iolab
decides from the output which hosts delivered results.

**Cache isolation.** Jobs run inside the fio servers, out of reach of iolab's
cgroups; a recipe asking for ``cgroup`` or ``hugepages`` runs with O_DIRECT
(``direct``) instead, and the manifest says so. ``none`` is kept.

**Scaling.** :func:`scale` (``--scale-hosts``) runs the recipe with the first
1, 2, ..., N hosts of the inventory (fleet ids ``<id>-n1`` ... ``<id>-nN``);
:func:`scaling_table` gives "aggregate throughput vs number of hosts" and
:func:`tail_latency` the per-host tail latency, as tidy data for
:mod:`iolab.report.fleetplots`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Sequence

import pandas as pd

from iolab.engine import fio, recipes
from iolab.engine.runoptions import RunOptions
from iolab.engine.store import order_columns
from iolab.fleet.fleetrun import FleetRun
from iolab.fleet.hostplan import HostPlan, check_job, isolation_of, job_text, new_fleet_id, target_kind, writes_data
from iolab.fleet.inventory import Inventory, check_security, load_inventory
from iolab.core.errors import IolabError
from iolab.core.signals import sigterm_raises


@dataclasses.dataclass
class FleetResult:
    fleet_id: str
    path: Path                      # data/_fleet/<fleet_id>
    manifest: dict                  # the fleet manifest
    hosts: dict                     # host name -> run directory
    results: pd.DataFrame           # every host's rows and the aggregate rows

    @property
    def completed_hosts(self) -> list[str]:
        return list(self.manifest.get("completed_hosts", []))

    @property
    def failed_hosts(self) -> dict:
        return dict(self.manifest.get("failed_hosts", {}))


def _prepare(recipe, inventory, *, hosts, insecure_network, options: RunOptions):
    if not isinstance(recipe, recipes.Recipe):
        recipe = recipes.load(recipe)
    recipe = recipe.with_options(options)
    if recipe.engine != "fio":
        raise IolabError(f"recipe engine {recipe.engine!r} does not run on fio servers", context=recipe.name)
    if not isinstance(inventory, Inventory):
        inventory = load_inventory(inventory)
    chosen = inventory.select(hosts)
    exposed = check_security(chosen, insecure_network=insecure_network)
    fio.fio_binary()
    return recipe, inventory, chosen, exposed


def run(recipe, inventory, options: RunOptions | None = None, *, hosts: Sequence[str] | None = None,
        sequential: bool = False, insecure_network: bool = False, fleet_id: str | None = None,
        timeout: float | None = None, **keywords) -> FleetResult:
    """Run ``recipe`` on the inventory's hosts (all, or ``hosts``) at once, or one after another.

    ``options`` (or the keywords of a :class:`~iolab.engine.runoptions.RunOptions`, on top of it) as
    :func:`iolab.engine.runner.run` takes them; of those a fleet uses the label, the result store, the progress,
    the command line and what changes the recipe (size, runtime, repeat, isolation, preset, tests).

    Raises :class:`IolabError` for a bad recipe or inventory, a refused host
    (before any connection), a refused or invalid job file (before anything
    runs). A host that fails during the run does not raise: see the result's
    manifest (``completed_hosts``, ``failed_hosts``).
    """
    options = RunOptions.of(options, **keywords)
    recipe, inventory, chosen, exposed = _prepare(recipe, inventory, hosts=hosts, insecure_network=insecure_network,
                                                  options=options)
    fleet_id = fleet_id or new_fleet_id(recipe.name)
    engine = FleetRun(recipe, chosen, inventory=inventory, fleet_id=fleet_id, data_dir=options.data_dir,
                      label=options.label, sequential=sequential, insecure_network=insecure_network, exposed=exposed,
                      argv=None if options.argv is None else list(options.argv), progress=options.progress,
                      timeout=timeout)
    try:
        with contextlib.ExitStack() as stack:
            # SIGTERM stops a fleet run like Ctrl-C: fio's client stopped, tunnels closed, manifests written
            stack.enter_context(sigterm_raises(lambda: KeyboardInterrupt("SIGTERM")))
            stack.callback(engine.cleanup_local_files)
            engine.prepare()
            engine.connect(stack)
            engine.execute()
    except KeyboardInterrupt:
        engine.finish("interrupted", "interrupted (Ctrl-C or SIGTERM); results so far are kept")
        raise
    except IolabError as exc:
        engine.finish("failed", str(exc))
        raise
    except Exception as exc:
        engine.finish("failed", f"internal error: {exc!r}")
        raise
    engine.finish()
    results = pd.concat(engine.frames, ignore_index=True) if engine.frames else pd.DataFrame()
    return FleetResult(fleet_id=fleet_id, path=engine.fleet.path, manifest=engine.fleet.manifest,
                       hosts={p.name: p.run.path for p in engine.plans}, results=order_columns(results))


def scale(recipe, inventory, options: RunOptions | None = None, *, max_hosts: int | None = None,
          fleet_id: str | None = None, hosts: Sequence[str] | None = None, insecure_network: bool = False,
          timeout: float | None = None, **keywords) -> list[FleetResult]:
    """Run with the first 1, 2, ..., N hosts at once (fleet ids ``<id>-n1`` ... ``<id>-nN``); ``options`` as
    :func:`run` takes them."""
    if keywords.pop("sequential", False):
        raise IolabError("scaling runs hosts at the same time; it cannot be sequential", context="--scale-hosts")
    options = RunOptions.of(options, **keywords)
    recipe_, inventory_, chosen, _ = _prepare(recipe, inventory, hosts=hosts, insecure_network=insecure_network,
                                              options=options)
    names = [h.name for h in chosen][: max_hosts or None]
    base = fleet_id or new_fleet_id(recipe_.name)
    return [run(recipe, inventory_, options, hosts=names[:n], insecure_network=insecure_network,
                fleet_id=f"{base}-n{n}", timeout=timeout) for n in range(1, len(names) + 1)]


def dry_run(recipe, inventory, options: RunOptions | None = None, *, hosts=None, sequential=False,
            insecure_network=False, **keywords) -> str:
    """The job files and fio command a fleet run would use (``options`` as :func:`run` takes them); nothing is
    created or connected."""
    recipe, inventory, chosen, exposed = _prepare(recipe, inventory, hosts=hosts, insecure_network=insecure_network,
                                                  options=RunOptions.of(options, **keywords))
    iso = isolation_of(recipe)
    writes = writes_data(recipe)
    steps = recipe.steps()
    lines = [f"# recipe {recipe.name}: {recipe.description}",
             f"# {len(chosen)} hosts, {'one after another' if sequential else 'all at once'}; isolation "
             f"{iso['mode']} (requested {iso['requested']})"]
    if exposed:
        lines.append(f"# INSECURE: fio's protocol crosses the network for {', '.join(exposed)}")
    for host in chosen:
        kind, path = target_kind(host, recipe, writes)
        plan = HostPlan(host=host, kind=kind, path=path)
        if kind == "dir":
            plan.test_file = f"{path.rstrip('/')}/iolab-<run_id>.dat"
        via = {"tcp": f"{host.address}:{host.port}", "unix": f"unix:{host.socket}",
               "ssh": f"ssh tunnel to {host.ssh} -> unix:{host.remote_socket}"}[host.connection]
        for index, step in enumerate(steps):
            text = job_text(recipe, step, plan, force_direct=iso["forced_o_direct"],
                             last_step=index == len(steps) - 1)
            check_job(text, f"{host.name}: {step.id}", plan, inventory)
            lines += [f"# --- {step.id} on {host.name} ({via}), target {host.target}", text]
    clients = " ".join(f"--client=<{h.name}> <{h.name}/jobs/STEP.fio>" for h in chosen)
    lines.append(f"# per test and repetition: fio --output-format={recipe.output_format} {clients}")
    return "\n".join(lines)


