"""`iolab run` on a raw block device follows the same safety rules as `iolab setup`."""
import json
import subprocess
from pathlib import Path

from cli_helpers import iolab_cli, needs_fio, needs_root
from device_fixtures import make_loop, scratch, sh  # noqa: F401  (fixtures)

pytestmark = [needs_root, needs_fio]

ARGS = ["run", "quick", "--size", "16M", "--runtime", "1", "--no-progress"]


def test_device_with_a_file_system_needs_its_exact_path(make_loop, tmp_path):
    device, other = make_loop("64M"), make_loop("64M")
    sh("mkfs.ext4", "-q", device)
    refused = iolab_cli(*ARGS, "--target", device, "--data", tmp_path / "data")
    assert refused.returncode == 2
    assert device in refused.stderr and "refusing to write" in refused.stderr and "ext4" in refused.stderr
    wrong = iolab_cli(*ARGS, "--target", device, "--confirm", other, "--data", tmp_path / "data")
    assert wrong.returncode == 2 and "does not name this device" in wrong.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was created
    ok = iolab_cli(*ARGS, "--tests", "SEQ1M-Q8T1", "--target", device, "--confirm", device, "--data", tmp_path / "data")
    assert ok.returncode == 0, ok.stderr
    run_dir = Path(ok.stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["targets"][0]["kind"] == "block"
    job = (run_dir / "jobs" / "SEQ1M-Q8T1-write.fio").read_text()
    assert f"filename={device}" in job


def test_mounted_device_is_refused_even_when_confirmed(make_loop, scratch, tmp_path):  # noqa: F811
    device = make_loop("64M")
    sh("mkfs.ext4", "-q", device)
    mnt = scratch / "mnt"
    mnt.mkdir()
    sh("mount", device, mnt)
    try:
        proc = iolab_cli(*ARGS, "--target", device, "--confirm", device, "--data", tmp_path / "data")
    finally:
        sh("umount", mnt)
    assert proc.returncode == 2 and "mounted" in proc.stderr and device in proc.stderr


def test_device_smaller_than_the_test_is_refused(make_loop, tmp_path):
    device = make_loop("8M")
    proc = iolab_cli(*ARGS[:2], "--size", "64M", "--target", device, "--data", tmp_path / "data")
    assert proc.returncode == 2 and "the test needs 64 MiB" in proc.stderr
