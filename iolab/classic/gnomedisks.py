"""The ``gnomedisks`` engine: GNOME Disks' benchmark (gdu-benchmark-dialog.c), sample by sample.

``read-rate``
    ``samples`` (100) positions spread evenly over the device, ``n * size /
    samples`` rounded down to a page; at each an untimed 4 KiB read, then one
    timed ``read()`` of ``sample_size`` (10 MiB): MB/s at that position.
``write-rate`` (only with ``write: true`` in the recipe's options)
    at the same positions, after each read: the bytes just read are written
    back in place and ``fsync``'d, timed (GNOME Disks' non-destructive
    rewrite). On a block device the safety rules apply first
    (:func:`iolab.devices.safety.check_writable`) and the device is opened ``O_EXCL``.
``access-time``
    ``access_samples`` (1000) page reads at uniformly random page-aligned
    offsets from GLib's generator seeded with 42 (reproduced exactly,
    :func:`iolab.engine.directio.glib_rand`), each timed; the first is dropped, as
    GNOME Disks does (its row is kept with ``valid = False``).

All reads and writes are ``O_DIRECT | O_SYNC`` (udisks' OpenForBenchmark) by
a Python loop (:mod:`iolab.engine.directio`) inside the sandbox: one sample is one
system call, which fio can only approximate with one job per sample. Rows are
tidy, one per sample: ``position`` (0..1 of the device or test file),
``offset``, ``bw_mbps`` for the rates, ``access_ms`` for access times.
:func:`summary` gives GNOME Disks' figures (average / min / max rate, average
access time) and the curve analysis of :mod:`iolab.analysis.curves`; the run's
manifest holds it under ``gnome_disks``.

A block device or ``emulated:NAME`` target is sampled itself (read-only by
default; a fresh emulated device is filled first so reads do not hit holes);
a directory target samples the test file iolab writes first (``--size``); a
file target samples that file.
"""
from __future__ import annotations

import logging

import pandas as pd

from iolab.analysis import curves
from iolab.core import files
from iolab.core.errors import IolabError
from iolab.classic.originals import ClassicEngine, Option

log = logging.getLogger(__name__)

PAGE = 4096
TESTS = {"read-rate": "transfer rate, read (one timed read per position)",
         "access-time": "access time (random page reads, seed 42)"}
WRITE_TEST = "write-rate"


