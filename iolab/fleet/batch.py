"""Batch runs: the measure notebook executed with papermill for every entry of an inventory.

An inventory is a YAML file (see ``examples/batch-inventory.yaml``)::

    data: ../data            # optional result store (``iolab batch --data`` wins)
    defaults:                # optional: fields every entry gets unless it sets them
      recipe: quick
      size: 1G
    entries:
      - name: ssd            # required, unique; letters, digits, . _ -
        target: /mnt/ssd/scratch
        label: SATA SSD      # name in reports (default: the entry's name)
      - name: hdd
        target: [/mnt/hdd/scratch]
        recipe: [quick, crystaldiskmark]

Entry fields: ``name, recipe, target`` (required; ``recipe`` and ``target``
may come from ``defaults``), ``label, isolation, mem_limit, size, runtime,
repeat, preset, tests, confirm, timeout``. Relative paths (targets, recipe
files, ``data``) are relative to the inventory file. Everything is checked
when the file is loaded; errors name the file, the entry and the field.

:func:`run_batch` executes ``notebooks/measure.ipynb`` once per entry, in
sequence. The notebook writes the run directories it created to a
*result file* (JSON, :func:`write_result_file`), which is how the batch learns
them without scraping outputs; the executed notebook is then stored in each
of those run directories as ``measure.ipynb``. A failing entry keeps its
executed notebook (in the batch directory when it created no run) and the
next entry runs. Before the first entry runs, every entry is checked as
``--dry-run`` checks it (recipes, fio, targets, free space): an entry that
cannot run is reported at once, marked failed and skipped. The batch
directory ``<data>/<host>/batch-<UTC time>/`` holds ``batch.json``: every
entry's status, run directories and error.

:func:`select_tests` (a recipe restricted to some of its tests) is shared by
the measure notebook and the run panel of :mod:`iolab.explorer.widgets`.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
import time
from pathlib import Path
from typing import Callable, Sequence


from iolab.engine import recipes, store
from iolab.core import notebook_execution, paths, schema
from iolab.core import yamlfile
from iolab.core.errors import IolabError
from iolab.fleet import batch_schema

log = logging.getLogger(__name__)

#: Name of the executed notebook inside a run directory.
NOTEBOOK_NAME = "measure.ipynb"


# ---------------------------------------------------------------------------
# recipes restricted to some tests


def select_tests(recipe, tests: Sequence[str] | str | None = None, *, preset: str | None = None) -> recipes.Recipe:
    """``recipe`` (name, path or :class:`~iolab.engine.recipes.Recipe`) with only ``tests`` kept.

    :meth:`iolab.engine.recipes.Recipe.select_tests`: ``preset`` first, then the
    named tests in the recipe's order (empty: all), presets resolved.
    """
    if not isinstance(recipe, recipes.Recipe):
        recipe = recipes.load(str(recipe))
    return recipe.select_tests(tests, preset=preset)


# ---------------------------------------------------------------------------
# the result file: how the measure notebook tells the batch what it created


def write_result_file(path: str | os.PathLike | None, results: Sequence, *, dry_run: bool = False) -> None:
    """Record the runs (:class:`~iolab.engine.runner.RunResult`) of a measure notebook in ``path`` (JSON).

    Written atomically after every run, so a notebook that fails later still
    names the runs it made. Nothing is written when ``path`` is empty.
    """
    if not path:
        return
    runs = [{"run_dir": str(Path(r.path).resolve()), "recipe": r.manifest.get("recipe"),
             "status": r.manifest.get("status"), "reason": r.manifest.get("reason")} for r in results]
    store.atomic_write(path, json.dumps({"runs": runs, "dry_run": bool(dry_run)}, indent=2) + "\n")


def read_result_file(path: str | os.PathLike) -> dict:
    """The content of a result file; ``{"runs": []}`` when the notebook never wrote one."""
    path = Path(path)
    if not path.is_file():
        return {"runs": [], "dry_run": False}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise IolabError(f"unreadable result file: {exc}", context=str(path)) from exc
    data.setdefault("runs", [])
    return data


# ---------------------------------------------------------------------------
# inventory


@dataclasses.dataclass
class Entry:
    """One inventory entry: the parameters of one execution of the measure notebook."""
    name: str
    recipes: list
    targets: list
    label: str | None = None
    isolation: str | None = None
    mem_limit: str | None = None
    size: str | None = None
    runtime: float | None = None
    repeat: int | None = None
    preset: str | None = None
    tests: list = dataclasses.field(default_factory=list)
    confirm: str | None = None
    timeout: float | None = None
    lang: str | None = None   # the language the notebook writes in (None: English)

    def parameters(self, *, data_dir, result_file: str = "", dry_run: bool = False,
                   progress: bool = False) -> dict:
        """Every parameter of the measure notebook (``None``: the recipe's own value).

        All are passed, so the notebook's own defaults (small test sizes) never
        leak into a batch.
        """
        return {"recipe": list(self.recipes), "target": list(self.targets), "tests": list(self.tests),
                "label": self.label or self.name, "isolation": self.isolation, "mem_limit": self.mem_limit,
                "size": self.size, "runtime": self.runtime, "repeat": self.repeat, "preset": self.preset,
                "confirm": self.confirm, "data_dir": str(data_dir), "dry_run": bool(dry_run),
                "progress": bool(progress), "result_file": str(result_file), "lang": self.lang or "en"}


@dataclasses.dataclass
class Inventory:
    path: Path
    entries: list
    data: Path | None = None

    def entry(self, name: str) -> Entry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise IolabError(f"no entry named {name!r}", context=str(self.path),
                         hint="entries: " + ", ".join(e.name for e in self.entries))


def _local(path: str, base: Path) -> str:
    """A path relative to the inventory file made absolute (``emulated:NAME`` unchanged)."""
    if path.startswith("emulated:") or os.path.isabs(path):
        return path
    return str((base / path).resolve())


def _recipe_ref(name: str, base: Path) -> str:
    """A built-in recipe name stays a name; a recipe file is found relative to the inventory."""
    if Path(name).suffix in (".yaml", ".yml", ".fio") or os.sep in name:
        return _local(name, base)
    return name


def _entry(spec: batch_schema.BatchEntry, defaults: batch_schema.EntryFields, base: Path, ctx: str) -> Entry:
    """One entry, ``defaults`` under it; its recipes, preset and tests checked against each other."""
    given = spec.model_dump(exclude_none=True)
    merged = {**defaults.model_dump(exclude_none=True), **given}
    for key in ("recipe", "target"):
        if not merged.get(key):
            raise IolabError(f"missing required field {key!r}", context=ctx)
    entry = Entry(name=spec.name, recipes=[_recipe_ref(r, base) for r in merged.pop("recipe")],
                  targets=[_local(t, base) for t in merged.pop("target")],
                  **{k: v for k, v in merged.items() if k != "name"})
    # the recipes exist and the preset and tests fit them: checked now, not after hours of other entries
    for ref in entry.recipes:
        try:
            select_tests(ref, entry.tests, preset=entry.preset)
        except IolabError as exc:
            where = str(exc.context or "")
            field = "tests" if where == "tests" else "preset" if "preset" in where else "recipe"
            message = exc.message if field != "recipe" or where in ("recipe", ref) else str(exc)
            raise IolabError(message, context=f"{ctx}.{field}", hint=exc.hint) from exc
    return entry


def load_inventory(path: str | os.PathLike) -> Inventory:
    """Read and check a batch file against :class:`~iolab.fleet.batch_schema.BatchFile`; every error
    names the file, the entry and the field."""
    path = Path(path)
    source = str(path)
    data = yamlfile.load(path, what="inventory file")
    if not isinstance(data, dict):
        raise IolabError("an inventory must be a YAML mapping with an 'entries' list", context=source)
    spec = schema.validate(batch_schema.BatchFile, data, source)
    base = path.resolve().parent
    entries, seen = [], set()
    for index, entry in enumerate(spec.entries):
        ctx = f"{source}: entries[{index}] ({entry.name})"
        if entry.name in seen:
            raise IolabError("duplicate entry name", context=f"{ctx}.name")
        seen.add(entry.name)
        entries.append(_entry(entry, spec.defaults or batch_schema.EntryFields(), base, ctx))
    data_dir = Path(_local(spec.data, base)) if spec.data is not None else None
    return Inventory(path=path, entries=entries, data=data_dir)


# ---------------------------------------------------------------------------
# running


@dataclasses.dataclass
class EntryResult:
    name: str
    status: str                 # completed | failed | dry-run
    run_dirs: list = dataclasses.field(default_factory=list)
    notebooks: list = dataclasses.field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    plan: str | None = None     # dry run: the job files and commands

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "dry-run")

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "run_dirs": [str(p) for p in self.run_dirs],
                "notebooks": [str(p) for p in self.notebooks], "error": self.error,
                "seconds": round(self.seconds, 1)}


@dataclasses.dataclass
class BatchResult:
    entries: list
    directory: Path | None = None   # the batch directory (None for a dry run)

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    @property
    def failed(self) -> list:
        return [e for e in self.entries if not e.ok]


def measure_notebook() -> Path:
    """``notebooks/measure.ipynb`` of this checkout (``IOLAB_NOTEBOOKS`` overrides the directory)."""
    path = paths.shipped("notebooks") / "measure.ipynb"
    if not path.is_file():
        raise IolabError("the measure notebook is missing", context=str(path),
                         hint="set IOLAB_NOTEBOOKS to the directory holding measure.ipynb")
    return path


def _batch_dir(data_dir: Path) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parent = data_dir / store.hostname()
    for n in range(1, 1000):
        path = parent / (f"batch-{stamp}" if n == 1 else f"batch-{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise IolabError(f"cannot create the batch directory: {exc.strerror}", context=str(path)) from exc
    raise IolabError("could not find a free batch directory name", context=str(parent))  # pragma: no cover


def _run_dirs(data_dir: Path) -> set:
    try:
        return {p.resolve() for p in store.run_dirs(data_dir)}
    except IolabError:
        return set()


def _execute(notebook: Path, output: Path, parameters: dict, *, cwd: Path, timeout: float | None) -> str | None:
    """Run the notebook (the one executor, kept when it fails); ``None`` when it succeeded, else the error in one line."""
    try:
        notebook_execution.execute(notebook, output, parameters=parameters, cwd=cwd, timeout=timeout)
    except notebook_execution.NotebookFailed as exc:
        detail = exc.evalue if exc.ename == "IolabError" else f"{exc.ename}: {exc.evalue}"
        return f"{detail} (cell {exc.cell})"
    except Exception as exc:  # kernel died, timeout, unreadable notebook: the entry fails, the batch goes on
        return f"{type(exc).__name__}: {exc}"
    return None


def run_entry(entry: Entry, *, data_dir: str | os.PathLike, batch_dir: str | os.PathLike,
              notebook: str | os.PathLike | None = None, cwd: str | os.PathLike | None = None,
              progress: bool = False) -> EntryResult:
    """Execute the measure notebook for one entry; never raises for a failing entry."""
    data_dir, batch_dir = Path(data_dir).resolve(), Path(batch_dir)
    notebook = Path(notebook) if notebook else measure_notebook()
    started = time.monotonic()
    staged = batch_dir / f"{entry.name}.ipynb"
    result_file = batch_dir / f"{entry.name}.result.json"
    before = _run_dirs(data_dir)
    parameters = entry.parameters(data_dir=data_dir, result_file=str(result_file), progress=progress)
    log.info("batch entry %s: executing %s", entry.name, notebook)
    error = _execute(notebook, staged, parameters, cwd=Path(cwd) if cwd else notebook.parent,
                     timeout=entry.timeout)
    try:
        reported = read_result_file(result_file)
    except IolabError as exc:
        reported, error = {"runs": []}, error or str(exc)
    run_dirs = [Path(r["run_dir"]) for r in reported["runs"]]
    if not run_dirs:
        # the notebook failed inside a run, before it could name it: the new run directories are its
        run_dirs = sorted(_run_dirs(data_dir) - before)
    unfinished = []
    for run_dir in run_dirs:
        try:
            manifest = store.read_manifest(run_dir)
        except IolabError:
            continue
        if manifest.get("status") != "completed":
            unfinished.append(f"{run_dir.name}: {manifest.get('status')}"
                              + (f" ({manifest['reason']})" if manifest.get("reason") else ""))
    notebooks = []
    if staged.is_file():
        if run_dirs:
            content = staged.read_bytes()
            for run_dir in run_dirs:
                target = run_dir / NOTEBOOK_NAME
                store.atomic_write(target, content)
                notebooks.append(target)
            staged.unlink()
        else:
            notebooks.append(staged)
    result_file.unlink(missing_ok=True)
    if error is None and unfinished:
        error = "run " + "; ".join(unfinished)
    status = "failed" if error else "completed"
    return EntryResult(name=entry.name, status=status, run_dirs=run_dirs, notebooks=notebooks, error=error,
                       seconds=time.monotonic() - started)


def plan_entry(entry: Entry) -> EntryResult:
    """A dry run of one entry: the job files and commands of each recipe; nothing is created or run.

    It checks what :func:`iolab.engine.runner.run` checks first (recipe, fio, targets,
    free space, block-device rules); a problem makes a ``failed`` result.
    """
    from iolab.engine import dryrun
    started = time.monotonic()
    parts = []
    try:
        for ref in entry.recipes:
            recipe = select_tests(ref, entry.tests, preset=entry.preset)
            parts.append(dryrun.dry_run(recipe, entry.targets, size=entry.size, runtime=entry.runtime,
                                        repeat=entry.repeat, isolation=entry.isolation, confirm=entry.confirm,
                                        mem_limit=entry.mem_limit))
    except IolabError as exc:
        return EntryResult(name=entry.name, status="failed", error=str(exc), seconds=time.monotonic() - started,
                           plan="\n".join(parts) or None)
    return EntryResult(name=entry.name, status="dry-run", seconds=time.monotonic() - started, plan="\n".join(parts))


def run_batch(inventory: Inventory | str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
              dry_run: bool = False, only: Sequence[str] = (), notebook: str | os.PathLike | None = None,
              on_event: Callable[[str, Entry, EntryResult | None], None] | None = None) -> BatchResult:
    """Run every entry (or the ``only`` ones) in sequence; a failing entry does not stop the others.

    ``data_dir``: the result store (default: the inventory's ``data``, else
    ``data``). ``on_event(kind, entry, result)`` reports progress: ``"refused"``
    for each entry that failed the check before anything runs, then
    ``"start"`` (result None) and ``"end"`` for each entry that runs.
    """
    if not isinstance(inventory, Inventory):
        inventory = load_inventory(inventory)
    entries = [inventory.entry(name) for name in only] if only else list(inventory.entries)
    data_dir = Path(data_dir if data_dir is not None else inventory.data or "data").resolve()
    notify = on_event or (lambda kind, entry, result: None)
    if dry_run:
        results = []
        for entry in entries:
            notify("start", entry, None)
            results.append(plan_entry(entry))
            notify("end", entry, results[-1])
        return BatchResult(results, None)
    notebook = Path(notebook) if notebook else measure_notebook()
    # every entry's recipes, targets and fio are checked before the first one runs: a typo in the
    # last entry shows at once, not hours later (the runner checks again when the entry runs)
    refused = {entry.name: checked for entry in entries if not (checked := plan_entry(entry)).ok}
    for entry in entries:
        if entry.name in refused:
            refused[entry.name].plan = None
            notify("refused", entry, refused[entry.name])
    batch_dir = _batch_dir(data_dir)
    summary = {"inventory": str(inventory.path.resolve()), "data_dir": str(data_dir), "notebook": str(notebook),
               "host": store.hostname(), "started": store.utcnow(), "ended": None, "entries": []}
    results = []
    for entry in entries:
        if entry.name in refused:
            result = refused[entry.name]
        else:
            notify("start", entry, None)
            try:
                result = run_entry(entry, data_dir=data_dir, batch_dir=batch_dir, notebook=notebook,
                                   cwd=inventory.path.resolve().parent)
            except KeyboardInterrupt:  # Ctrl-C: say in the summary how far the batch got, then stop
                summary["entries"].append(EntryResult(name=entry.name, status="interrupted",
                                                      error="interrupted by the user").to_dict())
                summary.update(ended=store.utcnow(), interrupted=True)
                store.atomic_write(batch_dir / "batch.json", json.dumps(summary, indent=2) + "\n")
                raise
            notify("end", entry, result)
        results.append(result)
        summary["entries"].append(result.to_dict())
        store.atomic_write(batch_dir / "batch.json", json.dumps(summary, indent=2) + "\n")
    summary["ended"] = store.utcnow()
    store.atomic_write(batch_dir / "batch.json", json.dumps(summary, indent=2) + "\n")
    return BatchResult(results, batch_dir)
