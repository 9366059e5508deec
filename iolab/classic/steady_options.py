"""The ``steady-state`` recipe's ``options``, checked, and the command line's bounds on them.

A recipe declares (``options:``, :class:`SteadyOptions`) how much preconditioning writes
(``precondition``: ``2x`` the target's capacity as the PTS says -- :mod:`iolab.classic.capacity`: a
block device's size, an emulated device's, a file target's size, a directory's test area --, a
size, or ``0``), how many rounds it may
run (``max_rounds``, the PTS's 25), a bound on the time of preconditioning and rounds together
(``max_time``, seconds; 0 none) and the figure judged (``figure``). On a big device the command
line bounds them (``--precondition-size``, ``--max-rounds``, ``--max-time``; the round is
``--runtime``): :func:`bounded` parses them and returns a copy of the recipe whose options hold
the typed values (bytes, a whole number, seconds), which the engine reads through
:func:`parse_options` into :class:`Bounds`; :meth:`Bounds.plan` turns the setting into each target's
bytes (:class:`Preconditioning`: the bytes, the PTS's twice the capacity, and why). A declared size
wins over the capacity. Nothing here runs anything.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Annotated, Literal, Optional, Union

from pydantic import BeforeValidator, Field, WithJsonSchema

from iolab.analysis.steadystate import WINDOW
from iolab.core import schema
from iolab.core.errors import IolabError, run_option
from iolab.core.schema import Schema
from iolab.core.units import parse_seconds, parse_size

#: the PTS: preconditioning writes twice the capacity; at most 25 rounds
PTS_FACTOR, PTS_ROUNDS = 2.0, 25
#: what the engine judges per round
FIGURES = ("iops", "bw_mbps")
#: the command line's options, by the recipe option they bound
FLAGS = {"precondition": "--precondition-size", "max_rounds": "--max-rounds", "max_time": "--max-time"}


def _precondition(value):
    """``2x`` (a multiple of the capacity, kept as text), a size in bytes, or 0 (none)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"must be a size, a multiple such as 2x, or 0, got {value!r}")
    text = str(value).strip().lower()
    if text.endswith("x"):
        try:
            factor = float(text[:-1])
        except ValueError:
            raise ValueError(f"{value!r} is neither a size nor a multiple of the capacity (2x)") from None
        if factor < 0:
            raise ValueError(f"{value!r}: a negative multiple")
        return text
    if text in ("0", "none", "no"):
        return 0
    try:
        return parse_size(value)
    except IolabError as exc:
        raise ValueError(f"{exc.message}: a size, a multiple such as 2x, or 0") from None


def _seconds_or_none(value):
    if value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0):
        return None
    if isinstance(value, str) and value.strip() in ("0", "none", ""):
        return None
    try:
        return parse_seconds(value)
    except IolabError as exc:
        raise ValueError(exc.message) from None


def _rounds(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < WINDOW:
        raise ValueError(f"must be a whole number >= {WINDOW} (the measurement window), got {value!r}")
    return value


Precondition = Annotated[Union[int, str], BeforeValidator(_precondition), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
     "description": "2x (twice the target's capacity, the PTS), a size such as 200G, or 0 (none)"})]
OptionalSeconds = Annotated[Optional[float], BeforeValidator(_seconds_or_none), WithJsonSchema(
    {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}, {"type": "null"}]})]
Rounds = Annotated[int, BeforeValidator(_rounds), WithJsonSchema({"type": "integer", "minimum": WINDOW})]


class SteadyOptions(Schema):
    """A steady-state recipe's ``options``."""
    precondition: Precondition = Field("2x", description="bytes of 128 KiB sequential writes: 2x the target's "
                                                         "capacity, a size, or 0")
    max_rounds: Rounds = Field(PTS_ROUNDS, description="rounds at most (the PTS: 25)")
    max_time: OptionalSeconds = Field(None, description="seconds for preconditioning and rounds together; 0: none")
    figure: Literal["iops", "bw_mbps"] = "iops"