class Engine(ClassicEngine):
    OPTIONS = {
        "samples": Option(100, "int", 2, "positions sampled for the transfer rate (num-samples)"),
        "sample_size": Option("10M", "size", PAGE, "bytes read (and written) per position (sample-size-mib)"),
        "access_samples": Option(1000, "int", 2, "random reads for the access time (num-access-samples)"),
        "seed": Option(42, "int", 0, "seed of the access-time offsets (GNOME Disks uses 42)"),
        "write": Option(False, "bool", None, "also time the non-destructive rewrite (do-write)"),
    }
    TESTS = TESTS
    BUFFERED = False

    def __init__(self, recipe, targets, run_, **kwargs):
        super().__init__(recipe, targets, run_, **kwargs)
        source = recipe.source or recipe.name
        if self.options["sample_size"] % PAGE:
            raise IolabError(f"must be a multiple of {PAGE} bytes (O_DIRECT)", context=f"{source}: options.sample_size")
        if self.options["write"] and "read-rate" not in self.steps:
            raise IolabError("the write test writes back what read-rate just read: keep the read-rate test",
                             context=f"{source}: options.write")

    def check_before_open(self) -> None:
        if self.options["write"]:
            from iolab.devices.safety import check_writable
            for target in self.targets:
                if target.kind == "block":
                    check_writable(target.path, confirm=target.confirm)  # --confirm; refuses mounted, held, swap, root, signatures

    def prepare(self) -> None:
        for target in self.targets:
            if target.kind == "emulated" and target.test_file is None:
                self.layout(target, None)
            elif target.created_file:
                self.layout(target, self.recipe.size)
            if self.options["write"] and target.kind == "emulated" and target.test_file is None:
                from iolab.devices.safety import check_writable
                check_writable(target.filename)
            size = files.size_of(target.filename)
            if size < self.options["sample_size"]:
                raise IolabError(f"smaller ({size} bytes) than one sample ({self.options['sample_size']} bytes)",
                                 context=f"--target {target.spec}")

    def measure(self) -> None:
        # one worker times both rates (GNOME Disks writes back each sample right after reading it)
        rates = ["read-rate"] + ([WRITE_TEST] if self.options["write"] else []) if "read-rate" in self.steps else []
        for rep in self.passes():
            for target in self.targets:
                if rates:
                    for name in rates:
                        self.started(name, rw="write" if name == WRITE_TEST else "read")
                    frame = self.add(self.transfer(target, rep))
                    for name in rates:
                        self.finished(name, rep, frame)
                if "access-time" in self.steps:
                    self.started("access-time")
                    self.finished("access-time", rep, self.add(self.access(target, rep)))
        self.summarize()

    def transfer(self, target, rep: int) -> pd.DataFrame:
        step = self.step("read-rate", direct=1, bs=self.options["sample_size"])
        spec = {"path": target.filename, "samples": self.options["samples"],
                "sample_size": self.options["sample_size"], "write": self.options["write"], "sync": True}

        def convert(result: dict) -> list[dict]:
            size, rows = result["size"], []
            for sample in result["samples"]:
                base = {"sample": sample["n"], "offset": sample["offset"], "position": sample["offset"] / size,
                        "bs": result["sample_size"], "iodepth": 1, "numjobs": 1, "thp_bytes": result["thp_bytes"]}
                rows.append({**base, "test": "read-rate", "direction": "read", **_rate(sample["read_bytes"],
                                                                                       sample["read_s"])})
                if "write_s" in sample:
                    rows.append({**base, "test": WRITE_TEST, "direction": "write",
                                 **_rate(sample["write_bytes"], sample["write_s"])})
            return rows

        return self.python_step(step, target, rep, "gnome-transfer", spec, convert)

    def access(self, target, rep: int) -> pd.DataFrame:
        step = self.step("access-time", direct=1, bs=PAGE)
        spec = {"path": target.filename, "samples": self.options["access_samples"], "seed": self.options["seed"],
                "sync": True}

        def convert(result: dict) -> list[dict]:
            size = result["size"]
            return [{"test": "access-time", "direction": "read", "sample": s["n"], "offset": s["offset"],
                     "position": s["offset"] / size, "bs": PAGE, "iodepth": 1, "numjobs": 1,
                     "access_ms": s["seconds"] * 1e3, "lat_mean_us": s["seconds"] * 1e6,
                     "lat_max_us": s["seconds"] * 1e6, "io_bytes": s["bytes"], "runtime_s": s["seconds"],
                     "iops": 1 / s["seconds"] if s["seconds"] > 0 else None} for s in result["samples"]]

        frame = self.python_step(step, target, rep, "gnome-access", spec, convert)
        if "sample" in frame and len(frame):
            first = frame["sample"] == 0  # GNOME Disks drops the first sample
            frame.loc[first, "valid"] = False
            frame.loc[first, "flags"] = [";".join(filter(None, [f, "first_sample_dropped"]))
                                         for f in frame.loc[first, "flags"].fillna("")]
        return frame

    def summarize(self) -> None:
        table = self.run.results
        if table.empty:
            return
        self.run.update(gnome_disks=summary(table).to_dict(orient="records"))

    def flag(self) -> None:
        """Samples are single reads by design: no too-short or variance flags, only the engine's own."""
        table = self.run.results
        if not table.empty:
            table["flags"] = table["flags"].replace("", None)
            self.run.set_results(table)


def _rate(nbytes: int, seconds: float) -> dict:
    return {"io_bytes": nbytes, "runtime_s": seconds, "bw_mbps": nbytes / seconds / 1e6 if seconds > 0 else None,
            "lat_mean_us": seconds * 1e6, "lat_max_us": seconds * 1e6}


def summary(results: pd.DataFrame, *, by=("run_id", "target", "rep")) -> pd.DataFrame:
    """GNOME Disks' figures per run, target and pass, with the curve analysis.

    One row per group and test: ``n``; for ``read-rate``/``write-rate`` the
    average, minimum and maximum of the samples' MB/s (GNOME Disks' "Average
    Read Rate" is the mean of the samples), ``overall_mbps`` = all bytes / all
    seconds (the time-weighted rate, robust to a few very fast samples) and
    :func:`iolab.analysis.curves.position_profile`'s decline, slope and flatness; for
    ``access-time`` the average access time in ms over the valid samples
    (GNOME Disks' "Average Access Time", first sample dropped) and
    :func:`iolab.analysis.curves.access_time_summary`'s median, p95 and seek
    correlation.
    """
    from iolab.analysis.stats import valid_rows
    by = [c for c in by if c in results.columns]
    keys = by + ["test"]
    out = []
    rates = results[results["test"].isin(["read-rate", WRITE_TEST])]
    if not rates.empty:
        profile = curves.position_profile(rates, by=keys).rename(
            columns={"avg": "avg_mbps", "min": "min_mbps", "max": "max_mbps"})
        usable = rates[valid_rows(rates)]
        totals = usable.groupby(keys, dropna=False)[["io_bytes", "runtime_s"]].sum().reset_index()
        totals["overall_mbps"] = totals["io_bytes"] / totals["runtime_s"] / 1e6
        out.append(profile.merge(totals[keys + ["overall_mbps"]], on=keys, how="left"))
    access = results[results["test"] == "access-time"]
    if not access.empty:
        times = curves.access_time_summary(access, by=keys)
        out.append(times.rename(columns={"mean_ms": "avg_access_ms"}))
    if not out:
        return pd.DataFrame(columns=keys + ["n"])
    return pd.concat(out, ignore_index=True, sort=False)
