"""Recipe-specific report sections: each classic tool's own tables, its curve and findings from the numbers.

The compare notebook shows every recipe in a generic shape (a table per
metric, a bar chart, winners). Some recipes are read differently: a queue-depth
sweep is a curve with a knee, GNOME Disks is a rate along the device, Bonnie++
and tiobench have tables readers know by heart, hdparm is an average of
alternating passes, pgbench is transactions per second against clients, a fleet
is hosts side by side. This package gives each of them its article shape.

Two layers, as everywhere in iolab's reporting:

* computation, tidy DataFrames in and out (rows = systems x points, numbers in
  the units stated by the column names): :func:`qd_points`, :func:`qd_knees`,
  :func:`concurrency_points`, :func:`gnome_summary`, :func:`bonnie_results`,
  :func:`tiobench_results`, :func:`hdparm_results`, :func:`pgbench_results`,
  :func:`fio_write_latency`, :func:`sqlbench_results`, :func:`fleet_hosts`, :func:`without_aggregates`, :func:`totals_left_out`;
* presentation: one function per recipe kind returning a :class:`Section`
  (tables as :class:`iolab.report.tables.Table`, matplotlib figures, commentary
  sentences in ``en`` or ``ja``): :func:`qd_sweep_section`,
  :func:`concurrency_section`, :func:`gnome_disks_section`,
  :func:`bonnie_section`, :func:`tiobench_section`, :func:`hdparm_section`,
  :func:`pgbench_section`, :func:`sqlbench_section`, :func:`fleet_section`.

:func:`plan` tells which kinds a recipe's rows are (from the rows themselves:
test names, the ``tool``, ``sweep`` and ``fleet_id`` columns, not the recipe's
name, so a renamed recipe keeps its section) and :func:`build` makes the
sections and returns the rows no section covers, for the generic shape. A
fleet's aggregate rows (host ``all``, flag ``fleet_aggregate``) never reach
the generic shape: they are the sum of the hosts, not one more system.

One module per recipe kind (:mod:`.qdsweep`, :mod:`.concurrency`,
:mod:`.gnome_disks`, :mod:`.bonnie`, :mod:`.tiobench`, :mod:`.hdparm`,
:mod:`.pgbench`, :mod:`.sqlbench`, :mod:`.fleet`), the shared objects and formats in
:mod:`.common`, :func:`plan` and :func:`build` in :mod:`.kinds`; this package
re-exports their public names (``iolab.report.sections.bonnie_section``...).

Nothing here prints or draws on screen: :meth:`Section.show` displays a
section in a notebook (figures as PNG images with alt text).
"""
from iolab.report.sections.bonnie import (BONNIE_LAYOUT, BONNIE_MIN_TIME, BONNIE_TESTS, PLUS, bonnie_latency,
                                          bonnie_results, bonnie_section)
from iolab.report.sections.common import (AGGREGATE_FLAG, ALL_HOSTS, Figure, Section, measured_systems,
                                          totals_left_out, without_aggregate_runs, without_aggregates)
from iolab.report.sections.concurrency import concurrency_points, concurrency_section
from iolab.report.sections.fleet import fleet_hosts, fleet_section
from iolab.report.sections.gnome_disks import GNOME_TESTS, gnome_disks_section, gnome_summary
from iolab.report.sections.hdparm import HDPARM_TESTS, hdparm_results, hdparm_section
from iolab.report.sections.kinds import KINDS, SECTIONS, build, plan
from iolab.report.sections.pgbench import fio_write_latency, pgbench_results, pgbench_section
from iolab.report.sections.qdsweep import qd_knees, qd_points, qd_sweep_section
from iolab.report.sections.sqlbench import SQLBENCH_TESTS, sqlbench_results, sqlbench_section
from iolab.report.sections.tiobench import TIOBENCH_TESTS, tiobench_results, tiobench_section

__all__ = [
    "AGGREGATE_FLAG", "ALL_HOSTS", "BONNIE_LAYOUT", "BONNIE_MIN_TIME", "BONNIE_TESTS", "Figure", "GNOME_TESTS",
    "HDPARM_TESTS", "KINDS", "PLUS", "SECTIONS", "SQLBENCH_TESTS", "Section", "TIOBENCH_TESTS",
    "bonnie_latency", "bonnie_results", "bonnie_section", "build", "concurrency_points", "concurrency_section",
    "fio_write_latency", "fleet_hosts", "fleet_section", "gnome_disks_section", "gnome_summary", "hdparm_results",
    "hdparm_section", "measured_systems", "pgbench_results", "pgbench_section", "plan", "qd_knees", "qd_points",
    "qd_sweep_section", "sqlbench_results", "sqlbench_section", "tiobench_results", "tiobench_section",
    "totals_left_out", "without_aggregate_runs", "without_aggregates",
]
