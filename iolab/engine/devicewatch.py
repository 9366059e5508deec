"""The drives under a run's targets: their health before and after the run, their temperature
during each test.

The engine opens :func:`watching` once its targets are open; it writes each
target's ``health_before`` into the manifest (one snapshot per disk under the
target, :func:`iolab.devices.health.snapshot`) and ``health_after`` on the way
out, also after a failure or Ctrl-C. Around each test :meth:`DeviceWatch.test`
samples the temperature each second (:mod:`iolab.devices.thermal`) into
``raw/<test>-<rep>.temp.csv`` beside fio's output; :meth:`TestTemperature.annotate`
puts the maximum in the row (``temp_max_c``) and the ``thermal`` flag where the
drive passed its warning threshold or reported throttling. A disk no tool can
read (a loop or virtio device) costs nothing per test: no sampler, no snapshots.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

import pandas as pd

from iolab.devices import health, thermal

log = logging.getLogger(__name__)

THERMAL_FLAG = "thermal"


@dataclasses.dataclass
class TestTemperature:
    """One test's temperature: the highest sample (None without a sensor) and why it counts as thermal."""

    maximum_c: float | None = None
    thermal: str | None = None

    def annotate(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame["temp_max_c"] = float("nan") if self.maximum_c is None else float(self.maximum_c)
        if self.thermal:
            flags = frame["flags"] if "flags" in frame else pd.Series(None, index=frame.index, dtype=object)
            frame["flags"] = [";".join(filter(None, [f, THERMAL_FLAG])) if isinstance(f, str) else THERMAL_FLAG
                              for f in flags]
        return frame


class DeviceWatch:
    """The disks of each target (by target name), their temperature sources, and which a tool can read."""

    def __init__(self, run, targets):
        self.run = run
        self.disks = {t.name: health.disks_of(t.path or t.filename) if (t.path or t.filename) else []
                      for t in targets}
        self.sources: dict[str, list] = {}
        self.readable: dict[str, list[str]] = {}  # devices with health counters (worth a snapshot per test)
        self.thresholds: dict[str, dict] = {}  # device -> its warning/critical temperature (full snapshot only)

    def _record(self, name: str, **fields) -> None:
        for entry in self.run.manifest.get("targets") or []:
            if entry.get("name") == name:
                entry.update(fields)
        self.run.save_manifest()

    def before(self) -> None:
        for name, disks in self.disks.items():
            snapshots = [health.snapshot(disk) for disk in disks]
            for snap in snapshots:
                self.thresholds[snap["device"]] = {k: snap[k] for k in ("warning_temp_c", "critical_temp_c") if k in snap}
            self.readable[name] = [s["device"] for s in snapshots if any(k not in ("device", "at", "sources")
                                                                        for k in s)]
            found, missing = thermal.sources(disks)
            self.sources[name] = found
            temperature = {**{s.device: s.how for s in found}, **missing}
            self._record(name, health_before=snapshots, temperature_sources=temperature)

    def after(self) -> None:
        for name, disks in self.disks.items():
            self._record(name, health_after=[health.snapshot(disk) for disk in disks])

    @contextlib.contextmanager
    def test(self, target, raw: Path):
        """Sample ``target``'s disks while the block runs (the series in ``raw`` with ``.temp.csv``)."""
        result = TestTemperature()
        found = self.sources.get(target.name) or []
        readable = self.readable.get(target.name) or []
        if not found and not readable:
            yield result
            return
        before = {device: {**self.thresholds.get(device, {}), **snap}
                  for device, snap in thermal.snapshots(readable).items()}
        sampler = thermal.Sampler(found, Path(raw).with_suffix(".temp.csv"))
        try:
            with sampler:
                yield result
        finally:
            result.maximum_c = sampler.maximum
            result.thermal = thermal.verdict(sampler, before, thermal.snapshots(readable))
            if result.thermal:
                log.warning("thermal: %s", result.thermal)


@contextlib.contextmanager
def watching(run, targets):
    """A :class:`DeviceWatch` with ``health_before`` recorded; ``health_after`` on the way out, whatever happens."""
    watch = DeviceWatch(run, targets)
    watch.before()
    try:
        yield watch
    finally:
        watch.after()


class NoWatch:
    """For engines that open no :func:`watching`: every test unwatched."""

    @contextlib.contextmanager
    def test(self, target, raw):
        yield TestTemperature()
