"""Which host tests measure against time -- a throttle's rate, an emulated device's latency, the page cache
or huge pages of the whole machine, a watchdog's or a kill's seconds, jobs started together -- and so run
with nothing beside them: tools/test.sh runs the others on two pytest-xdist workers first, then these
(marker ``alone``, set by tests/conftest.py)."""
from pathlib import Path

#: directories (ending in /) and files, relative to the checkout; beside them in tests/classic and tests/devices
#: are only parsers of captured output, plans checked without running them, and real runs whose figures no
#: test compares with a rate or a time (cdm_presets, mariadb_install, originals, health, iscsi, plan_*)
ALONE = ("tests/isolation/",
         "tests/classic/test_bonnie.py", "tests/classic/test_classic_recipes.py",
         "tests/classic/test_flash_amounts.py", "tests/classic/test_flash_small_device.py",
         "tests/classic/test_gnomedisks.py", "tests/classic/test_hdparm.py", "tests/classic/test_pgbench.py",
         "tests/classic/test_pgbench_cluster.py", "tests/classic/test_sqlbench.py",
         "tests/classic/test_steady_purge.py", "tests/classic/test_steady_state_recipe.py",
         "tests/devices/test_ceiling_probe.py", "tests/devices/test_ceiling_probe_limit.py",
         "tests/devices/test_consumer_ssd.py", "tests/devices/test_devices.py", "tests/devices/test_emulated.py",
         "tests/devices/test_emulated_latency.py", "tests/devices/test_setup_plan.py",
         "tests/engine/test_ceiling_probe_option.py", "tests/engine/test_directio.py",
         "tests/engine/test_faults.py", "tests/engine/test_fioproc_limit.py", "tests/engine/test_reaper.py",
         "tests/engine/test_reaper_trust.py", "tests/engine/test_simultaneous_run.py",
         "tests/fleet/test_fleet.py")  # three fio servers start within one job's second


def alone(path: Path, root: Path) -> bool:
    """Whether the test file ``path`` is one of :data:`ALONE` (``root``: the checkout)."""
    return str(Path(path).relative_to(root)).startswith(ALONE)
