"""The throw-away cluster's initdb skips its per-file fsync, and nothing of it is left dirty for a measurement.

A real ``initdb`` on an ext4 file system on a loop device: ``raw/initdb.txt``
shows ``--no-sync`` and the ``sync -f`` that follows it; a ``sync`` of the file
system right after ``create`` writes next to nothing to the device (initdb's
~40 MB are already there), while ``create`` itself wrote the cluster; the
cluster starts and ``pgbench`` commits transactions on it.
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.classic import pgcluster

from cli_helpers import database_server

BINARIES, MISSING, needs_root, needs_postgres = database_server(pgcluster.find_binaries, account="postgres")


def written_bytes(device: str) -> int:
    """Bytes written to ``device`` so far (/sys/block/<dev>/stat, sectors of 512 bytes)."""
    fields = Path(f"/sys/block/{os.path.basename(device)}/stat").read_text().split()
    return int(fields[6]) * 512


@pytest.fixture
def ext4_on_loop():
    """(mount point, loop device): a 256 MiB ext4 the postgres account can reach; all removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="iolab-pgcluster-", dir="/var/tmp"))
    base.chmod(0o755)
    image, mount = base / "disk.img", base / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(256 * 1024**2)
    device = mounted = None
    try:
        device = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                                check=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
        subprocess.run(["mount", device, str(mount)], check=True)
        mounted = True
        mount.chmod(0o755)
        yield mount, device
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=True)
        if device:
            subprocess.run(["losetup", "-d", device], check=True)
        shutil.rmtree(base, ignore_errors=True)


@needs_root
@needs_postgres
def test_initdb_skips_its_fsync_and_leaves_nothing_dirty(ext4_on_loop):
    mount, device = ext4_on_loop
    cluster = pgcluster.Cluster(mount, BINARIES, log_dir=mount.parent / "raw")
    try:
        before = written_bytes(device)
        cluster.create({"shared_buffers": "16MB"})
        created = written_bytes(device) - before
        subprocess.run(["sync", "-f", str(mount)], check=True)
        left_dirty = written_bytes(device) - before - created
        size = cluster.size_bytes()
        # the cluster's files reached the device inside create (a fresh ext4 wrote ~nothing before)
        assert size > 20 * 1024**2 and created > 0.8 * size, (created, size)
        assert left_dirty < 1024**2, f"{left_dirty} bytes of the cluster were still dirty after create"
        record = (mount.parent / "raw" / "initdb.txt").read_text().splitlines()
        assert record[0].startswith("$ ") and "initdb" in record[0] and record[0].split()[-1] == "--no-sync"
        assert f"$ sync -f {cluster.data}" in record and record[-1].startswith("[exit 0, ")
        cluster.start()
        proc = subprocess.run([BINARIES.pgbench, "-i", "-s", "1", "--quiet"], capture_output=True, text=True,
                              env=cluster.env)
        assert proc.returncode == 0, proc.stderr
        proc = subprocess.run([BINARIES.pgbench, "-c", "1", "-t", "20"], capture_output=True, text=True,
                              env=cluster.env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "number of transactions actually processed: 20/20" in proc.stdout
    finally:
        cluster.destroy()
    assert not cluster.root.exists()
