"""The over-time chart of runs made with ``--log-interval``: MB/s over seconds, one chart per test.

The series are fio's bandwidth logs kept in each run's ``raw/`` (read by
:func:`iolab.engine.timelogs.bandwidth_series`: each sample the mean over the interval, the jobs of a
pass summed); here they are matched to the report's systems and drawn, one line per system and pass.
A run without logs adds nothing: the chart is optional.
"""
from __future__ import annotations

import logging

import pandas as pd

from iolab.engine import store, timelogs
from iolab.core import optional
from iolab.report import i18n, palette
from iolab.report.sections.common import Figure

log = logging.getLogger(__name__)

_t = i18n.scoped("overtime")


def series(results: pd.DataFrame) -> pd.DataFrame:
    """The logged MB/s of the runs behind ``results`` (rows with ``run_dir``, ``system``, ``target``):
    columns system, test, direction, rep, t_s, mbps (read and write of a pass summed per sample)."""
    columns = ["system", "test", "direction", "rep", "t_s", "mbps"]
    if results.empty or "run_dir" not in results.columns:
        return pd.DataFrame(columns=columns)
    frames = []
    for run_dir, rows in results.groupby("run_dir", sort=False):
        found = timelogs.bandwidth_series(run_dir)
        if found.empty:
            continue
        try:
            steps = {t.get("name"): t for t in store.read_manifest(run_dir).get("tests") or [] if isinstance(t, dict)}
        except Exception as exc:  # noqa: BLE001 - a damaged manifest: no chart for that run, the report goes on
            log.warning("no over-time chart for %s: %s", run_dir, exc)
            continue
        systems = _systems(rows)
        for (target, step), part in found.groupby(["target", "step"], dropna=False, sort=False):
            system = systems.get(None if pd.isna(target) else target) or next(iter(systems.values()))
            entry = steps.get(step, {})
            total = part.groupby(["rep", "sample"], as_index=False).agg(t_s=("t_s", "mean"), mbps=("mbps", "sum"))
            frames.append(total.assign(system=system, test=entry.get("test", step), direction=_direction(entry, part)))
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _systems(rows: pd.DataFrame) -> dict:
    """target name (None: the run's only target) -> the report's system name."""
    named = {}
    for _, row in rows.drop_duplicates(subset=[c for c in ("target", "system") if c in rows.columns]).iterrows():
        named.setdefault(row.get("target"), str(row["system"]))
        named.setdefault(None, str(row["system"]))
    return named


def _direction(entry: dict, part: pd.DataFrame) -> str | None:
    """The direction the results give the step's test (its rw mode's), else the log's one direction."""
    directions = sorted(set(part["direction"].dropna()))
    return directions[0] if len(directions) == 1 else entry.get("rw")


def figures(results: pd.DataFrame, *, lang: str = "en") -> list[Figure]:
    """One chart per test (and direction) that has logs: MB/s over seconds, a line per system and pass."""
    i18n.check_lang(lang)
    data = series(results)
    drawn = []
    for (test, direction), part in data.groupby(["test", "direction"], dropna=False, sort=False):
        name = i18n.test_label(str(test), None if pd.isna(direction) else str(direction), lang)
        fig, ax = optional.pyplot().subplots(figsize=(7.2, 3.4))
        several = part.groupby("system")["rep"].nunique().max() > 1
        styles = ("-", "--", ":", "-.")
        for (system, rep), line in part.groupby(["system", "rep"], sort=False):
            line = line.sort_values("t_s")
            # a system in its colour of every other chart; its passes told apart by the line's style
            passes = list(dict.fromkeys(part.loc[part["system"] == system, "rep"]))
            label = _t("line", lang, system=system, rep=int(rep)) if several else str(system)
            # each sample is the mean over the interval before its time: a step over that interval
            ax.plot([0.0] + list(line["t_s"]), list(line["mbps"].iloc[:1]) + list(line["mbps"]),
                    drawstyle="steps-pre", label=label, color=palette.color(system),
                    linestyle=styles[passes.index(rep) % len(styles)])
        ax.set_xlabel(_t("x", lang))
        ax.set_ylabel(_t("y", lang))
        ax.set_ylim(bottom=0)
        ax.set_title(name)
        ax.legend(fontsize="small")
        fig.tight_layout()
        systems = list(dict.fromkeys(part["system"].astype(str)))
        drawn.append(Figure(fig, alt=_t("alt", lang, test=name, systems=", ".join(systems)),
                            caption=_t("caption", lang, test=name)))
    return drawn
