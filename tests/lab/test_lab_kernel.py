"""The lab guest is the platform iolab's users have: cgroup v2 unified, md, dm, real disks."""
import subprocess
from pathlib import Path

import pytest

from iolab.isolation import cgroups

pytestmark = pytest.mark.lab


def test_cgroup_v2_unified_with_memory_and_io():
    layout = cgroups.detect()
    assert layout.version == "v2"
    assert {"memory", "io"} <= set(layout.v2_controllers)
    assert layout.locate("memory") == ("v2", "/sys/fs/cgroup")
    assert layout.locate("io") == ("v2", "/sys/fs/cgroup")


@pytest.mark.parametrize("module", ["md_mod", "raid0", "raid1", "dm_mod", "dm_delay", "null_blk"])
def test_kernel_modules_load(module):
    assert subprocess.run(["modprobe", module], capture_output=True).returncode == 0


def test_raw_disks_are_block_devices(lab_disks):
    for disk in lab_disks:
        name = Path(disk).name
        assert Path(f"/sys/block/{name}").is_dir()
        assert int(Path(f"/sys/block/{name}/size").read_text()) * 512 == 1024**3
