"""The safety gate for everything fio will open.

Before a run, iolab reads every job it will hand to fio the way fio reads it
and lists each file, device and directory a job touches with what the job does
to it (:func:`iolab.engine.jobfile.access.accesses`). :func:`check` then refuses, naming the job, the
option and the path, unless the user allowed it on purpose:

=====================================  ==========================================
what the gate checks                   how to pass it on purpose
=====================================  ==========================================
a path outside the named targets       ``--allow-path PATH`` (repeatable)
(``filename``, ``directory``,
``filename_format``, ``opendir``,
iolog and log files, ``replay_redirect``)
a block device written or trimmed      the device rules of :mod:`iolab.devices.safety`
                                       (mounted, swap, held, root chain: never;
                                       a signature: ``--confirm DEVICE``)
an existing regular file written       ``--confirm FILE`` (files iolab creates
that iolab did not create              itself need none)
a file backing a loop device           treated like that device, and it needs
                                       ``--confirm FILE`` as well; a swap file
                                       is never written
``allow_mounted_write``                never
``ioscheduler``, ``cgroup*`` (machine  never (:data:`OUTSIDE_OPTIONS` says what
state outside the targets, fio out of  to do instead)
iolab's cgroup), network ioengines
``exec_prerun``/``exec_postrun``,      ``--allow-exec`` (checked by
``ioengine=exec``, external engines,   :mod:`iolab.engine.jobfile.check`)
``trigger*`` options
``include`` lines                      never (inline the file: iolab checks
                                       only text it sees)
=====================================  ==========================================

"Writes" means any write, trim or destructive side effect: ``rw``/``readwrite``
with any modifier (``randwrite:8``) whose mode fio describes as writing or
trimming, ``verify`` trims (``trim_percentage``), ``zonemode=zbd`` (zone
resets), ``unlink``, file-creating/deleting engines, and iolab's own layout
pass over a ``--target`` file smaller than the test.

How a job file is read: :mod:`iolab.engine.jobfile.reader` (fio's own view of it, from ``fio --showcmd``;
where that view is ambiguous the gate refuses); what each job touches, as fio sets it up (global files
added to every job, each ``filename=`` line adding files, ``opendir``, iolog replays, a read job's
layout rewriting a short file): :mod:`iolab.engine.jobfile.access`.
"""
from __future__ import annotations

import dataclasses
import os

from iolab.core.errors import IolabError
from iolab.engine import workdirs
from iolab.engine.jobfile import check as jobcheck
from iolab.engine.jobfile import reader as jobreader
from iolab.engine.targets import TEST_FILE
from iolab.engine.runoptions import Allowances  # a run option (--allow-path, --allow-exec)
from iolab.engine.jobfile.access import (DEFAULT_FORMAT, FILE_ENGINES, LOG_OPTIONS, MAX_NAMES, Access, Job,  # noqa: F401
                                    accesses, canonical, effects, jobs, outside, parse, path_kind)


# ------------------------------------------------------------------ the run gate


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]


def _marker(target) -> str:
    """Stand-in path for an emulated target's device or file system (made at run time)."""
    return f"/<emulated {target.name}>"


def _default_dir(target) -> str | None:
    """The ``--directory`` the runner gives fio for a job file on this target: the run's own directory
    in it, ``<target>/iolab-<run_id>`` (:mod:`iolab.engine.workdirs`; the run id is not known yet), for a
    directory target and an emulated device's file system; None (fio's working directory) for the others."""
    if target.kind in ("dir", "emulated"):
        return os.path.join(root_of(target), f"{workdirs.PREFIX}<run_id>")
    return None


def root_of(target) -> str:
    """The path a target lets jobs reach: its directory tree, file or device."""
    return _marker(target) if target.kind == "emulated" else target.path


def plan_jobs(recipe, target) -> list[tuple[str, str | None]]:
    """(job text, default directory) of every fio job the recipe runs on ``target``."""
    from iolab.engine import fio
    if recipe.jobfile is not None:
        return [(recipe.jobfile, _default_dir(target))]
    stand_in = dataclasses.replace(target)
    if target.kind in ("dir", "emulated"):  # iolab's test file, in the run's directory
        stand_in.test_file = os.path.join(_default_dir(target), TEST_FILE)
    texts = []
    for step in recipe.steps():
        global_options, options = fio.job_options(recipe, step, stand_in, force_direct=False)
        texts.append((fio.render_job(step.id, options, global_options), None))
    return texts


