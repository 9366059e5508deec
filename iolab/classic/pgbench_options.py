"""A pgbench recipe's ``options`` and tests, checked (:func:`parse_options`); see :mod:`iolab.classic.pgbench`."""
from __future__ import annotations

import dataclasses

from iolab.classic.pgcluster import RESERVED_SETTINGS, SETTING_NAME
from iolab.classic.dbserver import recipe_options
from iolab.core.errors import IolabError
from iolab.core.units import human_size, parse_size

DEFAULT_CLIENTS = (1, 2, 4, 8)
DEFAULT_SCALE = 10
DEFAULT_SHARED_BUFFERS = "128MB"
PROTOCOLS = ("simple", "extended", "prepared")
OPTION_KEYS = {"scale", "clients", "protocol", "shared_buffers", "settings", "modes", "user", "bindir"}
MODE_KEYS = ("synchronous_commit", "fsync")
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


def _onoff(value, ctx: str, allowed=("on", "off")) -> str:
    if isinstance(value, bool):  # YAML 1.1 reads on/off as booleans
        value = "on" if value else "off"
    value = str(value).lower()
    if value not in allowed:
        raise IolabError(f"must be one of {', '.join(allowed)}, got {value!r}", context=ctx)
    return value


def parse_options(recipe, *, mem_limit: int | None = None) -> Options:
    """Check a pgbench recipe's ``options`` and tests; errors name the file and the field."""
    source, ctx, data = recipe_options(recipe, OPTION_KEYS)
    scale = data.get("scale", DEFAULT_SCALE)
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise IolabError(f"must be a whole number >= 1, got {scale!r}", context=f"{ctx}.scale")
    clients = data.get("clients", list(DEFAULT_CLIENTS))
    if not isinstance(clients, list) or not clients or any(
            isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in clients):
        raise IolabError(f"must be a non-empty list of whole numbers >= 1, got {clients!r}", context=f"{ctx}.clients")
    if len(set(clients)) != len(clients):
        raise IolabError(f"lists a client count twice: {clients!r}", context=f"{ctx}.clients")
    protocol = data.get("protocol", "simple")
    if protocol not in PROTOCOLS:
        raise IolabError(f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}", context=f"{ctx}.protocol")
    shared_buffers = str(data.get("shared_buffers", DEFAULT_SHARED_BUFFERS))
    sb_bytes, sb_setting, settings = _server_settings(data, shared_buffers, recipe, mem_limit, ctx)
    for key in ("user", "bindir"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise IolabError(f"must be text, got {data[key]!r}", context=f"{ctx}.{key}")
    modes = _modes(recipe, data, source, ctx)
    return Options(scale=scale, clients=list(clients), protocol=protocol, shared_buffers=sb_setting,
                   shared_buffers_bytes=sb_bytes, settings=settings, modes=modes, user=data.get("user"),
                   bindir=data.get("bindir"))


def _server_settings(data: dict, shared_buffers: str, recipe, mem_limit, ctx: str) -> tuple[int, str, dict]:
    """shared_buffers (bytes, and as PostgreSQL reads it) and the other postgresql.conf settings, checked."""
    sb_bytes = parse_size(shared_buffers, context=f"{ctx}.shared_buffers")
    if sb_bytes < 1024**2:
        raise IolabError(f"must be at least 1 MiB, got {shared_buffers!r}", context=f"{ctx}.shared_buffers")
    if mem_limit and recipe.isolation == "cgroup" and sb_bytes > mem_limit // 2:
        raise IolabError(f"{shared_buffers} leaves less than half of the {human_size(mem_limit)} memory limit for "
                         "the page cache and the server's processes", context=f"{ctx}.shared_buffers",
                         hint="lower shared_buffers or raise --mem-limit")
    # PostgreSQL reads a bare number as 8 kB pages: give it the unit it understands
    sb_setting = f"{sb_bytes // 1024}kB"
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise IolabError("must be a mapping of postgresql.conf settings", context=f"{ctx}.settings")
    for name, value in settings.items():
        if not isinstance(name, str) or not SETTING_NAME.match(name):
            raise IolabError(f"not a setting name: {name!r}", context=f"{ctx}.settings")
        if name in RESERVED_SETTINGS:
            raise IolabError("is set by iolab (modes, shared_buffers, the socket)", context=f"{ctx}.settings.{name}")
        if isinstance(value, (dict, list)) or value is None:
            raise IolabError(f"must be a single value, got {value!r}", context=f"{ctx}.settings.{name}")
    settings = {name: (_onoff(v, f"{ctx}.settings.{name}") if isinstance(v, bool) else str(v))
                for name, v in settings.items()}
    return sb_bytes, sb_setting, settings


def _modes(recipe, data: dict, source: str, ctx: str) -> list:
    """One :class:`Mode` per recipe test, from ``options.modes``; every test checked."""
    modes_in = data.get("modes")
    if not isinstance(modes_in, dict) or not modes_in:
        raise IolabError("must map each test name to {synchronous_commit, fsync}", context=f"{ctx}.modes")
    tests = {t.name: t for t in recipe.tests}
    for name in modes_in:
        if name not in tests:
            raise IolabError(f"names no test of the recipe (tests: {', '.join(tests)})", context=f"{ctx}.modes.{name}")
    modes = []
    for index, test in enumerate(recipe.tests):
        tctx = f"{source}: tests[{index}] ({test.name})"
        if test.name not in modes_in:
            raise IolabError("has no entry in options.modes (synchronous_commit, fsync)", context=tctx)
        _check_test(test, tctx)
        entry = modes_in[test.name]
        mctx = f"{ctx}.modes.{test.name}"
        if not isinstance(entry, dict):
            raise IolabError("must be a mapping {synchronous_commit, fsync}", context=mctx)
        unknown = sorted(set(entry) - set(MODE_KEYS))
        if unknown:
            raise IolabError(f"unknown field {unknown[0]!r} (allowed: {', '.join(MODE_KEYS)}; other settings go in "
                             "options.settings)", context=mctx)
        missing = [k for k in MODE_KEYS if k not in entry]
        if missing:
            raise IolabError(f"missing field {missing[0]!r}", context=mctx)
        runtime = test.runtime or recipe.runtime
        if not runtime:
            raise IolabError("pgbench needs a duration (-T): set defaults.runtime or --runtime", context=tctx)
        modes.append(Mode(test=test.name,
                          synchronous_commit=_onoff(entry["synchronous_commit"], f"{mctx}.synchronous_commit",
                                                    SYNC_COMMIT_VALUES),
                          fsync=_onoff(entry["fsync"], f"{mctx}.fsync"),
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
