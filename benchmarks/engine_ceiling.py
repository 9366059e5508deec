"""Is the I/O engine iolab's ceiling? iolab against the best hand-tuned plain fio on a RAM target, per CDM row.

On tmpfs nothing is slower than the CPU and the kernel's page cache, so whatever holds a figure below
plain fio's best is iolab's own doing: its job options, or an engine that submits one I/O at a time
(libaio on tmpfs: io_submit does each I/O before it returns, so Q32 runs as Q1).

For each preset (default: crystaldiskmark's ``default`` and ``peak``):

1. ``iolab run crystaldiskmark --preset P`` on the target, the recipe as it is (its engine choice:
   libaio for ``default``, io_uring for ``peak`` where the kernel offers it), ``--repeat ROUNDS``,
   the best pass per row (CrystalDiskMark's statistic);
2. plain fio, the same rows (rw, bs, iodepth, numjobs, runtime) on a file of the same size, with
   each engine setting worth trying here: libaio, io_uring (also with fixedbufs and registerfiles,
   also buffered), psync and pvsync2; the best pass of the best setting is "the best hand-tuned fio".

Prints one line per row: iolab's MB/s, its engine and whether it was flagged ``engine_sync``; the best
plain fio's MB/s and its setting; the ratio iolab/plain (goal: >= 0.95 for every row). Not a timed
test: about (rows x 6 settings + rows) x ROUNDS x RUNTIME seconds.

    .venv/bin/python benchmarks/engine_ceiling.py                       # root: mounts a tmpfs for itself
    .venv/bin/python benchmarks/engine_ceiling.py --target /mnt/ram --presets peak --rounds 3

Exit status 1 when a row is below the goal.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import iolab  # noqa: E402
from iolab.core.mountinfo import mount_of  # noqa: E402
from iolab.core.units import fio_size, parse_size  # noqa: E402
from iolab.engine import recipes  # noqa: E402
from iolab.engine.fio import parse_output  # noqa: E402

GOAL = 0.95
#: The settings a hand-tuner would try on a RAM target: (label, options).
SETTINGS = [
    ("libaio", {"ioengine": "libaio", "direct": 1}),
    ("io_uring", {"ioengine": "io_uring", "direct": 1}),
    ("io_uring fixedbufs registerfiles", {"ioengine": "io_uring", "direct": 1, "fixedbufs": 1,
                                          "registerfiles": 1}),
    ("io_uring buffered", {"ioengine": "io_uring", "direct": 0}),
    ("psync", {"ioengine": "psync", "direct": 1}),
    ("pvsync2", {"ioengine": "pvsync2", "direct": 1}),
]


@contextmanager
def ram_target(target: str | None, size: int):
    """The target directory on tmpfs: the one given (checked), else a tmpfs mounted for the benchmark (root)."""
    if target:
        mount = mount_of(target)
        if mount is None or mount.fstype not in ("tmpfs", "ramfs"):
            raise SystemExit(f"{target} is not on tmpfs or ramfs ({mount.fstype if mount else 'no mount'})")
        yield Path(target)
        return
    if os.geteuid() != 0:
        raise SystemExit("give --target DIR on a tmpfs, or run as root to let the benchmark mount one")
    where = Path(tempfile.mkdtemp(prefix="iolab-ceiling-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={3 * size // 1024**2 + 128}m", "tmpfs", str(where)],
                   check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


def through_iolab(target: Path, preset: str, args, data: Path) -> tuple[pd.DataFrame, dict]:
    """The recipe as it is: best MB/s per (test, direction), its engine and flags; and the run's manifest."""
    argv = [sys.executable, "-m", "iolab", "run", "crystaldiskmark", "--preset", preset, "--target", str(target),
            "--size", args.size, "--runtime", str(args.runtime), "--repeat", str(args.rounds), "--pause", "0",
            "--data", str(data), "--no-progress"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"iolab run failed: {out.stderr.strip()[-2000:]}")
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    table = iolab.load(run_dir)
    table = table[table["rep"] > 0]
    rows = table.groupby(["test", "direction"], sort=False).agg(
        iolab_mbps=("bw_mbps", "max"), ioengine=("ioengine", "first"),
        flags=("flags", lambda f: ";".join(sorted({x for v in f.dropna() for x in str(v).split(";") if x}))))
    return rows.reset_index(), json.loads((run_dir / "manifest.json").read_text())


