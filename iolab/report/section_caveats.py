"""The caveats of the rows a report section shows: every engine flag, once, naming its tests.

A section of the compare notebook (Bonnie++, hdparm, tiobench, ...) shows
figures from rows that may carry flags (``v1_writeback``, ``cache_suspect``,
``emulated_latency``, ...). :func:`caveat_lines` turns those rows' flags into
the same sentences the generic commentary uses (:func:`iolab.report.commentary.caveats`),
so no section shows a figure without its caveat.
"""
from __future__ import annotations

import pandas as pd

from iolab.report import commentary
from iolab.analysis.stats import split_flags

#: Flags that describe the rows rather than warn about them (a fleet's sum of hosts; GNOME Disks' dropped
#: first access-time sample, which the section's intro states as its method).
NOT_CAVEATS = {"fleet_aggregate", "first_sample_dropped"}
#: Flags that do not concern what a kind of section shows: hdparm shows no latency, so the
#: emulated device's latency caveat would warn about a figure that is not there.
NOT_SHOWN = {"hdparm": {"emulated_latency", "emulated_delay"}}
#: Sections whose tables name a system by its host (a fleet's hosts ran in several fleet runs).
BY_HOST = {"fleet"}
#: Sections whose rows are rounds in time (a steady-state run's), not repetitions of one measurement.
ROUNDS = {"steady-state"}


def flagged_summary(rows: pd.DataFrame, ignore=frozenset()) -> pd.DataFrame:
    """One row per (system, test, direction) with the union of its rows' flags."""
    if rows.empty or "flags" not in rows.columns:
        return pd.DataFrame(columns=["system", "test", "direction", "value", "flags"])
    frame = pd.DataFrame({
        "system": rows["system"].astype(str) if "system" in rows else rows["label"].astype(str),
        "test": rows["test"].astype(str) if "test" in rows else "",
        "direction": rows["direction"].fillna("").astype(str) if "direction" in rows else "",
        "flags": rows["flags"].map(lambda v: [f for f in split_flags(v) if f not in NOT_CAVEATS and f not in ignore]),
    })
    out = []
    for (system, test, direction), part in frame.groupby(["system", "test", "direction"], sort=False):
        flags = list(dict.fromkeys(f for flags in part["flags"] for f in flags))
        out.append({"system": system, "test": test, "direction": direction, "value": 1.0,
                    "flags": ";".join(flags)})
    return pd.DataFrame(out, columns=["system", "test", "direction", "value", "flags"])


def caveat_lines(rows: pd.DataFrame, *, lang: str, kind: str = "") -> list[str]:
    """The caveat sentences for the flags of ``rows`` shown in a section of ``kind`` (empty when none)."""
    if kind in BY_HOST and "host" in rows.columns:
        # a fleet section's tables name each host once (web1), not each run it was in (web1 @ web1 (run id))
        rows = rows.assign(system=rows["host"].astype(str))
    summary = flagged_summary(rows, NOT_SHOWN.get(kind, frozenset()))
    if summary.empty or not (summary["flags"] != "").any():
        return []
    found = commentary.caveats(summary)
    return commentary.caveat_sentences(found, lang=lang, over="rounds" if kind in ROUNDS else "flags") \
        if not found.empty else []