@dataclasses.dataclass(frozen=True)
class Preconditioning:
    """What preconditioning writes on one target: ``bytes``, the PTS's twice the capacity (``pts``), ``why``
    (``declared``: a size; ``none``: 0; ``capacity``: a multiple of it) and the capacity with its source."""
    bytes: int
    pts: int
    why: str
    capacity: int
    capacity_source: str

    def record(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What the engine runs to, typed; preconditioning per target through :meth:`plan`."""
    precondition: int | str      # bytes preconditioning writes (0: none), or a multiple of the capacity ("2x")
    max_rounds: int
    max_time: float | None       # seconds for preconditioning and rounds together (None: no bound)
    round_s: float
    figure: str

    @property
    def precondition_s(self) -> float | None:
        """Seconds preconditioning may take: the time bound less a measurement window of rounds."""
        return None if self.max_time is None else self.max_time - WINDOW * self.round_s

    def plan(self, capacity) -> Preconditioning:
        """Preconditioning on a target of ``capacity`` (:class:`iolab.classic.capacity.Capacity`)."""
        pts = int(PTS_FACTOR * capacity.bytes)
        if isinstance(self.precondition, str):
            nbytes, why = int(float(self.precondition[:-1]) * capacity.bytes), "capacity"
        else:
            nbytes, why = self.precondition, "declared" if self.precondition else "none"
        return Preconditioning(bytes=nbytes, pts=pts, why=why, capacity=capacity.bytes,
                               capacity_source=capacity.source)

    def record(self) -> dict:
        """For the manifest and steadystate.json."""
        return {**dataclasses.asdict(self), "precondition_s": self.precondition_s, "window": WINDOW,
                "pts_rounds": PTS_ROUNDS}


def precondition_bytes(value, capacity: int, context: str) -> int:
    """How many bytes preconditioning writes: ``Nx`` times the capacity, a size, or 0 (none)."""
    try:
        checked = _precondition("2x" if value is None else value)
    except ValueError as exc:
        raise IolabError(str(exc), context=context) from None
    return int(float(checked[:-1]) * capacity) if isinstance(checked, str) else checked


def parse_options(recipe, round_s: float) -> Bounds:
    """The recipe's options checked (:class:`SteadyOptions`); errors name the file and the field."""
    source = recipe.source or recipe.name
    spec = schema.validate(SteadyOptions, recipe.options or {}, source, at="options")
    bounds = Bounds(precondition=spec.precondition, max_rounds=spec.max_rounds,
                    max_time=spec.max_time, round_s=round_s, figure=spec.figure)
    if bounds.max_time is not None and bounds.precondition_s <= 0:
        raise IolabError(f"{bounds.max_time:g} s leaves no time for a measurement window of {WINDOW} rounds of "
                         f"{round_s:g} s", context=f"{source}: options.max_time ({FLAGS['max_time']})",
                         hint=f"give more than {WINDOW * round_s:g} s, or shorter rounds with --runtime")
    return bounds


def bounded(recipe, *, precondition_size=None, max_rounds=None, max_time=None):
    """``recipe`` (a Recipe or its name) with the command line's bounds in its options, as typed values;
    the recipe itself when none is given. Only a steady-state recipe (``engine: steadystate``) takes them."""
    given = {"precondition": precondition_size, "max_rounds": max_rounds, "max_time": max_time}
    given = {key: value for key, value in given.items() if value is not None}
    if not given:
        return recipe
    from iolab.engine import recipes
    recipe = recipes.load(recipe) if isinstance(recipe, str) else recipe
    if recipe.engine != "steadystate":
        raise IolabError(f"bounds of a steady-state run, but recipe {recipe.name} runs on engine "
                         f"{recipe.engine}",
                         context=_where(*given), hint="e.g. iolab run steady-state --max-time 2h")
    typed = {}
    for key, value in given.items():
        try:
            typed[key] = {"precondition": _precondition, "max_time": _seconds_or_none,
                          "max_rounds": lambda v: _rounds(_whole(v))}[key](value)
        except ValueError as exc:
            raise IolabError(str(exc), context=_where(key)) from None
    recipe = copy.deepcopy(recipe)
    recipe.options = {**recipe.options, **typed}
    return recipe


def _where(*keys: str) -> str:
    """How an error names the bounds given: ``run option --max-time``, as every other run option is named
    (:mod:`iolab.engine.runoptions`)."""
    return run_option(*(FLAGS[key] for key in keys))


def _whole(value):
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"must be a whole number, got {value!r}") from None
