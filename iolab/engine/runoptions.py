"""What a run is asked to do besides its recipe and targets: one value, validated once.

``iolab run`` (:func:`iolab.cli.run.run_options`), the measure notebook's papermill parameters and
the explorer's run panel (both through :meth:`RunOptions.from_form`) build a :class:`RunOptions`;
:func:`iolab.engine.runner.run`, :func:`~iolab.engine.runner.plan` and
:func:`iolab.engine.dryrun.dry_run` take it as it is. Every value is checked and put in its unit
when the value is made (bytes, seconds, a tuple of names), so a bad one is an
:class:`~iolab.core.errors.IolabError` naming the option and the value before anything else
happens, and the engine never parses an option again.

An unset option (None, or an empty tuple) leaves the recipe's own value.
"""
from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Optional

from iolab.core.errors import IolabError, run_option
from iolab.core.units import parse_seconds, parse_size
from iolab.engine.recipe_schema import ISOLATION_MODES, check_mem_limit
from iolab.engine.recipemix import MIX_RATIOS, parse_mix
from iolab.engine.timelogs import interval_ms


@dataclasses.dataclass(frozen=True)
class Allowances:
    """What the user allowed on purpose (``--allow-path``, ``--allow-exec``); recorded in the manifest and
    enforced by :func:`iolab.engine.jobfile.gate.check`."""

    paths: tuple = ()
    exec: bool = False

    def record(self, confirm=None) -> dict:
        """The manifest's ``safety`` entry."""
        confirm = [] if confirm is None else [str(confirm)] if isinstance(confirm, (str, os.PathLike)) \
            else [str(c) for c in confirm]
        return {"confirm": confirm, "allow_paths": [os.path.abspath(p) for p in self.paths],
                "allow_exec": bool(self.exec)}


def size_bytes(value, name: str = "size") -> int:
    """``--size``: bytes (``"1G"``, ``"512M"``, ``4096``)."""
    return parse_size(value, context=run_option(name))


def mem_limit_bytes(value) -> int:
    """``--mem-limit``: bytes, refused below :data:`iolab.engine.recipe_schema.MIN_MEM_LIMIT`."""
    try:
        return check_mem_limit(size_bytes(value, "mem_limit"), value)
    except ValueError as exc:
        raise IolabError(str(exc), context=run_option("mem_limit")) from None