def target_accesses(recipe, target, *, load_code: bool = False) -> tuple[list[Access], list[str]]:
    """Every access of ``recipe`` on ``target`` and the job texts behind them (``load_code``: --allow-exec)."""
    if recipe.engine != "fio":  # the engine opens the target itself, in the steps' directions
        texts, found = [], []
        for step in recipe.steps():
            writes, trims, why = effects(dict(step.options, rw=step.rw or "read"))
            if target.kind != "emulated":
                found.append(Access(step.id, "--target", target.path, path_kind(target.path), writes, trims, why))
        return found, texts
    found, texts = [], []
    if (target.kind == "file" and recipe.jobfile is None
            and os.path.getsize(target.path) < recipe.size):  # runner lays the file out to size (before fio)
        found.append(Access("layout", "layout", target.path, "file", True, False,
                            "iolab writes the test file up to --size"))
    for text, directory in plan_jobs(recipe, target):
        texts.append(text)
        found += accesses(text, f"recipe {recipe.name}", target=directory, load_code=load_code)
    return found, texts


def check(recipe, targets, *, confirm=None, allow: Allowances | None = None) -> list[Access]:
    """Refuse what the recipe's jobs would do beyond what the user named or allowed.

    Sets ``writes`` and ``confirm`` on each target (so a written block target
    is held with ``O_EXCL`` while it runs) and returns every access. Raises
    :class:`IolabError` naming the job, option and path of the first refusal.
    """
    allow = allow or Allowances()
    confirms = _as_list(confirm)
    roots = [root_of(t) for t in targets] + list(allow.paths)
    everything: list[Access] = []
    for target in targets:
        found, texts = target_accesses(recipe, target, load_code=allow.exec)
        for text in texts:
            _check_options(text, f"recipe {recipe.name}", allow, _default_dir(target) if recipe.jobfile else None)
        root = os.path.realpath(root_of(target))
        target.writes = any(a.destructive and os.path.realpath(a.path) == root for a in found)
        target.confirm = confirm
        everything += found
    unique = list(dict.fromkeys(everything))
    refused = [(a, f"outside the targets ({', '.join(roots)})",
                f"name it with --target, or allow it on purpose with --allow-path {a.path}")
               for a in outside(unique, roots)]
    problems: dict = {}  # one verdict per path, however many jobs write it
    for access in unique:
        if access.destructive:
            key = (os.path.realpath(access.path), access.kind)
            if key not in problems:
                problems[key] = _destructive_problem(access, confirms)
            if problems[key]:
                refused.append((access, *problems[key]))
    if refused:  # the most telling first: a device, then a file, then a directory
        refused.sort(key=lambda item: ("device", "file", "directory").index(item[0].kind))
        access, why, hint = refused[0]
        more = f"; and {len(refused) - 1} more" if len(refused) > 1 else ""
        raise IolabError(f"refusing {access}: {why}{more}", context=f"recipe {recipe.name}", hint=hint)
    return unique


def devices_outside_targets(accesses: list[Access], targets) -> list[str]:
    """Block devices the jobs write besides the block targets (reached through ``--allow-path``): the
    run holds them with ``O_EXCL`` as it holds its targets (:func:`iolab.engine.targets.held_exclusively`)."""
    roots = {os.path.realpath(root_of(t)) for t in targets if t.kind == "block"}
    written = (os.path.realpath(a.path) for a in accesses if a.destructive and a.kind == "device")
    return list(dict.fromkeys(path for path in written if path not in roots))


#: Options that change the machine outside the targets, or take fio out of what iolab measures: refused.
OUTSIDE_OPTIONS = {
    "ioscheduler": ("switches the I/O scheduler of the disk holding the file, machine-wide, and fio does not "
                    "switch it back", "set it yourself before the run (/sys/block/DISK/queue/scheduler): "
                                      "the run records each target's scheduler"),
    "cgroup": ("moves fio out of the cgroup iolab runs it in (cache isolation and its proof)",
               "iolab places fio in its own memory-limited cgroup: choose the limit with --mem-limit"),
    "cgroup_weight": ("moves fio out of the cgroup iolab runs it in", "leave cgroups to iolab (--mem-limit)"),
    "cgroup_nodelete": ("leaves a cgroup fio made behind", "leave cgroups to iolab (--mem-limit)"),
}
#: ioengines that send I/O to another machine or service, not to a file or device here.
REMOTE_ENGINES = frozenset({"net", "netsplice", "rdma", "rados", "rbd", "nbd", "gfapi", "gfapi_async", "http",
                            "libiscsi", "nfs", "dfs"})

