"""The one reader of the kernel's mount table: the mount holding a path, as findmnt finds it."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from iolab.core import mountinfo
from iolab.devices import provenance
from iolab.engine import sysinfo

PATHS = ["/", "/proc/self", "/sys/kernel", "/dev/null", "/tmp", "/etc/hostname"]


def _findmnt(path: str) -> dict:
    out = subprocess.run(["findmnt", "-J", "-T", path, "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["filesystems"][0]


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="findmnt (util-linux) is not installed")
@pytest.mark.parametrize("path", PATHS)
def test_the_run_records_the_mount_findmnt_names(path):
    found, told = sysinfo.mount_of(path), _findmnt(path)
    assert found["mountpoint"] == told["target"]
    assert found["filesystem"] == told["fstype"]
    # findmnt adds a bind mount's root ("/dev/vda[/sub]"); the device is the same
    assert (told["source"] or "").split("[")[0] == found["source"]
    assert set(found["mount_options"].split(",")) == set(told["options"].split(","))


def test_a_files_provenance_names_the_same_file_system(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    recorded = provenance.device_provenance(tmp_path / "f")["filesystem"]
    mount = mountinfo.mount_of(tmp_path / "f")
    assert recorded == {"target": mount.mountpoint, "source": mount.source, "fstype": mount.fstype,
                        "options": mount.all_options}


def test_the_longest_mount_point_holds_a_path_and_the_last_mounted_of_equals():
    table = [("/", "root"), ("/srv", "first"), ("/srv/data", "data"), ("/srv", "second"), ("/srvx", "other")]
    held = lambda path: mountinfo.holder(path, table, mountpoint=lambda e: e[0])[1]  # noqa: E731
    assert held("/srv/data/x") == "data"
    assert held("/srv/x") == "second"       # mounted over the first
    assert held("/srvx") == "other"
    assert held("/srvy") == "root"          # a prefix of the name is no parent directory
    assert held("/") == "root"


def test_options_are_said_once_mount_first():
    mount = mountinfo.Mount("/", "ext4", "/dev/vda", "rw,discard", "rw,relatime", "254:0")
    assert mount.all_options == "rw,relatime,discard"
