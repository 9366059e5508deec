"""A pgbench recipe's ``options`` and tests, checked (:func:`parse_options`); see :mod:`iolab.classic.pgbench`."""
from __future__ import annotations

import dataclasses

from typing import Annotated, Dict, List, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, field_validator

from iolab.classic.pgcluster import RESERVED_SETTINGS, SETTING_NAME
from iolab.core import schema
from iolab.core.errors import IolabError
from iolab.core.schema import Count, Schema, SizeText
from iolab.core.units import human_size, parse_size

DEFAULT_CLIENTS = (1, 2, 4, 8)
DEFAULT_SCALE = 10
DEFAULT_SHARED_BUFFERS = "128MB"
PROTOCOLS = ("simple", "extended", "prepared")
SYNC_COMMIT_VALUES = ("on", "off", "local", "remote_write", "remote_apply")
#: Test fields that make sense for pgbench (the loader fills the others with defaults).
TEST_FIELDS_OK = {"name", "description", "rw", "bs", "runtime"}


@dataclasses.dataclass
class Mode:
    test: str
    synchronous_commit: str
    fsync: str
    runtime: float

    @property
    def settings(self) -> dict:
        return {"synchronous_commit": self.synchronous_commit, "fsync": self.fsync}


@dataclasses.dataclass
class Options:
    scale: int
    clients: list
    protocol: str
    shared_buffers: str
    shared_buffers_bytes: int
    settings: dict
    modes: list
    user: str | None
    bindir: str | None


def _onoff(value, allowed=("on", "off")) -> str:
    if isinstance(value, bool):  # YAML 1.1 reads on/off as booleans
        value = "on" if value else "off"
    value = str(value).lower()
    if value not in allowed:
        raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _setting_name(name: str) -> str:
    if not SETTING_NAME.match(name):
        raise ValueError(f"not a setting name: {name!r}")
    if name in RESERVED_SETTINGS:
        raise ValueError("is set by iolab (modes, shared_buffers, the socket)")
    return name


def _setting(value):
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError(f"must be a single value, got {value!r}")
    return _onoff(value) if isinstance(value, bool) else str(value)


OnOff = Annotated[str, BeforeValidator(_onoff), WithJsonSchema({"enum": ["on", "off", True, False]})]
SyncCommit = Annotated[str, BeforeValidator(lambda v: _onoff(v, SYNC_COMMIT_VALUES)),
                       WithJsonSchema({"enum": [*SYNC_COMMIT_VALUES, True, False]})]


class ModeSpec(Schema):
    """The server settings of one test (mode)."""
    synchronous_commit: SyncCommit
    fsync: OnOff


class PgbenchOptions(Schema):
    """A pgbench recipe's ``options``."""
    scale: Count = DEFAULT_SCALE
    clients: List[Count] = Field(list(DEFAULT_CLIENTS), min_length=1)
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    shared_buffers: SizeText = DEFAULT_SHARED_BUFFERS
    settings: Optional[Dict[Annotated[str, AfterValidator(_setting_name)],
                            Annotated[str, BeforeValidator(_setting), WithJsonSchema({})]]] = None
    modes: Dict[str, ModeSpec] = Field(min_length=1, description="each test name -> {synchronous_commit, fsync}")
    user: Optional[str] = None
    bindir: Optional[str] = None

    @field_validator("clients")
    @classmethod
    def _distinct(cls, clients):
        if len(set(clients)) != len(clients):
            raise ValueError(f"lists a client count twice: {clients!r}")
        return clients

    @field_validator("shared_buffers")
    @classmethod
    def _at_least_a_mib(cls, value):
        if parse_size(value) < 1024**2:
            raise ValueError(f"must be at least 1 MiB, got {value!r}")
        return value


