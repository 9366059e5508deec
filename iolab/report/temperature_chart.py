"""Each run's drive temperature over the run: a chart per run that sampled it, for the compare report.

The samples come from :func:`iolab.analysis.drivehealth.temperature_series` (the run's
``raw/<test>-<rep>.temp.csv``, once a second while each test ran), placed on the run's clock by
:func:`~iolab.analysis.drivehealth.run_timeline`; the warning temperature each drive reported before the
run stored (:func:`~iolab.analysis.drivehealth.warning_thresholds`: the drive record's ``temperature_limits``,
from nvme-cli, smartctl or hwmon; for older runs the health snapshot before it) is a dashed line, its critical
temperature is said in the caption, and the tests whose rows
carry the ``thermal`` flag (the drive passed that threshold or reported throttling) are shaded and named
in the caption. Drawing only: the numbers are computed in ``iolab.analysis``.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from iolab.analysis.drivehealth import run_timeline, temperature_series, warning_thresholds
from iolab.analysis.stats import split_flags
from iolab.core import optional
from iolab.report import i18n
from iolab.report.drivehealth_table import run_names
from iolab.report.sections.common import Figure, Section

_t = i18n.scoped("drive_temperature")

THERMAL_FLAG = "thermal"  # iolab.engine.devicewatch.THERMAL_FLAG (the report layer does not import the engine)
COMPOSITE = "composite"   # the drive's own temperature (iolab.devices.thermal.COMPOSITE)


def thermal_tests(results: pd.DataFrame | None, run_id) -> list[tuple[str, int]]:
    """The (test, rep) of ``run_id`` whose rows carry the ``thermal`` flag."""
    if results is None or results.empty or "flags" not in results.columns:
        return []
    rows = results[results["run_id"].astype(str).eq(str(run_id))]
    flagged = rows[rows["flags"].map(lambda v: THERMAL_FLAG in split_flags(v))]
    return list(dict.fromkeys((str(t), int(r)) for t, r in zip(flagged["test"], flagged["rep"].fillna(1))))


def _sensor_label(device: str, sensor: str, devices: int, lang: str) -> str:
    name = _t("composite", lang) if sensor == COMPOSITE else sensor
    return f"{device} {name}" if devices > 1 else name


def _draw(timeline: pd.DataFrame, thresholds: dict, thermal: list, lang: str):
    fig, ax = optional.pyplot().subplots(figsize=(7.2, 3.6))
    devices = timeline["device"].nunique()
    for (device, sensor), part in timeline.groupby(["device", "sensor"], sort=False):
        color = None
        for _, test in part.groupby(["step", "rep"], sort=False):  # a line per test: none across the pauses
            (line,) = ax.plot(test["run_s"], test["temperature_c"], marker=".", markersize=3, color=color,
                              linewidth=2.0 if sensor == COMPOSITE else 1.0,
                              linestyle="-" if sensor == COMPOSITE else ":",
                              label=None if color else _sensor_label(device, sensor, devices, lang))
            color = line.get_color()
    for device, degrees in thresholds.items():
        if device in set(timeline["device"]):
            ax.axhline(degrees, color="tab:red", linestyle="--", linewidth=1,
                       label=_t("warning", lang, device=device if devices > 1 else "",
                                degrees=_degree(degrees)).strip())
    shaded = False
    for (step, rep), part in timeline.groupby(["step", "rep"], sort=False):
        start, end = float(part["run_s"].min()), float(part["run_s"].max())
        if (str(step), int(rep)) in thermal:
            ax.axvspan(start, end, color="tab:red", alpha=0.15, label=None if shaded else _t("thermal_span", lang))
            shaded = True
        ax.axvline(start, color="0.6", linewidth=0.6)
        ax.annotate(str(step), (start, 1.0), xycoords=("data", "axes fraction"), fontsize=7, rotation=90,
                    va="top", ha="right", color="0.35")
    ax.set_xlabel(_t("x", lang))
    ax.set_ylabel(_t("y", lang))
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def _degree(value: float) -> str:
    """A limit as stated, to a tenth of a degree where it is not whole (hwmon's 69.85 °C reads 69.9)."""
    return i18n.number(value, digits=0 if float(value).is_integer() else 1)


def _degrees(limits: dict, lang: str) -> str:
    return i18n.join([_degree(v) for v in dict.fromkeys(limits.values())], lang)


def run_figure(manifest: dict, results: pd.DataFrame | None, *, name: str, lang: str = "en") -> Figure | None:
    """The chart of one run (None when it sampled no temperature or its directory is not known)."""
    run_dir = manifest.get("run_dir")
    series = temperature_series(run_dir) if run_dir else None
    if series is None or series.empty:
        return None
    timeline = run_timeline(series)
    thresholds = warning_thresholds(manifest)
    thermal = thermal_tests(results, manifest.get("run_id"))
    fig = _draw(timeline, thresholds, thermal, lang)
    composite = timeline[timeline["sensor"].eq(COMPOSITE)]["temperature_c"]
    hottest = float(composite.max() if not composite.empty else timeline["temperature_c"].max())
    said = [_t("caption", lang, system=name, recipe=manifest.get("recipe") or "?",
               hottest=i18n.number(hottest, digits=0 if hottest.is_integer() else 1))]
    if thresholds:
        said.append(_t("caption_warning", lang, degrees=_degrees(thresholds, lang)))
    critical = {d: v for d, v in warning_thresholds(manifest, "critical").items() if d in set(timeline["device"])}
    if critical:
        said.append(_t("caption_critical", lang, degrees=_degrees(critical, lang)))
    tests = [i18n.test_label(test, None, lang) for test, _ in thermal]
    said.append(_t("caption_thermal", lang, tests=i18n.join(tests, lang)) if tests
                else _t("caption_no_thermal", lang))
    return Figure(fig, alt=_t("alt", lang, system=name), caption=i18n.join_sentences(said, lang))


def temperature_section(manifests: pd.DataFrame | Sequence[dict], results: pd.DataFrame | None = None, *,
                        names: Sequence[str] | None = None, lang: str = "en") -> Section | None:
    """A chart per run that sampled its drives' temperature; None when none did."""
    i18n.check_lang(lang)
    records = manifests.to_dict("records") if isinstance(manifests, pd.DataFrame) else list(manifests)
    shown = [run_figure(m, results, name=n, lang=lang) for m, n in zip(records, run_names(records, names))]
    shown = [f for f in shown if f is not None]
    if not shown:
        return None
    return Section(kind="temperature", title=_t("heading", lang), lang=lang, intro=_t("intro", lang), figures=shown)
