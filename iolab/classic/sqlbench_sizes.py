"""What each sql-bench test does at a scale: its counts (the runners in :mod:`iolab.classic.sqlbench_tests`
use these very numbers), a line saying so, and what the test stresses.

``n(count)`` scales one of sql-bench's published loop counts or sizes (the ``$opt_*``
defaults of ``sql-bench/test-*.sh``): ``max(1, round(count * scale))``; a few sizes have
a floor so that the queries still find rows (``max(10, ...)``, ``max(100, ...)``).
:func:`scaler` builds ``n``; :func:`describe` renders one test for ``iolab recipes sqlbench``.
"""
from __future__ import annotations

#: Named scales (recipe option ``scale``, or a preset's ``preset_scale``): ``quick`` is the default,
#: a fraction big enough for the article's finding (create apart, the rest not) in about a minute
#: on emulated:hdd with MyISAM; ``published`` is sql-bench's own sizes (hours per target).
SCALES = {"quick": 0.01, "published": 1.0}

#: ATIS's generated tables and their row counts (fixed: sql-bench loads them from Data/ATIS/*.txt)
ATIS_ROWS = {"state": 11, "city": 11, "aircraft": 22, "airline": 10, "flight": 579, "month_name": 12,
             "day_name": 7, "flight_day": 128}


def scaler(scale: float):
    """``n(count)``: a published count at ``scale``, at least 1."""
    return lambda count: max(1, round(count * scale))


def sizes(name: str, n) -> dict:
    """The counts test ``name`` runs with at the scale of ``n``."""
    return SIZES[name](n)


SIZES = {
    "ATIS": lambda n: {"tables": len(ATIS_ROWS), "rows": sum(ATIS_ROWS.values()), "loops": n(5000)},
    "alter-table": lambda n: {"rows": n(1000), "start_fields": 8, "fields": max(10, n(1000)), "indexes": 8},
    "big-tables": lambda n: {"fields": max(10, n(1000)), "loops": n(70000)},
    "connect": lambda n: {"loops": n(500000), "connects": n(50000), "blob_bytes": 65000},
    "create": lambda n: {"tables": n(400), "loops": n(10000), "keys": 16},
    "insert": lambda n: {"rows": n(100000)},
    "select": lambda n: {"rows": n(10000), "medium": n(7000), "small": n(10), "regions": 6, "groups": 100},
    "wisconsin": lambda n: {"onek": max(100, n(1000)), "tenk": max(100, n(10000)), "loops": n(5000)},
}

#: What the test does, from its counts (``{name}`` fields of :data:`SIZES`).
WORK = {
    "ATIS": "{tables} airline tables, {rows} generated rows; 14 join, distinct and group selects x {loops}",
    "alter-table": "1 table of {rows} rows: add columns one ALTER at a time from {start_fields} to {fields},"
                   " {indexes} indexes created and dropped, columns dropped again",
    "big-tables": "a {fields}-column table: 2 x {loops} selects of all columns, 2 x {loops} single-row inserts",
    "connect": "{connects} connects (bare, + select, + 1-row select), {loops} x 4 selects over one connection,"
               " a {blob_bytes}-byte blob fetched {connects} x",
    "create": "{tables} tables created, counted and dropped; {loops} x create+drop;"
              " {loops} x create+drop of a {keys}-key table",
    "insert": "1 table with 2 keys: {rows} rows in order, {rows} in reverse, {rows} at random (single-row"
              " inserts), {rows} refused duplicates; key and range selects, updates and deletes",
    "select": "1 table of {rows} rows with 3 multi-part keys ({regions} regions, {groups} groups): 2 x {rows}"
              " cached sums, {small} x 7 big selects, {rows} x 4 min/max/count on keys, 4 x {medium} group counts",
    "wisconsin": "onek ({onek} rows), tenk1, tenk2 and Bprime ({tenk} rows each): the Wisconsin selects x {loops},"
                 " a few inserts, updates and deletes",
}

#: What the test stresses: the reason it does or does not tell disks apart.
STRESSES = {
    "ATIS": "CPU and round trips on small cached tables",
    "alter-table": "table rebuilds (each ALTER copies the table into new files)",
    "big-tables": "CPU: parsing and sending wide rows (1000 columns at the published size)",
    "connect": "connection set-up and round trips; no storage",
    "create": "creating, syncing and removing table files: the one test bound by the device's flushes",
    "insert": "single-row autocommitted writes (InnoDB flushes its log per commit; MyISAM does not)",
    "select": "CPU: key lookups, min/max, counts and groups on a cached table",
    "wisconsin": "CPU: the Wisconsin query mix (joins, ranges, aggregates) on cached tables",
}


def describe(name: str, scale: float) -> tuple[str, str]:
    """(what the test does at ``scale``, what it stresses), for listings."""
    return WORK[name].format(**sizes(name, scaler(scale))), STRESSES[name]