#: Why a :data:`REMOTE_ENGINES` engine is refused, and what to do instead.
REMOTE_WHY = "sends I/O to another machine or service, not to the targets iolab checked"
REMOTE_HINT = "benchmark other machines with iolab run --hosts (a fio server on each)"


def _check_options(text: str, source: str, allow: Allowances, target: str | None = None) -> None:
    """allow_mounted_write, options that change the machine outside the targets and network engines are
    never accepted; exec hooks and triggers need ``--allow-exec``. Read from fio's view of the file
    (:mod:`iolab.engine.jobfile.reader`): what fio applies, also from ``[global]`` sections."""
    for job in jobs(text, source, target=target, load_code=allow.exec):
        if str(job.options.get("allow_mounted_write", "0") or "1").strip() not in ("0", "", "false"):
            raise IolabError("allow_mounted_write: refused: iolab never writes to a mounted file system's device",
                             context=f"{source}: [{job.name}]")
        reaching_out = outside_problems(job)
        if reaching_out:
            option, value, why, hint = reaching_out[0]
            raise IolabError(f"{option}={value}: refused: it {why}", context=f"{source}: [{job.name}]", hint=hint)
    if allow.exec:
        return
    for section in jobreader.sections(text, source, load_code=allow.exec):
        for option in section.options:
            problem = jobcheck.option_problem(option.name, option.value)
            if problem and problem[0] in ("exec", "trigger"):
                shown = f"{option.name}={jobcheck.engine_name(option.value)}" if option.name == "ioengine" \
                    else option.name
                raise IolabError(f"[{section.name}] {shown}: refused: {problem[1].replace('on the server', 'here')}",
                                 context=source + (f":{option.line}" if option.line else ""),
                                 hint="run programs from a job on purpose with --allow-exec")


def outside_problems(job: Job) -> list[tuple[str, str, str, str]]:
    """(option, value, why, hint) of each option of ``job`` that reaches outside the targets: the
    :data:`OUTSIDE_OPTIONS` it sets, then a network ioengine (:data:`REMOTE_ENGINES`). ``why`` reads after
    "it": "it switches the I/O scheduler..."; the local gate and the fleet's (:mod:`iolab.fleet.gate`) word
    their refusals from it."""
    found = [(option, job.options[option], why, hint)
             for option, (why, hint) in OUTSIDE_OPTIONS.items() if option in job.options]
    engine = jobcheck.engine_name(job.options.get("ioengine"))
    if engine in REMOTE_ENGINES:
        found.append(("ioengine", engine, REMOTE_WHY, REMOTE_HINT))
    return found


def _destructive_problem(access: Access, confirms: list[str]) -> tuple[str, str] | None:
    """Why writing ``access`` is refused (reason, hint), or None."""
    from iolab.devices import blockdev, safety
    real = os.path.realpath(access.path)
    confirmed = any(os.path.realpath(c) == real for c in confirms)
    if access.kind == "device":
        try:
            safety.check_writable(access.path, confirm=confirms or None)
        except IolabError as exc:
            return exc.message, exc.hint or ""
        return None
    if access.kind != "file" or not os.path.isfile(real):
        return None  # a new file (or a directory jobs create files in)
    if real in blockdev.swap_files():
        return "it is an active swap file", "iolab never writes a swap file"
    for loop in blockdev.loops_backed_by(real):
        verdict = safety.assess(loop)
        hard = [r.text for r in verdict.reasons if not r.overridable]
        if hard:
            return (f"it backs {loop}, which is {'; '.join(hard)}",
                    "iolab never writes a device that is mounted, swap, held or backs /; --confirm does not change that")
        if not confirmed:
            return (f"it backs {loop}" + (f", which {verdict.why_not}" if verdict.reasons else ""),
                    f"if you really mean to overwrite it, confirm with --confirm {real}")
    if not confirmed:
        return ("an existing file iolab did not create",
                f"if you really mean to overwrite it, confirm with --confirm {real}")
    return None
