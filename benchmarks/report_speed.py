"""How long the comparison article takes for many servers (goal: under 60 s for 100).

Writes N servers x one crystaldiskmark run each (5 repetitions, synthetic but
plausible numbers, iolab.engine.store.Run like the engine) into a temporary result
store, then times the phases of a real render of notebooks/compare.ipynb:
reading the runs, papermill execution, HTML and Markdown export.

    .venv/bin/python benchmarks/report_speed.py            # 100 servers
    .venv/bin/python benchmarks/report_speed.py --servers 20 --keep /tmp/speed

Exit status 1 when the render takes longer than --goal seconds.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iolab.report import notebooks as report  # noqa: E402
from iolab.engine.store import Run  # noqa: E402

MiB = 1024 * 1024
TESTS = [("SEQ1M-Q8T1", MiB, 8), ("SEQ1M-Q1T1", MiB, 1), ("RND4K-Q32T1", 4096, 32), ("RND4K-Q1T1", 4096, 1)]
#: (read, write) MB/s of a few device classes; servers are drawn around them
CLASSES = {
    "HDD": {"SEQ1M-Q8T1": (180, 170), "SEQ1M-Q1T1": (170, 165), "RND4K-Q32T1": (1.2, 1.1), "RND4K-Q1T1": (0.5, 0.9)},
    "SATA SSD": {"SEQ1M-Q8T1": (550, 510), "SEQ1M-Q1T1": (380, 350), "RND4K-Q32T1": (300, 250), "RND4K-Q1T1": (45, 110)},
    "NVMe": {"SEQ1M-Q8T1": (3500, 3000), "SEQ1M-Q1T1": (2100, 2500), "RND4K-Q32T1": (650, 550), "RND4K-Q1T1": (70, 250)},
}


def make_store(root: Path, servers: int, repeat: int = 5, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(servers):
        kind = list(CLASSES)[i % len(CLASSES)]
        host = f"srv{i:03d}"
        scale = rng.uniform(0.8, 1.2)
        run = Run.create(root, recipe="crystaldiskmark", label=f"{host} ({kind})", host=host,
                         recipe_description="CrystalDiskMark 8 default profile, 1 GiB, best of 5",
                         tool="CrystalDiskMark 8",
                         system={"hostname": host, "kernel": "6.1.0-27-amd64", "os": "Debian GNU/Linux 12 (bookworm)",
                                 "cpu_model": "AMD EPYC 7313P 16-Core Processor", "cpu_count": 32,
                                 "ram_bytes": 128 * 1024**3},
                         versions={"iolab": "0.1.0", "fio": "fio-3.33", "python": "3.11.2"},
                         options={"size": 1024 * MiB, "runtime": 5.0, "repeat": repeat, "mem_limit": 512 * MiB},
                         targets=[{"spec": "/srv/bench", "kind": "dir", "path": "/srv/bench", "filesystem": "ext4",
                                   "mount_options": "rw,relatime",
                                   "device": {"model": f"{kind} model", "rotational": kind == "HDD",
                                              "scheduler": "none"}, "emulated": None}],
                         isolation={"mode": "direct", "requested": "direct", "fallback": None})
        run.write("recipe.yaml", "name: crystaldiskmark\nstatistic: best\n")
        rows = []
        for test, bs, qd in TESTS:
            for d, direction in enumerate(("read", "write")):
                for rep in range(1, repeat + 1):
                    bw = CLASSES[kind][test][d] * scale * (1 + rng.gauss(0, 0.015))
                    iops = bw * 1e6 / bs
                    lat = qd / iops * 1e6
                    rows.append({"run_id": run.run_id, "host": host, "label": run.manifest["label"],
                                 "recipe": "crystaldiskmark", "test": test, "rep": rep, "direction": direction,
                                 "bs": bs, "iodepth": qd, "numjobs": 1, "bw_mbps": bw, "iops": iops,
                                 "lat_mean_us": lat, "lat_p50_us": lat * 0.95, "lat_p99_us": lat * 2.5,
                                 "lat_p999_us": lat * 4, "lat_max_us": lat * 10, "cpu_usr_pct": 2.0,
                                 "cpu_sys_pct": 6.0, "io_bytes": int(bw * 5e6), "runtime_s": 5.0,
                                 "isolation": "direct", "error": None, "target": "bench", "tool": "fio",
                                 "job": f"{test}-{direction}", "valid": True, "flags": None})
        run.add_results(pd.DataFrame(rows))
        run.finish("completed")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--lang", default="en")
    parser.add_argument("--goal", type=float, default=60.0, help="seconds the render may take (default 60)")
    parser.add_argument("--keep", metavar="DIR", help="write the store and the report here and keep them")
    args = parser.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="iolab-speed-"))
    try:
        t0 = time.perf_counter()
        make_store(root / "data", args.servers)
        t1 = time.perf_counter()
        sel = report.select(root / "data", with_results=True)
        t2 = time.perf_counter()
        files = report.report(data=root / "data", notebook="compare", lang=args.lang, out=root / "report")
        t3 = time.perf_counter()
        render = t3 - t2
        print(f"servers:            {args.servers} ({len(sel.results)} result rows)")
        print(f"write the store:    {t1 - t0:6.1f} s")
        print(f"read the runs:      {t2 - t1:6.1f} s")
        print(f"render the article: {render:6.1f} s (papermill + HTML + Markdown; goal < {args.goal:.0f} s)")
        print(f"HTML size:          {files.html.stat().st_size / 1e6:6.1f} MB")
        print(files.html)
        return 0 if render < args.goal else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
