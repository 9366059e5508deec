"""Is the I/O engine iolab's ceiling? iolab against the best hand-tuned plain fio on a RAM target, per CDM row.

On tmpfs nothing is slower than the CPU and the kernel's page cache, so whatever holds a figure below
plain fio's best is iolab's own doing: its job options, how it runs fio, or an engine that submits one
I/O at a time (libaio on tmpfs: io_submit does each I/O before it returns, so Q32 runs as Q1).

For each preset (default: crystaldiskmark's ``default`` and ``peak``):

1. ``iolab run crystaldiskmark --preset P`` on the target, the recipe as it is (its engine choice:
   io_uring with registered files and buffers on the deeper rows where the kernel offers it, else libaio;
   psync on the Q1 rows), ``--repeat ROUNDS``;
2. plain fio, the same rows (rw, bs, iodepth, numjobs, runtime) on a file of the same size, with
   each engine setting worth trying here (libaio; io_uring plain, with fixedbufs and registerfiles,
   with registerfiles alone, and buffered; psync; pvsync2), and two controls: iolab's own job file
   for the row (from the run directory) run by plain fio, and the same under iolab's confinement
   (bubblewrap, as iolab runs fio). The rounds go through every setting in turn, so drift hits all
   alike.

Every setting gets ROUNDS passes, as iolab does; the best hand-tuned setting is the one with the
highest median among those that keep the row's queue depth on a RAM target (on a Q8/Q32 row not psync,
pvsync2 or libaio, which there do one I/O at a time and so measure Q1: their best is printed as
``sync best``), and the goal (>= 0.95 for every row) compares best pass with best pass: iolab's
(CrystalDiskMark's statistic) and that setting's. Taking the best pass over all settings instead
would compare iolab's best of ROUNDS with the best of 7 x ROUNDS passes, a selection that favours
plain fio whenever passes vary. The controls tell where a gap comes from: iolab/own (how iolab runs
fio: its confinement, its samplers), own/best (the job's options).

Not a timed test: about (rows x 9 settings + rows) x ROUNDS x RUNTIME seconds.

    .venv/bin/python benchmarks/engine_ceiling.py                       # root: mounts a tmpfs for itself
    .venv/bin/python benchmarks/engine_ceiling.py --target /mnt/ram --presets peak --rounds 3
    .venv/bin/python benchmarks/engine_ceiling.py --presets peak --tests RND4K-Q32T1 --rounds 5 \\
        --settings "io_uring,io_uring registerfiles,io_uring fixedbufs registerfiles,io_uring buffered"

Exit status 1 when a row is below the goal.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
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
from iolab.isolation.confine import Confinement  # noqa: E402

GOAL = 0.95
#: The settings a hand-tuner would try on a RAM target: (label, options).
SETTINGS = [
    ("libaio", {"ioengine": "libaio", "direct": 1}),
    ("io_uring", {"ioengine": "io_uring", "direct": 1}),
    ("io_uring fixedbufs registerfiles", {"ioengine": "io_uring", "direct": 1, "fixedbufs": 1,
                                          "registerfiles": 1}),
    ("io_uring registerfiles", {"ioengine": "io_uring", "direct": 1, "registerfiles": 1}),
    ("io_uring buffered", {"ioengine": "io_uring", "direct": 0}),
    ("psync", {"ioengine": "psync", "direct": 1}),
    ("pvsync2", {"ioengine": "pvsync2", "direct": 1}),
]
#: The controls: iolab's own job file for the row, run by plain fio, and under iolab's confinement.
OWN, OWN_CONFINED = "iolab's job", "iolab's job, confined"


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
        # a killed pass's fio may still hold a file for a moment: detached now, gone when it exits
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(where)], check=True)
        where.rmdir()


def through_iolab(target: Path, preset: str, args, data: Path) -> tuple[pd.DataFrame, dict, Path]:
    """The recipe as it is: best and median MB/s per (test, direction), its engine and flags; the run's
    manifest and directory."""
    argv = [sys.executable, "-m", "iolab", "run", "crystaldiskmark", "--preset", preset, "--target", str(target),
            "--size", args.size, "--runtime", str(args.runtime), "--repeat", str(args.rounds), "--pause", "0",
            "--data", str(data), "--no-progress"] + (["--tests", args.tests] if args.tests else [])
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"iolab run failed: {out.stderr.strip()[-2000:]}")
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    table = iolab.load(run_dir)
    table = table[table["rep"] > 0]
    rows = table.groupby(["test", "direction"], sort=False).agg(
        iolab_mbps=("bw_mbps", "max"), iolab_median=("bw_mbps", "median"), ioengine=("ioengine", "first"),
        flags=("flags", lambda f: ";".join(sorted({x for v in f.dropna() for x in str(v).split(";") if x}))))
    return rows.reset_index(), json.loads((run_dir / "manifest.json").read_text()), run_dir


def job_text(step, recipe, setting: dict, filename: Path, size: str) -> str:
    options = {**{k: v for k, v in recipe.fio.items() if k != "ioengine"}, **step.options, **setting,
               "filename": str(filename), "size": size, "group_reporting": 1}
    return f"[{step.id}]\n" + "".join(f"{k}={v}\n" for k, v in options.items())


def own_job(run_dir: Path, step, filename: Path) -> str:
    """iolab's job file for ``step`` as the run wrote it, on the benchmark's file (the run removed its own)."""
    text = (run_dir / "jobs" / f"{step.id}.fio").read_text()
    return re.sub(r"^filename=.*$", f"filename={filename}", text, flags=re.M)


def laid_out(target: Path, args) -> Path:
    """The plain runs' file, laid out once with real data, as iolab lays its file out."""
    data = target / "plain-ceiling.dat"
    if not data.exists():
        lay = target / "layout.fio"
        lay.write_text(f"[layout]\nfilename={data}\nsize={fio_size(parse_size(args.size))}\nrw=write\nbs=1m\n"
                       "ioengine=psync\nend_fsync=1\n")
        subprocess.run(["fio", "--output-format=json", str(lay)], capture_output=True, check=True)
    return data


