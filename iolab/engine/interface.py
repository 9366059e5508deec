"""What every engine is: the steps :func:`iolab.engine.runner.run` and a fleet run drive, by name.

An engine runs a recipe's tests and keeps what they measured in a run directory. Whatever it
measures with (fio, Python workers, the original tools, pgbench on its own cluster, sql-bench on its
own server, one fio client for many hosts), it does the same four things, each a public method so
that an engine built on another calls its steps by their names:

* :meth:`Engine.prepare`: check and write what the run needs before anything is timed (job files
  checked with ``fio --parse-only``, a database initialised);
* :meth:`Engine.measure_step`: measure one step (a test, one repetition, on one target or host);
* :meth:`Engine.annotate`: add the run's columns (run id, host, label, recipe, isolation, target,
  tool, device and cgroup evidence, flags) to what the step measured;
* :meth:`Engine.store`: keep the rows (``results.csv`` rewritten as each step ends).

:meth:`Engine.execute` is the whole run in the engine's own order (the runner calls it once and
handles the manifest's final status, errors and Ctrl-C for every engine). The engines a recipe can
name are registered in :mod:`iolab.engine.registry`.
"""
from __future__ import annotations

import abc
from typing import ClassVar


class Engine(abc.ABC):
    """One way of running a recipe's steps (see the module docstring).

    An engine a recipe names is built as ``cls(recipe, targets, run, *, mem_limit, progress,
    scratch_dir)``; the signatures of the steps are the engine's own (a fio step takes a job file,
    a pgbench step a cluster and a number of clients).
    """

    #: whether :func:`iolab.engine.runner.run` confines the engine's processes (bubblewrap),
    #: decided before the run directory exists: the engines that run fio on the targets
    confined: ClassVar[bool] = False

    @abc.abstractmethod
    def prepare(self, *args, **kwargs):
        """Check and write what the run needs before anything is measured."""

    @abc.abstractmethod
    def measure_step(self, *args, **kwargs):
        """Measure one step (one test, repetition and target); its rows, annotated and stored."""

    @abc.abstractmethod
    def annotate(self, *args, **kwargs):
        """The run's columns added to what one step measured."""

    def store(self, frame) -> None:
        """Keep one step's rows: appended to the run's results (``results.csv`` rewritten)."""
        self.run.add_results(frame)

    @abc.abstractmethod
    def execute(self) -> None:
        """Run every step, repetition and target, filling the run directory."""
