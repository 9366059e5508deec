"""The write-cliff finding in words, ``en`` or ``ja``: one sentence per system (and one on recovery).

Reads the ``sustained`` rows of a ``sustained-write`` run (the columns
:func:`iolab.analysis.cliff.cliff_columns` adds, plus ``idle_s``, the pause before the
recovery write) and says what a review's sustained-write page says: the burst rate, how
much it held before the cliff, the rate after it, and whether the burst came back after
the idle pause. The templates are ``cliff.*`` in ``iolab/report/locale/<lang>.yaml``.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.core.units import human_size
from iolab.report import i18n

SUSTAINED = "sustained"


def _given(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _truth(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "1.0")


def _one(row, system: str, lang: str) -> list[str]:
    if _given(row.get("cliff_error")) and not _given(row.get("cliff_found")):
        return [i18n.text("cliff.no_finding", lang, system=system, error=row["cliff_error"])]
    if not _truth(row.get("cliff_found")):
        return [i18n.text("cliff.none", lang, system=system, burst=i18n.number(row["burst_mbps"]),
                          written=human_size(row.get("io_bytes") or 0))]
    said = [i18n.text("cliff.found", lang, system=system, burst=i18n.number(row["burst_mbps"]),
                      size=human_size(row["cliff_bytes"]), seconds=i18n.number(row["cliff_s"]),
                      after=i18n.number(row["after_mbps"]), drop=i18n.percent(float(row["cliff_drop"])))]
    if _given(row.get("recovery_mbps")) and _given(row.get("recovery_fraction")):
        key = "cliff.recovered" if _truth(row.get("recovered")) else "cliff.not_recovered"
        fraction = float(row["recovery_fraction"])
        idle = row.get("idle_s")
        said.append(i18n.text(key, lang, idle=f"{round(float(idle), 1):g}" if _given(idle) else "?",
                              recovery=i18n.number(row["recovery_mbps"]),
                              fraction=f"{min(1.0, max(0.0, fraction)) * 100:.0f}"))  # above the burst: all the way
    return said


def sentences(results: pd.DataFrame, lang: str, *, system: str = "label") -> list[str]:
    """One finding per system (``system`` column, ``target`` when the label is missing)."""
    i18n.check_lang(lang)
    if results.empty or "cliff_found" not in results or "test" not in results:
        return []
    rows = results[results["test"].eq(SUSTAINED)]
    said = []
    for _, row in rows.iterrows():
        name = row.get(system) if _given(row.get(system)) else row.get("target", "?")
        said.append(("" if lang == "ja" else " ").join(_one(row, str(name), lang)))  # ja: no space after 。
    return said