def parse_options(recipe, *, mem_limit: int | None = None) -> Options:
    """Check a pgbench recipe's ``options`` (:class:`PgbenchOptions`) and tests; errors name the file and
    the field."""
    source = recipe.source or recipe.name
    ctx = f"{source}: options"
    spec = schema.validate(PgbenchOptions, recipe.options or {}, source, at="options")
    sb_bytes = parse_size(spec.shared_buffers)
    if mem_limit and recipe.isolation == "cgroup" and sb_bytes > mem_limit // 2:
        raise IolabError(f"{spec.shared_buffers} leaves less than half of the {human_size(mem_limit)} memory limit "
                         "for the page cache and the server's processes", context=f"{ctx}.shared_buffers",
                         hint="lower shared_buffers or raise --mem-limit")
    # PostgreSQL reads a bare number as 8 kB pages: give it the unit it understands
    return Options(scale=spec.scale, clients=spec.clients, protocol=spec.protocol, shared_buffers=f"{sb_bytes // 1024}kB",
                   shared_buffers_bytes=sb_bytes, settings=spec.settings or {}, modes=_modes(recipe, spec.modes, source),
                   user=spec.user, bindir=spec.bindir)


def _modes(recipe, modes_in: dict, source: str) -> list:
    """One :class:`Mode` per recipe test, from ``options.modes``; every test checked."""
    tests = {t.name: t for t in recipe.tests}
    for name in modes_in:
        if name not in tests:
            raise IolabError(f"names no test of the recipe (tests: {', '.join(tests)})",
                             context=f"{source}: options.modes.{name}")
    modes = []
    for index, test in enumerate(recipe.tests):
        tctx = f"{source}: tests[{index}] ({test.name})"
        if test.name not in modes_in:
            raise IolabError("has no entry in options.modes (synchronous_commit, fsync)", context=tctx)
        _check_test(test, tctx)
        runtime = test.runtime or recipe.runtime
        if not runtime:
            raise IolabError("pgbench needs a duration (-T): set defaults.runtime or --runtime", context=tctx)
        mode = modes_in[test.name]
        modes.append(Mode(test=test.name, synchronous_commit=mode.synchronous_commit, fsync=mode.fsync,
                          runtime=float(runtime)))
    return modes


def _check_test(test, ctx: str) -> None:
    if test.rw != ["randrw"]:
        raise IolabError(f"rw must be randrw (TPC-B's 8 KiB random heap I/O), got {test.rw!r}", context=f"{ctx}.rw")
    if test.bs is not None and parse_size(test.bs) != 8192:
        raise IolabError(f"bs must be 8k (PostgreSQL's page), got {test.bs!r}", context=f"{ctx}.bs")
    pristine = type(test)(name=test.name)  # every field the recipe left at the loader's default
    ignored = [f.name for f in dataclasses.fields(test)
               if f.name not in TEST_FIELDS_OK and getattr(test, f.name) != getattr(pristine, f.name)]
    if ignored:
        raise IolabError(f"{ignored[0]!r} means nothing to pgbench (clients are options.clients)",
                         context=f"{ctx}.{ignored[0]}")


def describe_tests(recipe) -> list[str]:
    """The recipe's tests as pgbench runs them (not fio jobs) for ``iolab recipes``: the load, then per
    test (mode) its server settings, the client counts and the duration of each."""
    options = parse_options(recipe)
    clients = ", ".join(str(c) for c in options.clients)
    lines = [f"pgbench -i -s {options.scale} (the load), then per test pgbench's TPC-B-like transaction at "
             f"{clients} {'client' if len(options.clients) == 1 else 'clients'} ({options.protocol} protocol, "
             f"shared_buffers {human_size(options.shared_buffers_bytes)}):"]
    width = max((len(m.test) for m in options.modes), default=0)
    for mode in options.modes:
        settings = " ".join(f"{k}={v}" for k, v in mode.settings.items())
        lines.append(f"  {mode.test:<{width}}  {settings}, {mode.runtime:g} s per client count")
    return lines
