"""Every engine a recipe can name and every undo a ledger record can name, registered in one place.

:mod:`iolab.engine.registry` holds the tables; this module fills them by explicit imports, and the
``iolab`` package has the registry import it the first time a table is read (a run, the recipe listing,
the reaper), so they are full before any of them reads one and ``import iolab`` loads no engine. It
lives in the classic layer because that is the lowest layer allowed to import everything it
names: the fio engine (:mod:`iolab.engine.runner`), the classic engines, and the undo functions of
the objects the devices, engine and classic layers record in the ownership ledger (iSCSI targets,
run directories, PostgreSQL clusters, MariaDB servers). The fleet's engine
(:class:`iolab.fleet.fleetrun.FleetRun`) is no recipe's ``engine:``: ``iolab run --hosts`` builds it.

An undo is registered under the name of the module that records such objects (its records say
``undone_by=__name__``), so the ledger's records keep the names they always had.
"""
from __future__ import annotations

from iolab.classic import (bonnie, gnomedisks, hdparm, mariadb, pgbench, pgbench_options, pgcluster, sqlbench,
                           steadystate, sustained)
from iolab.devices import iscsi
from iolab.engine import registry, runner, workdirs

#: recipe ``engine:`` name -> (engine class, its describe_tests or None)
ENGINES = {
    "fio": (runner.FioEngine, None),
    "bonnie": (bonnie.Engine, None),
    "gnomedisks": (gnomedisks.Engine, None),
    "hdparm": (hdparm.Engine, None),
    "pgbench": (pgbench.Engine, pgbench_options.describe_tests),
    "sqlbench": (sqlbench.Engine, sqlbench.describe_tests),
    "steadystate": (steadystate.Engine, None),
    "sustained": (sustained.Engine, None),
}

#: the modules whose records name them to be undone (``undone_by``) -> their undo
UNDO = {module.__name__: module.undo_stale for module in (iscsi, workdirs, pgcluster, mariadb)}

for _name, (_cls, _describe) in ENGINES.items():
    registry.register_engine(_name, _cls, describe=_describe)
for _name, _undo in UNDO.items():
    registry.register_undo(_name, _undo)
