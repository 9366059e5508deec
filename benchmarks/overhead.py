"""Does iolab measure what plain fio measures? And is iolab.load() fast?

1. The same job file, run alternately with plain ``fio`` and through
   ``iolab run JOBFILE.fio``, several times on the same target; prints the
   ratio iolab/plain of the median IOPS and MB/s (goal: 0.97-1.03).
2. ``iolab.load()`` over 1,000 generated run directories (goal: a few seconds).

Usage: .venv/bin/python benchmarks/overhead.py [--target DIR] [--rounds N] [--runtime S]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import iolab  # noqa: E402
from iolab.engine.fio import parse_output  # noqa: E402
from iolab.engine.store import Run  # noqa: E402

JOB = """[global]
ioengine=libaio
direct=1
size=256m
time_based
runtime={runtime}
filename={filename}
[randread-q32]
rw=randread
bs=4k
iodepth=32
"""


def plain(jobfile: Path) -> pd.Series:
    out = subprocess.run(["fio", "--output-format=json", str(jobfile)], capture_output=True, text=True, check=True)
    return parse_output(out.stdout).iloc[0]


def through_iolab(jobfile: Path, data: Path) -> pd.Series:
    out = subprocess.run([sys.executable, "-m", "iolab", "run", str(jobfile), "--target", str(jobfile.parent),
                          "--data", str(data), "--no-progress"], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"iolab run failed: {out.stderr}")
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    return iolab.load(run_dir).iloc[0]


def overhead(target: Path, rounds: int, runtime: int) -> None:
    with tempfile.TemporaryDirectory(dir=target) as work:
        work = Path(work)
        jobfile = work / "bench.fio"
        jobfile.write_text(JOB.format(runtime=runtime, filename=work / "bench.dat"))
        data = work / "data"
        plain(jobfile)  # lay the file out once so neither side pays for it
        fio_rows, iolab_rows = [], []
        for i in range(rounds):
            # alternate which one goes first, so drift hits both alike
            order = (plain, through_iolab) if i % 2 == 0 else (through_iolab, plain)
            for func in order:
                row = func(jobfile) if func is plain else func(jobfile, data)
                (fio_rows if func is plain else iolab_rows).append(row)
        for metric in ("iops", "bw_mbps"):
            a = statistics.median(r[metric] for r in iolab_rows)
            b = statistics.median(r[metric] for r in fio_rows)
            print(f"{metric:8s} iolab median {a:12.1f}   plain fio median {b:12.1f}   ratio iolab/plain {a / b:.3f}")


def load_speed(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cols = dict(recipe="crystaldiskmark", rep=1, bs=4096, iodepth=32, numjobs=1, bw_mbps=123.4, iops=30000.0,
                    lat_mean_us=100.0, lat_p50_us=90.0, lat_p99_us=400.0, lat_p999_us=900.0, lat_max_us=2000.0,
                    cpu_usr_pct=5.0, cpu_sys_pct=20.0, io_bytes=10**9, runtime_s=5.0, isolation="direct", error=None)
        for i in range(n):
            run = Run.create(tmp, recipe="crystaldiskmark", host=f"server{i % 100:03d}")
            run.add_results(pd.DataFrame([{**cols, "run_id": run.run_id, "host": run.manifest["host"],
                                           "label": run.manifest["host"], "test": t, "direction": d}
                                          for t in ("SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1")
                                          for d in ("read", "write")]))
            run.finish("completed")
        started = time.perf_counter()
        table = iolab.load(tmp)
        elapsed = time.perf_counter() - started
        print(f"iolab.load over {n} run directories: {len(table)} rows in {elapsed:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default=tempfile.gettempdir(), type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runtime", type=int, default=5)
    parser.add_argument("--runs", type=int, default=1000, help="run directories for the load() timing")
    args = parser.parse_args()
    overhead(args.target, args.rounds, args.runtime)
    load_speed(args.runs)


if __name__ == "__main__":
    main()
