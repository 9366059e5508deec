"""The flash recipes on a block device smaller than the recipe's 1G test area (issue 25 items 3 and 4).

Without ``--size``, sustained-write writes a block device's own capacity and steady-state preconditions
over it (twice) and runs its rounds over the whole device: the size check asks the device to hold no more
than that. A declared ``--size`` larger than the device is still refused. Real loop devices and real fio
(a device test: run only through the device-test lock)."""
from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import iolab_cli, needs_fio, needs_root
from device_fixtures import make_loop, mounted_image, scratch  # noqa: F401  (fixtures)

pytestmark = [needs_root, needs_fio]

MiB = 1024**2


def _run(*args, data: Path) -> dict:
    proc = iolab_cli("run", *args, "--no-progress", "--data", data)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    return {"manifest": manifest, "dir": run_dir}


def test_sustained_write_without_size_writes_a_small_device_whole(make_loop, tmp_path):
    device = make_loop("48M")
    run = _run("sustained-write", "--target", device, "--confirm", device, "--pause", "1", data=tmp_path / "data")
    amount = run["manifest"]["sustained"]["amount"]
    assert list(amount.values()) == [{"bytes": 48 * MiB, "why": "capacity", "capacity": 48 * MiB,
                                      "capacity_source": "device"}]
    assert "\nsize=48m\n" in (run["dir"] / "jobs" / "sustained.fio").read_text()
    refused = iolab_cli("run", "sustained-write", "--size", "1G", "--target", device, "--confirm", device,
                        "--no-progress", "--data", tmp_path / "refused")
    assert refused.returncode == 2 and "the device holds 48 MiB, the test needs 1 GiB" in refused.stderr
    assert not (tmp_path / "refused").exists()  # refused before a run directory exists


def test_sustained_write_on_a_file_on_a_small_file_system_writes_the_file_without_room_for_1g(scratch, tmp_path):
    """A file target is its own capacity: on a 96 MiB file system, a 40 MiB file is written whole; the recipe's
    1G test area is not asked for (it was refused for want of 1G free). An empty file still stands for the test
    area, and a declared --size beyond the free space is refused, naming the target."""
    with mounted_image(scratch / "fs.img", scratch / "mnt", size="96M"):
        target = scratch / "mnt" / "drive.img"
        with open(target, "wb") as handle:
            handle.truncate(40 * MiB)
        run = _run("sustained-write", "--target", target, "--confirm", target, "--pause", "1", data=tmp_path / "data")
        amount = list(run["manifest"]["sustained"]["amount"].values())
        assert amount == [{"bytes": 40 * MiB, "why": "capacity", "capacity": 40 * MiB, "capacity_source": "file"}]
        for size, name in (("1G", "drive.img"), (None, "empty.img")):
            path = scratch / "mnt" / name
            path.touch()
            refused = iolab_cli("run", "sustained-write", *(["--size", size] if size else []), "--target", path,
                                "--confirm", path, "--no-progress", "--data", tmp_path / f"refused-{name}")
            assert refused.returncode == 2 and "not enough free space" in refused.stderr, refused.stderr
            assert f"--target {path}" in refused.stderr


def test_steady_state_without_size_stays_within_a_small_device(make_loop, tmp_path):
    device = make_loop("32M")
    run = _run("steady-state", "--target", device, "--confirm", device, "--runtime", "1", "--max-rounds", "5",
               data=tmp_path / "data")
    plan = list(run["manifest"]["steady_state"]["precondition"].values())
    assert [(p["bytes"], p["capacity"], p["capacity_source"]) for p in plan] == [(64 * MiB, 32 * MiB, "device")]
    jobs = {p.stem: p.read_text() for p in (run["dir"] / "jobs").glob("*.fio")}
    precondition = next(text for name, text in jobs.items() if name.startswith("precondition"))
    rounds = next(text for name, text in jobs.items() if name.startswith("round"))
    assert "\nsize=32m\n" in precondition and "\nio_size=64m\n" in precondition
    assert "\nsize=32m\n" in rounds  # the whole device, not the recipe's 1G
