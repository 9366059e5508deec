"""How much the flash recipes write when nothing is declared (the target's capacity), and how long the
sustained-write recipe's write after the idle pause is: pure, nothing runs (no fio, no device)."""
from __future__ import annotations

import pytest

from iolab.classic.capacity import capacity, sustained_amount
from iolab.classic.sustained import Engine
from iolab.classic.sustained_options import FALLBACK_BYTES, MIN_BYTES, parse_options, recovery_size
from iolab.core.errors import IolabError
from iolab.engine import recipes
from iolab.engine.targets import Target

MiB = 1024**2


@pytest.fixture
def small_file(tmp_path):
    """A file target of 24 MiB: its capacity is small, as a test's must be."""
    path = tmp_path / "drive.img"
    path.write_bytes(b"\0" * (24 * MiB))
    return Target(spec=str(path), kind="file", name="drive", path=str(path), test_file=str(path))


def test_the_capacity_of_each_kind_of_target_and_why(small_file, tmp_path):
    assert (capacity(small_file, 1024 * MiB).bytes, capacity(small_file, 1024 * MiB).source) == (24 * MiB, "file")
    empty = tmp_path / "empty.img"
    empty.touch()
    found = capacity(Target(spec=str(empty), kind="file", name="e", path=str(empty)), 16 * MiB)
    assert (found.bytes, found.source) == (16 * MiB, "file_empty")  # no size of its own: the test area
    found = capacity(Target(spec=str(tmp_path), kind="dir", name="d", path=str(tmp_path)), 16 * MiB)
    assert (found.bytes, found.source) == (16 * MiB, "dir")  # a file system is never filled
    found = capacity(Target(spec="emulated:consumer-ssd", kind="emulated", name="c"), 16 * MiB)
    assert (found.bytes, found.source) == (16 * MiB, "emulated")  # iolab makes it of --size


def test_the_sustained_write_moves_the_capacity_unless_size_is_declared(small_file):
    recipe = recipes.load("sustained-write")
    amount = sustained_amount(small_file, recipe)
    assert amount.record() == {"bytes": 24 * MiB, "why": "capacity", "capacity": 24 * MiB,
                               "capacity_source": "file"}
    declared = sustained_amount(small_file, recipe.with_overrides(size="8M"))
    assert (declared.bytes, declared.why, declared.capacity.bytes) == (8 * MiB, "declared", 24 * MiB)
    # --size 1G equals the recipe's default, but it was declared: it wins
    assert sustained_amount(small_file, recipe.with_overrides(size="1G")).why == "declared"
    assert sustained_amount(small_file, recipe.with_overrides(runtime="5")).why == "capacity"


def test_the_job_files_carry_each_targets_amount(small_file):
    recipe = recipes.load("sustained-write")
    engine = Engine(recipe, [small_file], None, mem_limit=None, progress=False, scratch_dir=None)
    engine.amounts = {small_file.name: sustained_amount(small_file, recipe)}  # as prepare() sets them
    steps = {s.test: s for s in recipe.steps()}
    assert "\nsize=24m\n" in engine.job_text(steps["sustained"], small_file, False)
    # the recovery write before the burst is measured: the fallback, never more than the amount
    assert FALLBACK_BYTES > 24 * MiB and "\nsize=24m\n" in engine.job_text(steps["recovery"], small_file, False)
    engine.recoveries[small_file.name] = recovery_size(7e6, None, 24 * MiB, engine.options)  # 3 s at 7 MB/s
    assert "\nsize=20m\n" in engine.job_text(steps["recovery"], small_file, False)


OPTIONS = parse_options(recipes.load("sustained-write"))


@pytest.mark.parametrize("burst, cliff, amount, size, why", [
    (500e6, None, 4096 * MiB, int(500e6 * 3) // (128 * 1024) * 128 * 1024, "burst"),  # 3 s at the burst rate
    (500e6, None, 512 * MiB, 512 * MiB, "amount"),         # never more than the sustained write moved
    (50e6, 160 * MiB, 224 * MiB, 128 * MiB, "cache"),      # 0.8 of the cache, not the cliff again
    (1e6, None, 224 * MiB, MIN_BYTES, "floor"),            # a slow drive still writes long enough
    (1e6, 10 * MiB, 224 * MiB, 8 * MiB, "cache"),          # a tiny cache wins over the floor
    (None, None, 224 * MiB, FALLBACK_BYTES, "no_burst"),   # nothing measured
    (float("nan"), None, 32 * MiB, 32 * MiB, "amount"),
])
def test_the_write_after_the_idle_pause_lasts_seconds_at_the_burst_rate(burst, cliff, amount, size, why):
    found = recovery_size(burst, cliff, amount, OPTIONS)
    assert (found.bytes, found.why) == (size, why)
    assert found.bytes % (128 * 1024) == 0


def test_the_sata_ssd_write_after_idle_lasts_long_enough_to_measure():
    """The audit's case: 64 MiB at sata-ssd's 500 MB/s took 0.13 s and measured 594 MB/s. Sized from the
    burst, the write lasts a second or more wherever the amount allows it."""
    found = recovery_size(500e6, None, 2048 * MiB, OPTIONS)
    assert found.bytes / 500e6 == pytest.approx(3.0, rel=0.01)
    assert found.record()["burst_mbps"] == 500.0 and found.record()["seconds_at_burst"] == 3.0


def test_bad_sustained_options_name_their_field():
    recipe = recipes.load("sustained-write")
    recipe.options = {"cache_share": 0}
    with pytest.raises(IolabError, match="cache_share"):
        parse_options(recipe)
    recipe.options = {"recovery_seconds": 3}
    with pytest.raises(IolabError, match="recovery_seconds"):
        parse_options(recipe)
