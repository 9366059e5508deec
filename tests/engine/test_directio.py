"""iolab.engine.directio: GNOME Disks' offsets (GLib's generator, checked against libglib),
aligned huge-page buffers, and every worker operation run as the engines run it
(a fresh ``python -I -S iolab/engine/directio OP SPEC`` process) on real files."""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from iolab.engine import directio

MiB = 1024 * 1024


def libglib():
    name = ctypes.util.find_library("glib-2.0")
    if name is None:
        pytest.skip("libglib-2.0 is not installed (it is on any GNOME system: apt-get install libglib2.0-0)")
    lib = ctypes.CDLL(name)
    lib.g_rand_new_with_seed.restype = ctypes.c_void_p
    lib.g_rand_new_with_seed.argtypes = [ctypes.c_uint32]
    lib.g_rand_int.restype = ctypes.c_uint32
    lib.g_rand_int.argtypes = [ctypes.c_void_p]
    lib.g_rand_double_range.restype = ctypes.c_double
    lib.g_rand_double_range.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double]
    lib.g_rand_free.argtypes = [ctypes.c_void_p]
    return lib


def run_op(op: str, spec: dict, *, cwd="/") -> tuple[int, dict]:
    """The worker as the engines start it: isolated interpreter, no iolab on the path."""
    proc = subprocess.run(directio.command(op, spec), capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert proc.stderr == "", proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(16 * MiB))
    return path


# --------------------------------------------------------------------------- GNOME Disks' generator

def test_glib_rand_is_glibs_generator_bit_for_bit():
    lib = libglib()
    theirs = lib.g_rand_new_with_seed(42)
    ours = directio.glib_rand(42)
    try:
        assert [lib.g_rand_int(theirs) for _ in range(1000)] == [ours.getrandbits(32) for _ in range(1000)]
        size = 1000204886016.0  # a "1 TB" disk
        assert [lib.g_rand_double_range(theirs, 0.0, size) for _ in range(1000)] == \
            [directio.g_rand_double_range(ours, 0.0, size) for _ in range(1000)]
    finally:
        lib.g_rand_free(theirs)


def test_access_offsets_follow_gnome_disks():
    lib = libglib()
    size = 500107862016
    rand = lib.g_rand_new_with_seed(42)
    expected = []
    for _ in range(50):
        offset = int(lib.g_rand_double_range(rand, 0.0, float(size)))
        expected.append(offset - offset % 4096)
    lib.g_rand_free(rand)
    offsets = directio.access_offsets(size, 50, seed=42)
    assert offsets == expected
    assert all(o % 4096 == 0 and 0 <= o < size for o in offsets)
    assert directio.access_offsets(size, 50, seed=43) != offsets


def test_transfer_offsets_spread_evenly_and_fit():
    size = 1000 * MiB
    offsets = directio.transfer_offsets(size, 100, 10 * MiB)
    assert offsets[0] == 0 and offsets[1] == 10 * MiB and offsets[99] == 990 * MiB
    assert all(o % 4096 == 0 for o in offsets)
    # a device smaller than samples x sample size: the last samples start early enough to fit
    small = directio.transfer_offsets(64 * MiB, 100, 10 * MiB)
    assert max(small) == 54 * MiB and small == sorted(small)
    with pytest.raises(directio.WorkerError, match="smaller than one sample"):
        directio.transfer_offsets(4 * MiB, 10, 10 * MiB)


# --------------------------------------------------------------------------- buffers

def test_aligned_buffer_is_2mib_aligned_prefaulted_and_closes():
    buf = directio.AlignedBuffer(4 * MiB)
    try:
        assert buf.address % directio.HUGE_PAGE == 0
        assert len(buf.view) == 4 * MiB
        part = buf.part(4096)
        assert len(part) == 4096
        thp = buf.thp_bytes()
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
        if mode.exists() and "[never]" not in mode.read_text():
            assert thp and thp >= 2 * MiB, "MADV_HUGEPAGE did not give huge pages"
    finally:
        buf.close()  # sub-views are released: no "exported pointers" error


# --------------------------------------------------------------------------- operations