def one_pass(text: str, target: Path, confined: bool) -> float | None:
    """MB/s of one plain fio pass of job ``text`` (None: fio failed, said why)."""
    job = target / "plain.fio"
    job.write_text(text)
    argv = ["fio", "--output-format=json", str(job)]
    if confined:
        # as iolab confines it: a job that registers buffers keeps CAP_IPC_LOCK (root; runner's _confine)
        pins = os.geteuid() == 0 and re.search(r"^fixedbufs=1$", text, re.M) is not None
        argv = Confinement(writable=(str(target),), lock_memory=pins).wrap(argv)
    out = subprocess.run(argv, capture_output=True, text=True, cwd="/")
    if out.returncode != 0:
        print(f"  (plain fio failed: {out.stderr.strip()[:200]})")
        return None
    return float(parse_output(out.stdout)["bw_mbps"].sum())


def keeps_the_queue(setting: dict, iodepth: int) -> bool:
    """Whether a setting measures a row at its queue depth on a RAM target: a synchronous engine (psync, pvsync2)
    does one I/O at a time, and so does libaio on tmpfs (io_submit does each I/O before it returns: iolab's flag
    engine_sync), so on a Q8/Q32 row they measure Q1, another row. They still run, and their best is printed
    beside (``sync best``): on a RAM target, with no device latency to overlap, one system call per I/O is fast."""
    return iodepth <= 1 or setting["ioengine"] not in ("psync", "pvsync2", "libaio")


def plain_passes(variants: dict, target: Path, rounds: int) -> dict:
    """``{label: [MB/s of each pass]}``: ``rounds`` rounds, each through every variant ``{label: (job, confined)}``."""
    found = {label: [] for label in variants}
    for _ in range(rounds):
        for label, (text, confined) in variants.items():
            mbps = one_pass(text, target, confined)
            if mbps is not None:
                found[label].append(mbps)
    return found