def seconds(value, name: str = "runtime") -> float:
    """``--runtime``: positive seconds (``5``, ``"5s"``, ``"2m"``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)  # already seconds (a RunOptions made from another)
    return parse_seconds(value, context=run_option(name))


def pause_seconds(value) -> float:
    """``--pause``: seconds between tests, 0 for none."""
    try:
        if float(value) == 0:
            return 0.0
    except (TypeError, ValueError):
        pass
    return seconds(value, "pause")


def repeat_count(value) -> int:
    """``--repeat``: passes per test, at least 1."""
    try:
        number = int(value)
        whole = not isinstance(value, bool) and float(value) == number
    except (TypeError, ValueError):
        whole = False
    if not whole:
        raise IolabError(f"not a whole number of passes: {value!r}", context=run_option("repeat"))
    if number < 1:
        raise IolabError(f"must be at least 1, got {value}", context=run_option("repeat"))
    return number


def _names(value, name: str) -> tuple:
    """A name or a list of names as a tuple of non-blank strings (``--tests a,b``, ``--confirm X``)."""
    if value is None:
        return ()
    items = [value] if isinstance(value, (str, os.PathLike)) else value
    try:
        names = tuple(str(item).strip() for item in items)
    except TypeError:
        raise IolabError(f"not a name or a list of names: {value!r}", context=run_option(name)) from None
    return tuple(n for n in names if n)


def _text(value, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise IolabError(f"not a text: {value!r}", context=run_option(name))
    return value.strip() or None


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """A run's options, checked and in their units (see the module's docstring)."""

    #: the system's name in reports (None: the host name)
    label: Optional[str] = None
    #: the result store the run directory goes under
    data_dir: Path = Path("data")
    #: cache isolation, one of :data:`iolab.engine.recipe_schema.ISOLATION_MODES` (None: the recipe's)
    isolation: Optional[str] = None
    #: bytes of page cache a buffered test may use (None: the recipe's, else 512 MiB)
    mem_limit: Optional[int] = None
    #: test file size in bytes
    size: Optional[int] = None
    #: seconds per test
    runtime: Optional[float] = None
    #: passes per test (exactly that many: no adaptive repeats)
    repeat: Optional[int] = None
    #: seconds between tests, 0.0 for none (CrystalDiskMark's interval)
    pause: Optional[float] = None
    #: the recipe's preset
    preset: Optional[str] = None
    #: only these tests, in this order (``--tests``; empty: the preset's or all)
    tests: tuple = ()
    #: the mixed rows' read percentage (``--mix R70`` -> 70)
    mix: Optional[int] = None
    #: milliseconds per sample of fio's bw/iops/lat logs (``--log-interval``)
    log_interval_ms: Optional[int] = None
    #: fio I/O engine for every test
    ioengine: Optional[str] = None
    #: the exact block devices or files the run may overwrite (``--confirm``)
    confirm: Optional[tuple] = None
    #: paths and program execution allowed on purpose (``--allow-path``, ``--allow-exec``)
    allow: Allowances = Allowances()
    #: run where bubblewrap cannot confine fio
    unconfined: bool = False
    #: record drive serial numbers as they are
    keep_serials: bool = False
    #: also run the original tool where the recipe emulates one
    with_original: bool = False
    #: measure every target at the same time, one fio per pass, with a total row (:mod:`iolab.engine.simultaneous`)
    simultaneous: bool = False
    #: probe an emulated device's declared limits when it is made (:mod:`iolab.devices.ceilingprobe`); False
    #: (``--no-ceiling-probe``) makes it without the probe, and its manifest says the probe was skipped on request
    ceiling_probe: bool = True
    #: progress bars (None: when stderr is a terminal)
    progress: Optional[bool] = None
    #: the command line, recorded in the manifest
    argv: Optional[tuple] = None
    #: where emulated devices keep their backing files (None: $TMPDIR, else the emulated module's)
    scratch_dir: Optional[str] = None

    def __post_init__(self):
        checked = {
            "label": _text(self.label, "label"),
            "data_dir": Path(self.data_dir or "data"),
            "isolation": self._isolation(self.isolation),
            "mem_limit": None if self.mem_limit is None else mem_limit_bytes(self.mem_limit),
            "size": None if self.size is None else size_bytes(self.size),
            "runtime": None if self.runtime is None else seconds(self.runtime),
            "repeat": None if self.repeat is None else repeat_count(self.repeat),
            "pause": None if self.pause is None else pause_seconds(self.pause),
            "preset": _text(self.preset, "preset"),
            "tests": _names(self.tests, "tests"),
            "mix": None if self.mix is None else self._mix(self.mix),
            "log_interval_ms": interval_ms(self.log_interval_ms),
            "ioengine": _text(self.ioengine, "ioengine"),
            "confirm": _names(self.confirm, "confirm") or None,
            "allow": self._allow(self.allow),
            "argv": None if self.argv is None else tuple(str(a) for a in self.argv),
            "scratch_dir": None if self.scratch_dir is None else str(self.scratch_dir),
        }
        for flag in ("unconfined", "keep_serials", "with_original", "simultaneous", "ceiling_probe"):
            if not isinstance(getattr(self, flag), bool):
                raise IolabError(f"must be True or False, got {getattr(self, flag)!r}", context=run_option(flag))
        if self.progress is not None and not isinstance(self.progress, bool):
            raise IolabError(f"must be True, False or None, got {self.progress!r}", context=run_option("progress"))
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @staticmethod
    def _isolation(value) -> str | None:
        value = _text(value, "isolation")
        if value is not None and value not in ISOLATION_MODES:
            raise IolabError(f"must be one of {', '.join(ISOLATION_MODES)}, got {value!r}", context=run_option("isolation"))
        return value

    @staticmethod
    def _mix(value) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value in MIX_RATIOS:
            return value  # already a ratio (a RunOptions made from another)
        return parse_mix(value, context=run_option("mix"))

    @staticmethod
    def _allow(value) -> Allowances:
        if value is None:
            return Allowances()
        if not isinstance(value, Allowances):
            raise IolabError(f"not an Allowances: {value!r}", context=run_option("allow"))
        return Allowances(paths=_names(value.paths, "allow_path"), exec=bool(value.exec))

    # -- made from ... ---------------------------------------------------------------------------
    @classmethod
    def of(cls, options: "RunOptions | None" = None, **keywords) -> "RunOptions":
        """``options`` with ``keywords`` on top (the keyword form of :func:`iolab.engine.runner.run`), checked."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise IolabError(f"no run option named {unknown[0]!r}", context="run options",
                             hint="the options are: " + ", ".join(sorted(known)))
        if options is None:
            return cls(**keywords)
        if not isinstance(options, cls):
            raise IolabError(f"not a RunOptions: {options!r}", context="run options")
        return dataclasses.replace(options, **keywords) if keywords else options

    @classmethod
    def from_form(cls, **values) -> "RunOptions":
        """From fields a person fills in (the measure notebook's parameters, the run panel's boxes): an empty
        field (None, blank text, an empty list, or 0 where 0 means nothing: any number but ``pause``) is left
        unset, so the recipe's own value holds; everything else is checked as :class:`RunOptions` checks it."""
        def empty(name, value):
            if value is None or isinstance(value, bool):
                return value is None
            if isinstance(value, str):
                return not value.strip()
            if isinstance(value, (list, tuple)):
                return not value
            return isinstance(value, (int, float)) and value == 0 and name != "pause"  # --pause 0: no pause
        return cls.of(**{name: value for name, value in values.items() if not empty(name, value)})