def test_gnome_transfer_reads_and_rewrites_without_changing_data(data_file):
    before = sha(data_file)
    rc, result = run_op("gnome-transfer", {"path": str(data_file), "samples": 8, "sample_size": MiB, "write": True})
    assert rc == 0, result
    assert result["size"] == 16 * MiB and len(result["samples"]) == 8
    first = result["samples"][0]
    assert first["offset"] == 0 and first["read_bytes"] == MiB and first["write_bytes"] == MiB
    assert all(s["read_s"] > 0 and s["write_s"] > 0 for s in result["samples"])
    assert [s["offset"] for s in result["samples"]] == directio.transfer_offsets(16 * MiB, 8, MiB)
    assert sha(data_file) == before  # GNOME Disks' rewrite writes back what it read


def test_gnome_access_times_each_read(data_file):
    rc, result = run_op("gnome-access", {"path": str(data_file), "samples": 100})
    assert rc == 0, result
    assert [s["offset"] for s in result["samples"]] == directio.access_offsets(16 * MiB, 100, 42)
    assert all(s["bytes"] == 4096 and s["seconds"] > 0 for s in result["samples"])


def test_hdparm_cached_counts_whole_2mib_reads(data_file):
    rc, result = run_op("hdparm-cached", {"path": str(data_file), "seconds": 0.3})
    assert rc == 0, result
    assert result["bytes"] == result["iterations"] * 2 * MiB and result["iterations"] > 1
    assert 0.29 < result["loop_s"] < 1.0 and result["elapsed_s"] < result["loop_s"]


def test_bonnie_putc_writes_bonnies_bytes_one_call_each(tmp_path):
    path = tmp_path / "Bonnie.1"
    path.write_bytes(b"x" * 100)  # bonnie++ unlinks and creates the file anew
    rc, result = run_op("bonnie-putc", {"path": str(path), "bytes": 64 * 1024, "chunk": 8192})
    assert rc == 0, result
    assert result["bytes"] == 64 * 1024 == path.stat().st_size
    assert path.read_bytes() == bytes(i & 0x7F for i in range(8192)) * 8
    assert result["lat_max_s"] > 0 and result["usr_s"] + result["sys_s"] > 0


def test_bonnie_rewrite_dirties_one_byte_per_chunk(data_file):
    before = data_file.read_bytes()
    rc, result = run_op("bonnie-rewrite", {"path": str(data_file), "chunk": 8192})
    assert rc == 0, result
    after = data_file.read_bytes()
    assert result["bytes"] == len(before) == len(after)
    for n in range(0, len(before) // 8192, 97):
        a, b = before[n * 8192:(n + 1) * 8192], after[n * 8192:(n + 1) * 8192]
        changed = [i for i in range(8192) if a[i] != b[i]]
        assert changed == [n % 8192] and b[n % 8192] == (a[n % 8192] + 1) % 256


def test_bonnie_getc_reads_byte_by_byte(data_file):
    rc, result = run_op("bonnie-getc", {"path": str(data_file), "bytes": 32 * 1024, "chunk": 8192})
    assert rc == 0, result
    assert result["bytes"] == 32 * 1024 and result["elapsed_s"] > 0


def test_bonnie_seeks_share_tickets_and_write_back_the_same_block(data_file):
    before = data_file.read_bytes()
    spec = {"path": str(data_file), "chunk": 8192, "seeks": 3000, "procs": 5, "seed": 11}
    rc, result = run_op("bonnie-seeks", spec)
    assert rc == 0, result
    assert result["seeks"] == 3000 and result["procs"] == 5
    assert 200 < result["writes"] < 400  # one in ten, by the tickets' value as bonnie++ 1.98+
    rc, again = run_op("bonnie-seeks", spec)
    assert again["writes"] == result["writes"]  # same seed, same tickets
    after = data_file.read_bytes()
    assert len(after) == len(before)
    for n in range(len(before) // 8192):
        a, b = before[n * 8192:(n + 1) * 8192], after[n * 8192:(n + 1) * 8192]
        if a != b:  # a rewritten block differs only in the byte bonnie++ dirties
            assert [i for i in range(8192) if a[i] != b[i]] == [n % 8192]


def test_worker_errors_are_json(tmp_path):
    rc, result = run_op("bonnie-getc", {"path": str(tmp_path / "missing"), "bytes": 8192, "chunk": 8192})
    assert rc == 1 and "cannot open" in result["error"]
    rc, result = run_op("hdparm-cached", {"path": str(tmp_path / "missing")})
    assert rc == 1 and result["error"]
    proc = subprocess.run([*directio.command("gnome-access", {})[:4], "nonsense", "{}"], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "usage" in json.loads(proc.stdout)["error"]
    with pytest.raises(ValueError):
        directio.command("nonsense", {})