def row_figures(mine, passes: dict, iodepth: int) -> dict:
    """One printed row: iolab's best and median, the controls', the best hand-tuned setting's that keeps the row's
    queue depth (:func:`keeps_the_queue`), the ratios, and the best of the settings that do not."""
    def best(label: str) -> float:
        return max(passes[label], default=float("nan"))

    def median(label: str) -> float:
        return statistics.median(passes[label]) if passes[label] else float("nan")

    tuned = max((label for label, setting in SETTINGS if passes.get(label) and keeps_the_queue(setting, iodepth)),
                key=median)
    one_at_a_time = [label for label, setting in SETTINGS if passes.get(label) and not keeps_the_queue(setting, iodepth)]
    sync = max(one_at_a_time, key=median) if one_at_a_time else None
    return {"iolab best": mine["iolab_mbps"], "iolab median": mine["iolab_median"], "engine": mine["ioengine"],
            "sync": "yes" if "engine_sync" in mine["flags"] else "no",
            "own best": best(OWN), "confined best": best(OWN_CONFINED),
            "best setting": tuned, "its best": best(tuned), "its median": median(tuned),
            "iolab/own": mine["iolab_mbps"] / best(OWN), "own/best": best(OWN) / best(tuned),
            "ratio": mine["iolab_mbps"] / best(tuned), "median ratio": mine["iolab_median"] / median(tuned),
            "sync best": f"{sync} {best(sync):.1f}" if sync else "-"}


def one_preset(preset: str, target: Path, data_dir: Path, args) -> pd.DataFrame:
    recipe = recipes.load("crystaldiskmark").with_overrides(preset=preset, size=args.size, runtime=args.runtime)
    rows, manifest, run_dir = through_iolab(target, preset, args, data_dir)
    choice = manifest.get("ioengine") or {}
    why = (choice.get("fallback") or {}).get("reason")
    print(f"\npreset {preset}: iolab ran {choice.get('chosen')}" + (f" (io_uring not used: {why})" if why else ""),
          flush=True)
    data, size, printed = laid_out(target, args), fio_size(parse_size(args.size)), []
    for step in recipe.steps():
        mine = rows[(rows["test"] == step.test) & (rows["direction"] == step.rw.replace("rand", ""))]
        if mine.empty:
            continue
        variants = {label: (job_text(step, recipe, setting, data, size), False) for label, setting in SETTINGS
                    if not args.settings or label in args.settings.split(",")}
        variants[OWN] = (own_job(run_dir, step, data), False)
        variants[OWN_CONFINED] = (variants[OWN][0], True)
        depth = int(step.options.get("iodepth", 1))
        figures = {"row": step.id, **row_figures(mine.iloc[0], plain_passes(variants, target, args.rounds), depth)}
        printed.append(figures)
        print("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()),
              flush=True)
    return pd.DataFrame(printed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", help="a directory on tmpfs (default, as root: a tmpfs mounted for the run)")
    parser.add_argument("--presets", default="default,peak", help="crystaldiskmark presets (default: default,peak)")
    parser.add_argument("--tests", help="only these rows (comma-separated, e.g. RND4K-Q32T1)")
    parser.add_argument("--settings", help="only these plain settings (comma-separated labels, e.g. "
                        "'io_uring,io_uring registerfiles'; the two controls always run)")
    parser.add_argument("--size", default="256M", help="test file size (default 256M)")
    parser.add_argument("--runtime", type=int, default=2, help="seconds per pass (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="passes per row and setting (iolab's too)")
    args = parser.parse_args()
    # a kill ends the benchmark as Ctrl-C does: the running fio is killed and the tmpfs it mounted is unmounted
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    below = 0
    with ram_target(args.target, parse_size(args.size)) as target, tempfile.TemporaryDirectory() as data:
        for preset in args.presets.split(","):
            table = one_preset(preset, target, Path(data), args)
            below += int((table["ratio"] < GOAL).sum()) if not table.empty else 0
            if not table.empty:
                with pd.option_context("display.width", 250, "display.max_columns", 30):
                    print(table.round(3).to_string(index=False))
    print(f"\nrows below {GOAL}: {below}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
