"""What a run would do, as text (``iolab run --dry-run``): its job files and commands; nothing is created."""
from __future__ import annotations

import os

from iolab.engine import targets as targets_mod
from iolab.engine.runner import FioEngine, plan
from iolab.engine.runoptions import RunOptions


def dry_run(recipe, target_specs, options: RunOptions | None = None, **keywords) -> str:
    """The job files and commands a run with ``options`` (or these RunOptions keywords) would use, as text;
    nothing is created."""
    options = RunOptions.of(options, **keywords)
    recipe, targets = plan(recipe, target_specs, options)
    lines = [f"# recipe {recipe.name}: {recipe.description}",
             f"# isolation requested: {recipe.isolation}; size {recipe.size} B; repeat {recipe.repeat}"]
    if recipe.engine != "fio":
        # these engines build their work at run time (python loops, pgbench, fio per sample)
        lines.append(f"# engine {recipe.engine}: it runs these tests itself; the run directory will hold "
                     "every command and job file it used")
        lines += [f"# target: {t.spec} ({t.kind})" for t in targets]
        lines += [f"#   {test.name}: {test.description}" for test in recipe.tests]
        if recipe.options:
            lines.append("# options: " + ", ".join(f"{k}={v}" for k, v in recipe.options.items()))
        return "\n".join(lines)
    lines.append("# confined (bubblewrap): read-only /; writable: each target's run directory, the run's raw/"
                 + "".join(f", {p}" for p in options.allow.paths)
                 + "; devices: the named block devices only")
    engine = FioEngine(recipe, targets, None, mem_limit=None, progress=False, scratch_dir=None)  # writes nothing
    for step in recipe.steps():
        for target in targets:
            if target.kind == "dir":
                target.test_file = os.path.join(target.path, "iolab-<run_id>", targets_mod.TEST_FILE)
            elif target.kind == "emulated":
                target.test_file = f"<emulated {target.spec[len(targets_mod.EMULATED_PREFIX):]} device>"
            text = engine.job_text(step, target, force_direct=False)  # the run's own job writing (--log-interval too)
            lines += [f"# --- {step.id} on {target.spec}: fio --output-format={recipe.output_format} <job file>", text]
    return "\n".join(lines)