def job_text(step, recipe, setting: dict, filename: Path, size: str) -> str:
    options = {**{k: v for k, v in recipe.fio.items() if k != "ioengine"}, **step.options, **setting,
               "filename": str(filename), "size": size, "group_reporting": 1}
    return f"[{step.id}]\n" + "".join(f"{k}={v}\n" for k, v in options.items())


def plain_best(step, recipe, target: Path, args, cache: dict) -> tuple[float, str]:
    """The best MB/s plain fio reaches on ``step``'s row over every setting (cached per row)."""
    key = tuple(sorted((k, str(v)) for k, v in step.options.items()))
    if key in cache:
        return cache[key]
    data, best = target / "plain-ceiling.dat", (0.0, "")
    size = fio_size(parse_size(args.size))
    if not data.exists():  # laid out once, with real data, as iolab lays its file out
        lay = target / "layout.fio"
        lay.write_text(f"[layout]\nfilename={data}\nsize={size}\nrw=write\nbs=1m\nioengine=psync\nend_fsync=1\n")
        subprocess.run(["fio", "--output-format=json", str(lay)], capture_output=True, check=True)
    for label, setting in SETTINGS:
        job = target / "plain.fio"
        job.write_text(job_text(step, recipe, setting, data, size))
        for _ in range(args.rounds):
            out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"  (plain fio {label} on {step.id} failed: {out.stderr.strip()[:200]})")
                break
            mbps = parse_output(out.stdout)["bw_mbps"].sum()
            if mbps > best[0]:
                best = (float(mbps), label)
    cache[key] = best
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", help="a directory on tmpfs (default, as root: a tmpfs mounted for the run)")
    parser.add_argument("--presets", default="default,peak", help="crystaldiskmark presets (default: default,peak)")
    parser.add_argument("--size", default="256M", help="test file size (default 256M)")
    parser.add_argument("--runtime", type=int, default=2, help="seconds per pass (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="passes per row and setting; the best is kept")
    args = parser.parse_args()
    cache, below = {}, 0
    with ram_target(args.target, parse_size(args.size)) as target, tempfile.TemporaryDirectory() as data:
        for preset in args.presets.split(","):
            recipe = recipes.load("crystaldiskmark").with_overrides(preset=preset, size=args.size,
                                                                     runtime=args.runtime)
            rows, manifest = through_iolab(target, preset, args, Path(data))
            choice = manifest.get("ioengine") or {}
            why = (choice.get("fallback") or {}).get("reason")
            print(f"\npreset {preset}: iolab ran {choice.get('chosen')}" + (f" (io_uring not used: {why})"
                                                                            if why else ""))
            print(f"{'row':24s} {'iolab MB/s':>11s} {'engine':9s} {'sync':5s} {'plain MB/s':>11s} "
                  f"{'best plain setting':34s} {'ratio':>6s}", flush=True)
            for step in recipe.steps():
                mine = rows[(rows["test"] == step.test) & (rows["direction"] == step.rw.replace("rand", ""))]
                if mine.empty:
                    continue
                mine = mine.iloc[0]
                plain, label = plain_best(step, recipe, target, args, cache)
                ratio = mine["iolab_mbps"] / plain if plain else float("nan")
                below += ratio < GOAL
                flagged = "yes" if "engine_sync" in mine["flags"] else "no"
                print(f"{step.id:24s} {mine['iolab_mbps']:11.1f} {str(mine['ioengine']):9s} {flagged:5s} "
                      f"{plain:11.1f} {label:34s} {ratio:6.3f}" + ("" if ratio >= GOAL else "  < goal"), flush=True)
    print(f"\nrows below {GOAL}: {below}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
