"""Input that cannot give a result is refused before a run directory exists.

:func:`check` runs in :func:`iolab.engine.runner.plan`: an unknown emulated device
profile or a test size below the block sizes fio would use would otherwise
create a run directory only to fail in it.
"""
from __future__ import annotations

from iolab.engine import targets as targets_mod
from iolab.core.errors import IolabError
from iolab.engine.fio.parse import block_sizes
from iolab.core.units import human_size

#: The block size iolab lays test files out with (see FioEngine._layout).
LAYOUT_BS = 1024**2


def check(recipe, target_specs) -> None:
    """Raise :class:`IolabError` for input that would only make a failed run directory."""
    for spec in target_specs:
        spec = str(spec)
        if spec.startswith(targets_mod.EMULATED_PREFIX) and spec[len(targets_mod.EMULATED_PREFIX):]:
            from iolab.devices.emulated import get_profile
            get_profile(spec[len(targets_mod.EMULATED_PREFIX):])  # unknown profile: IolabError with the known ones
    if recipe.engine == "fio" and recipe.jobfile is None:
        _check_size(recipe)


def _check_size(recipe) -> None:
    needed, why = LAYOUT_BS, "the 1 MiB blocks the test file is laid out with"
    for step in recipe.steps():
        merged = {**recipe.fio, **step.options}
        largest = max((b for b in block_sizes(merged).values() if b), default=0)
        if largest > needed:
            needed, why = largest, f"the block size of test {step.id}"
    sizes = [("--size", recipe.size)] + [(f"test {t.name}: size", t.size) for t in recipe.tests if t.size]
    for name, size in sizes:
        if size < needed:
            raise IolabError(f"{size} B is smaller than {why} ({human_size(needed)}): fio would refuse the job",
                             context=name, hint=f"use at least --size {needed // 1024**2}M")
