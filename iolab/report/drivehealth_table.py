"""What each run did to its drives, systems side by side: the health counters before and after it.

:func:`iolab.analysis.drivehealth.health_deltas` computes the rows (before, after, change per system, drive and
counter); this module only presents them. :func:`health_table` is one table, a row per counter and system
(temperature, data written, wear, spare, media and CRC errors, power-on hours, time above the warning
temperature, throttling), None when no selected run has a counter to show; :func:`unread_line` is the one
sentence naming the drives no tool could read and why, in the tools' own words (None when every drive was read
or no run recorded health: runs from before health was recorded are not mentioned).
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from iolab.analysis.drivehealth import health_deltas, tool_lines
from iolab.core.units import human_size
from iolab.report import i18n
from iolab.report.driveidentity import say_reasons
from iolab.report.tables import DASH, Table

_t = i18n.scoped("drive_health")

#: the counters the table shows, in its order (the others stay in the manifest): each with how it is written
SHOWN = {"temperature_c": "celsius", "data_written_bytes": "bytes", "percentage_used": "percent",
         "available_spare_pct": "percent", "media_errors": "count", "crc_errors": "count",
         "error_log_entries": "count", "power_on_hours": "hours", "warning_temp_minutes": "minutes",
         "critical_temp_minutes": "minutes", "thermal_transitions": "count"}


def _records(manifests) -> list[dict]:
    return manifests.to_dict("records") if isinstance(manifests, pd.DataFrame) else list(manifests)


def run_names(manifests, names: Sequence[str] | None = None) -> list[str]:
    """One name per run: the system's, with the recipe added where a system ran several (as the environment
    table names its columns)."""
    from iolab.report.environment import unique_names
    records = _records(manifests)
    names = [str(n) for n in names] if names is not None else [
        str(r.get("system_name") or r.get("label") or r.get("host") or "?") for r in records]
    return unique_names([f"{n} · {r.get('recipe')}" if names.count(n) > 1 else n for n, r in zip(names, records)])


def _value(value: float, how: str, lang: str, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    sign = "+" if signed and value > 0 else ("-" if value < 0 else "")
    size = abs(value)
    if how == "bytes":
        text = human_size(size)
    else:
        text = i18n.number(size, digits=0 if float(size).is_integer() else 1)
        if how == "percent":
            text += "%"
        elif how != "count":
            text = i18n.with_unit(text, _t(f"units.{how}", lang))
    return sign + text


def _row_name(row, several: set) -> str:
    return f"{row['system']} ({row['device']})" if row["system"] in several else str(row["system"])


def health_table(manifests: pd.DataFrame | Sequence[dict], *, names: Sequence[str] | None = None,
                 lang: str = "en") -> Table | None:
    """Rows (counter, system), columns before / after / change; None when no drive had a counter to show."""
    i18n.check_lang(lang)
    deltas = health_deltas(_records(manifests), names=run_names(manifests, names))
    read = deltas[deltas["counter"].isin(list(SHOWN))].copy()
    if read.empty:
        return None
    # a system on several drives (an md array's members): each drive in its own row
    several = {s for s, part in read.groupby("system") if part["device"].nunique() > 1}
    read["row"] = [_row_name(row, several) for _, row in read.iterrows()]
    read["order"] = read["counter"].map(list(SHOWN).index)
    read = read.sort_values("order", kind="stable")
    columns = [_t(c, lang) for c in ("before", "after", "change")]
    index = pd.MultiIndex.from_arrays([[_t(f"counters.{c}", lang) for c in read["counter"]], read["row"]],
                                      names=[_t("counter", lang), i18n.text("labels.system", lang)])
    shown = pd.DataFrame([[_value(r["before"], SHOWN[r["counter"]], lang), _value(r["after"], SHOWN[r["counter"]], lang),
                           _value(r["delta"], SHOWN[r["counter"]], lang, signed=True)] for _, r in read.iterrows()],
                         index=index, columns=columns)
    numbers = pd.DataFrame(read[["before", "after", "delta"]].to_numpy(), index=index, columns=columns)
    return Table(shown, data=numbers, caption=_t("caption", lang), notes=[_t("note", lang)])


def unread_line(manifests: pd.DataFrame | Sequence[dict], *, names: Sequence[str] | None = None,
                lang: str = "en") -> str | None:
    """The drives no tool could read, each with the tools' reasons, and the systems on a device that is no drive
    (a loop device, md, device-mapper: nothing to read); None when there are none."""
    i18n.check_lang(lang)
    deltas = health_deltas(_records(manifests), names=run_names(manifests, names))
    unread = deltas[deltas["counter"].isna()]
    if unread.empty:
        return None
    # a system's runs on the same drive say the same: once each (the run-name suffix dropped)
    said = dict.fromkeys((str(row["system"]).split(" · ")[0], str(row["unread"]), bool(row["virtual"]))
                         for _, row in unread.iterrows())
    drives = [f"**{system}**{i18n.paren(say_reasons(tool_lines(why), lang), lang)}"
              for system, why, virtual in said if not virtual]
    virtual = list(dict.fromkeys(f"**{system}**" for system, _, is_virtual in said if is_virtual))
    sentences = ([_t("unread", lang, drives=i18n.join(drives, lang))] if drives else []) + \
        ([_t("unread_virtual", lang, systems=i18n.join(virtual, lang))] if virtual else [])
    return i18n.join_sentences(sentences, lang)
