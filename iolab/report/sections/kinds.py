"""Which sections a recipe's rows get, told from the rows themselves, and the sections built from them.

The kinds come from test names, the ``tool``, ``sweep`` and ``fleet_id`` columns, not the recipe's name, so a
renamed recipe keeps its section; a row can belong to several kinds (qd-sweep and concurrency).
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from iolab.report import i18n, section_caveats
from iolab.report.sections.bonnie import BONNIE_TESTS, bonnie_section
from iolab.report.sections.common import Section, numeric, with_system, without_aggregates
from iolab.report.sections.concurrency import concurrency_section
from iolab.report.sections.fleet import fleet_section
from iolab.report.sections.flashcache import cache_state, flashcache_section
from iolab.report.sections.gnome_disks import GNOME_TESTS, gnome_disks_section
from iolab.report.sections.hdparm import HDPARM_TESTS, hdparm_section
from iolab.report.sections.pgbench import pgbench_section
from iolab.report.sections.qdsweep import qd_sweep_section
from iolab.report.sections.sqlbench import is_sqlbench, sqlbench_section
from iolab.report.sections.steadystate import is_steadystate, steadystate_section
from iolab.report.sections.sustained import is_sustained, sustained_section
from iolab.report.sections.tiobench import TIOBENCH_TESTS, tiobench_section

#: Section kinds, in the order a recipe's sections are shown.
KINDS = ("fleet", "flash-cache", "pgbench", "sqlbench", "bonnie", "tiobench", "hdparm", "gnome-disks", "qd-sweep",
         "concurrency", "sustained-write", "steady-state")

#: Section function per kind (pgbench takes the wider ``fio=`` context too).
SECTIONS: dict[str, Callable] = {
    "fleet": fleet_section,
    "flash-cache": flashcache_section,
    "pgbench": pgbench_section,
    "sqlbench": sqlbench_section,
    "bonnie": bonnie_section,
    "tiobench": tiobench_section,
    "hdparm": hdparm_section,
    "gnome-disks": gnome_disks_section,
    "qd-sweep": qd_sweep_section,
    "concurrency": concurrency_section,
    "sustained-write": sustained_section,
    "steady-state": steadystate_section,
}


def _tests(data: pd.DataFrame) -> set:
    return set(data["test"].dropna().astype(str)) if "test" in data.columns else set()


def _swept(data: pd.DataFrame, column: str, within: Sequence[str]) -> bool:
    """Whether ``column`` varies inside a sweep (rows with a ``sweep`` name), other ``within`` columns fixed."""
    if "sweep" not in data.columns or column not in data.columns:
        return False
    rows = data[data["sweep"].notna()]
    if rows.empty:
        return False
    keys = ["sweep"] + [c for c in within if c in rows.columns]
    return bool((rows.groupby(keys, dropna=False)[column].nunique() > 1).any())


def _kind_rows(data: pd.DataFrame) -> dict[str, pd.Index]:
    """Which rows each kind covers (a row can belong to several kinds: qd-sweep and concurrency)."""
    found: dict[str, pd.Index] = {}
    if data.empty:
        return found
    if "fleet_id" in data.columns and data["fleet_id"].notna().any():
        found["fleet"] = data.index[data["fleet_id"].notna()]
        data = data[data["fleet_id"].isna()]
    test = data["test"].astype(str) if "test" in data.columns else pd.Series("", index=data.index)
    tool = data["tool"].astype(str) if "tool" in data.columns else pd.Series("", index=data.index)
    pg = (tool == "pgbench") | (numeric(data, "tps").notna())
    if pg.any():
        found["pgbench"] = data.index[pg]
    sql = is_sqlbench(data)
    if sql.any():
        found["sqlbench"] = data.index[sql]
    pg = pg | sql  # a database's rows: no fio section claims them
    checks = {
        "flash-cache": cache_state(data).notna(),
        "bonnie": test.isin(BONNIE_TESTS),
        "hdparm": test.isin(HDPARM_TESTS),
        "gnome-disks": test.isin(GNOME_TESTS) & ("position" in data.columns or "access_ms" in data.columns),
        "tiobench": test.isin(TIOBENCH_TESTS) | numeric(data, "over_2s_pct").notna(),
        "sustained-write": is_sustained(data),
        # a steady-state run's rounds (they carry the verdict): a series in time, never repetitions in the
        # generic shape; its preconditioning row (no verdict) stays there, one measurement like any other
        "steady-state": is_steadystate(data),
    }
    for kind, mask in checks.items():
        mask = mask & ~pg
        if mask.any():
            found[kind] = data.index[mask]
    if "sweep" in data.columns:
        swept = data[data["sweep"].notna() & ~pg]
        if _swept(swept, "iodepth", ("direction", "bs", "system")):
            found["qd-sweep"] = swept.index
        if _swept(swept, "numjobs", ("direction", "bs", "iodepth", "system")):
            found["concurrency"] = swept.index
    return {k: found[k] for k in KINDS if k in found}


def plan(data: pd.DataFrame) -> list[str]:
    """The section kinds that apply to ``data`` (one recipe's rows), in :data:`KINDS` order."""
    return list(_kind_rows(data))


def build(data: pd.DataFrame, *, lang: str = "en", context: pd.DataFrame | None = None,
          also_generic: Sequence[str] = ()) -> tuple[list[Section], pd.DataFrame]:
    """The sections of one recipe's rows, and the rows none of them covers (fleet aggregates excluded).

    ``context`` is every selected result (all recipes): the pgbench section
    looks there for the same systems' fio latency. The rows of the kinds in
    ``also_generic`` stay in the rows returned too (the report page shows a
    fleet's hosts in the generic tables as well: CrystalDiskMark's own figure).
    """
    i18n.check_lang(lang)
    data = with_system(data)
    rows = _kind_rows(data)
    sections = []
    covered = pd.Index([])
    for kind, index in rows.items():
        part = data.loc[index]
        if kind == "pgbench":
            section = pgbench_section(part, lang=lang, fio=context)
        else:
            section = SECTIONS[kind](part, lang=lang)
        if section is not None:
            section.caveats = section_caveats.caveat_lines(part, lang=lang, kind=kind)
            sections.append(section)
            if kind not in also_generic:
                covered = covered.union(index)
    rest = without_aggregates(data.drop(index=covered))
    return sections, rest


