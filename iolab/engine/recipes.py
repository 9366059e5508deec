"""Recipes: declarative benchmark suites in YAML, validated on load.

A recipe file (``recipes/<name>.yaml``)::

    name: quick
    description: one line for `iolab recipes`
    about: |                     # longer text a report can print
      ...
    tool: CrystalDiskMark 8      # the tool it emulates
    statistic: best              # how repeats combine for that tool: best | mean
    isolation: direct            # default cache isolation: cgroup | hugepages | direct | none
    defaults: {size: 1G, runtime: 5, repeat: 5, ramp_time: 0, pause: 5, warmup: true}
    fio: {ioengine: libaio, direct: 1}     # [global] options for every test
    tests:
      - name: SEQ1M-Q8T1
        rw: [read, write]        # one fio job per direction, run in this order
        bs: 1M
        iodepth: 8

Each test expands to one :class:`Step` per ``rw`` value; a step is one fio job
file. Errors name the file and the field (``recipes/x.yaml: tests[2].bs: ...``).
"""
from __future__ import annotations

import copy
import dataclasses
import os
import re
from pathlib import Path

from iolab.core import paths
from iolab.core import yamlfile
from iolab.core.errors import IolabError
from iolab.core.yamlfile import check_keys
from iolab.core.units import fio_size, human_size, parse_seconds, parse_size
from iolab.engine.recipemix import MIX_RATIOS, MIXED_RW, direction_rank, parse_mix, with_mixes  # noqa: F401

ISOLATION_MODES = ("cgroup", "hugepages", "direct", "none")
#: The page cache a buffered test may use when nobody says otherwise (the articles' mem=512M).
DEFAULT_MEM_LIMIT = 512 * 1024**2
STATISTICS = ("best", "mean", "median")
RECIPE_KEYS = {"name", "description", "about", "tool", "statistic", "isolation", "defaults",
               "fio", "tests", "filesystem", "output_format", "notes", "presets", "engine", "options", "order"}
#: The order of a recipe's steps: each test's directions in turn ("tests"), or all reads, then all
#: writes, then all mixes ("directions": CrystalDiskMark's and KDiskMark's order).
ORDERS = ("tests", "directions")
#: What runs a recipe's tests: fio job files, or an engine of its own (iolab.engines).
ENGINES = ("fio", "pgbench", "bonnie", "hdparm", "gnomedisks", "sqlbench", "sustained", "steadystate")
REQUIRED_KEYS = ("name", "description", "tests")
DEFAULT_KEYS = {"size", "size_mem_factor", "runtime", "repeat", "max_repeat", "cov_target", "ramp_time", "pause", "warmup",
                "mem_limit", "watchdog_margin"}
#: Below this a memory limit starves fio itself (it hung in D state under 10M) instead of the page cache.
MIN_MEM_LIMIT = 32 * 1024**2
TEST_KEYS = {"name", "description", "rw", "bs", "iodepth", "numjobs", "rwmixread", "fio",
             "runtime", "size", "cache"}
#: cache state a test starts from: dropped by the isolation (default), always cold, or left warm
CACHE_STATES = ("isolation", "cold", "warm")
RW_VALUES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim",
             "randtrim", "trimwrite")
#: fio options iolab sets itself; a recipe that sets them would be ignored silently.
RESERVED_FIO = {"filename", "directory", "output", "output-format", "name"}


def recipes_dir() -> Path:
    """Where the built-in recipes live (``IOLAB_RECIPES`` overrides)."""
    return paths.shipped("recipes")


@dataclasses.dataclass
class Test:
    name: str
    description: str = ""
    rw: list = dataclasses.field(default_factory=list)
    bs: str | None = None
    iodepth: list = dataclasses.field(default_factory=lambda: [1])   # several values: a sweep
    numjobs: list = dataclasses.field(default_factory=lambda: [1])
    rwmixread: int | None = None
    fio: dict = dataclasses.field(default_factory=dict)
    runtime: float | None = None
    size: int | None = None
    cache: str = "isolation"


@dataclasses.dataclass
class Step:
    """One fio job file: a test in one direction (or one mix)."""
    id: str          # file-name stem: test name, plus "-<rw>" when the test has several
    test: str        # the test name in results (a sweep point is named <test>-Q<depth>T<jobs>)
    rw: str
    options: dict    # fio options of the job section, in order
    sweep: str | None = None  # the recipe test a sweep point belongs to
    cache: str = "isolation"  # see CACHE_STATES
    direct: bool = False      # O_DIRECT, from the job's or the recipe's fio options

    @property
    def buffered(self) -> bool:
        return not self.direct


@dataclasses.dataclass
class Recipe:
    name: str
    description: str
    tests: list
    about: str = ""
    tool: str = ""
    statistic: str = "best"
    isolation: str = "direct"
    defaults: dict = dataclasses.field(default_factory=dict)
    fio: dict = dataclasses.field(default_factory=dict)
    filesystem: str | None = None
    output_format: str = "json"
    notes: str = ""
    presets: dict = dataclasses.field(default_factory=dict)
    engine: str = "fio"
    options: dict = dataclasses.field(default_factory=dict)  # engine-specific settings, checked by the engine
    preset: str | None = None  # the preset chosen, when the recipe has presets
    selected: bool = False     # tests were chosen (a preset or --tests): no default preset on top
    source: str = ""          # file it was loaded from
    jobfile: str | None = None  # text of a plain .fio job file run as is
    order: str = "tests"       # see ORDERS
    mix: int | None = None     # --mix: each chosen test's mixed counterpart (MIX-<test>) runs, this % reads

    # -- values after defaults and overrides --------------------------------------
    @property
    def size(self) -> int:
        return self.defaults["size"]

    @property
    def runtime(self) -> float | None:
        return self.defaults.get("runtime")

    @property
    def repeat(self) -> int:
        return self.defaults.get("repeat", 1)

    @property
    def buffered(self) -> bool:
        return any(step.buffered for step in self.steps())

    @property
    def direct_ok(self) -> bool:
        """Every test could run with O_DIRECT (block sizes in whole 512-byte sectors)."""
        if self.jobfile is not None:
            return False
        for step in self.steps():
            bs = step.options.get("bs") or self.fio.get("bs") or "4k"
            if any(parse_size(part) % 512 for part in str(bs).split(",") if part):
                return False
        return True

    def with_mix(self, value) -> "Recipe":
        """A copy that also runs the mixed rows at ``value`` (``--mix R70``), after the reads and writes.

        Only the ratio is checked and kept here; :meth:`with_overrides` adds each chosen
        test's ``MIX-<test>`` counterpart (or re-rates the ones a preset chose).
        """
        if self.jobfile is not None:
            raise IolabError("a plain fio job file runs as is; it has no tests to mix", context=f"{self.name}: --mix")
        recipe = copy.deepcopy(self)
        recipe.mix = parse_mix(value, context=f"{self.name}: --mix")
        return recipe

    def with_overrides(self, *, size=None, runtime=None, repeat=None, isolation=None,
                       preset=None, mem_limit=None, tests=None) -> "Recipe":
        """A copy with command-line overrides applied and validated."""
        recipe = copy.deepcopy(self)
        ctx = "command line"
        if mem_limit is not None:
            recipe.defaults["mem_limit"] = _mem_limit(mem_limit, f"{ctx}: --mem-limit")
        if "size_mem_factor" in recipe.defaults and size is None:
            # e.g. cachecheck: a file 4x the memory the page cache may use
            limit = recipe.defaults.get("mem_limit", DEFAULT_MEM_LIMIT)
            recipe.defaults["size"] = int(recipe.defaults["size_mem_factor"] * limit)
        if preset is None and not recipe.selected and not tests and "default" in recipe.presets:
            preset = "default"
        if preset is not None:
            if preset not in recipe.presets:
                known = ", ".join(sorted(recipe.presets)) or "none"
                raise IolabError(f"unknown preset {preset!r} (known: {known})", context=f"{recipe.name}: --preset")
            keep = recipe.presets[preset]
            by_name = {t.name: t for t in recipe.tests}
            recipe.tests = [by_name[name] for name in keep]
            recipe.preset, recipe.selected = preset, True
        if tests:
            # --tests picks among all the recipe's tests, in the order given (a preset does not limit it)
            recipe.tests = self.pick_tests(tests, order="given", context="--tests")
            recipe.selected = True
        if recipe.mix is not None:
            recipe.tests = with_mixes(recipe.tests, self.tests, recipe.mix, f"{recipe.name}: --mix")
        if size is not None:
            recipe.defaults["size"] = parse_size(size, context=f"{ctx}: --size")
        if runtime is not None:
            recipe.defaults["runtime"] = parse_seconds(runtime, context=f"{ctx}: --runtime")
        if repeat is not None:
            if int(repeat) < 1:
                raise IolabError(f"must be at least 1, got {repeat}", context=f"{ctx}: --repeat")
            recipe.defaults["repeat"] = int(repeat)
            # an explicit --repeat N means exactly N passes
            recipe.defaults["max_repeat"] = int(repeat)
        if isolation is not None:
            recipe.isolation = _choice(isolation, ISOLATION_MODES, f"{ctx}: --isolation")
        return recipe

    def pick_tests(self, names, *, order: str = "recipe", context: str = "tests", subject: str | None = None) -> list:
        """This recipe's tests named in ``names`` (a name or a list; blank names ignored; none: all).

        ``order`` ``"recipe"`` keeps the recipe's order, ``"given"`` the order of
        ``names``. An unknown name or a plain job file (no tests to choose) raises
        :class:`IolabError` naming ``context`` (after the recipe's name, or alone
        when ``subject`` says whose tests they are) and the tests there are.
        """
        wanted = [names] if isinstance(names, str) else [str(n) for n in (names or [])]
        wanted = [n for n in wanted if n]
        if not wanted:
            return list(self.tests)
        if self.jobfile is not None:
            raise IolabError("a plain fio job file runs as a whole; it has no tests to choose",
                             context=f"{self.name}: {context}")
        by_name = {t.name: t for t in self.tests}
        unknown = [n for n in wanted if n not in by_name]
        if unknown:
            hint = "its tests: " + ", ".join(by_name)
            if subject:
                raise IolabError(f"{subject} has no test {unknown[0]!r}", context=context, hint=hint)
            raise IolabError(f"no test {unknown[0]!r}", context=f"{self.name}: {context}", hint=hint)
        if order == "given":
            return [by_name[n] for n in wanted]
        return [t for t in self.tests if t.name in wanted]

    def select_tests(self, names=None, *, preset: str | None = None) -> "Recipe":
        """A copy with ``preset`` applied first (as ``--preset``), then only ``names`` kept in the recipe's order.

        The result has its presets resolved (a later :meth:`with_overrides` keeps
        exactly these tests), so the run's ``recipe.yaml`` records what ran.
        """
        recipe = self.with_overrides(preset=preset or None)
        where = f"recipe {recipe.name}" + (f" (preset {recipe.preset})" if recipe.preset else "")
        recipe.tests = recipe.pick_tests(names, order="recipe", context="tests", subject=where)
        recipe.presets = {}  # already applied: a later with_overrides() must not re-apply "default"
        return recipe

    def steps(self) -> list:
        """The fio jobs this recipe runs, in order."""
        if self.jobfile is not None:
            return [Step(id=self.name, test=self.name, rw="", options={})]
        steps = []
        for test in self.tests:
            swept = len(test.iodepth) > 1 or len(test.numjobs) > 1
            for rw in test.rw:
                for numjobs in test.numjobs:
                    for iodepth in test.iodepth:
                        name = f"{test.name}-Q{iodepth}T{numjobs}" if swept else test.name
                        options = {"rw": rw}
                        if test.bs:
                            options["bs"] = test.bs
                        options["iodepth"] = iodepth
                        # no group_reporting: fio then reports each client, iolab sums them
                        # (exactly, from json+ histograms) and keeps Jain's fairness index
                        options["numjobs"] = numjobs
                        if test.rwmixread is not None and rw in ("rw", "readwrite", "randrw"):
                            options["rwmixread"] = test.rwmixread
                        if test.runtime or self.runtime:
                            options["runtime"] = _fmt_seconds(test.runtime or self.runtime)
                            options["time_based"] = 1
                        if test.size:
                            options["size"] = fio_size(test.size)
                        options.update(test.fio)
                        step_id = name if len(test.rw) == 1 else f"{name}-{rw}"
                        direct = str(options.get("direct", self.fio.get("direct", 0))).lower()
                        steps.append(Step(id=step_id, test=name, rw=rw, options=options,
                                          sweep=test.name if swept else None, cache=test.cache,
                                          direct=direct not in ("0", "false", "")))
        if self.order == "directions":  # all reads, then all writes, then the mixes (stable within each)
            steps.sort(key=direction_rank)
        return steps

    def to_dict(self) -> dict:
        """The recipe as it was run (for recipe.yaml in the run directory)."""
        data = {"name": self.name, "description": self.description}
        for key in ("engine", "options", "about", "tool", "statistic", "isolation", "filesystem", "notes", "preset",
                    "mix"):
            value = getattr(self, key)
            if value:
                data[key] = value
        data["output_format"] = self.output_format
        if self.order != "tests":
            data["order"] = self.order
        data["defaults"] = dict(self.defaults)
        if self.fio:
            data["fio"] = dict(self.fio)
        tests = []
        for test in self.tests:
            entry = {k: v for k, v in dataclasses.asdict(test).items() if v not in (None, {}, "")}
            tests.append(entry)
        data["tests"] = tests
        if self.jobfile is not None:
            data["jobfile"] = self.jobfile
        data["source"] = self.source
        return data


def _fmt_seconds(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{int(seconds * 1000)}ms"


def _mem_limit(value, context: str) -> int:
    """A memory limit in bytes, refused below :data:`MIN_MEM_LIMIT`."""
    limit = parse_size(value, context=context)
    if limit < MIN_MEM_LIMIT:
        raise IolabError(f"{value} is below the minimum of {human_size(MIN_MEM_LIMIT)}: under a smaller limit "
                         "fio itself runs out of memory (or hangs) instead of the page cache", context=context)
    return limit


def _choice(value, allowed, ctx) -> str:
    if value not in allowed:
        raise IolabError(f"must be one of {', '.join(allowed)}, got {value!r}", context=ctx)
    return value


def _positive_int(value, ctx) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise IolabError(f"must be a whole number >= 1, got {value!r}", context=ctx)
    return value


def _int_list(value, ctx) -> list:
    """One whole number, or a list of them (a sweep)."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise IolabError("must not be an empty list", context=ctx)
    return [_positive_int(v, ctx) for v in values]


def parse_recipe(data, source: str) -> Recipe:
    """Validate a recipe mapping; every error names ``source`` and the field."""
    if not isinstance(data, dict):
        raise IolabError("a recipe must be a YAML mapping", context=source)
    check_keys(data, RECIPE_KEYS, source)
    for key in REQUIRED_KEYS:
        if key not in data:
            raise IolabError(f"missing required field {key!r}", context=source)
    for key in ("name", "description", "about", "tool", "notes"):
        if key in data and not isinstance(data[key], str):
            raise IolabError(f"must be text, got {data[key]!r}", context=f"{source}: {key}")
    statistic = _choice(data.get("statistic", "best"), STATISTICS, f"{source}: statistic")
    isolation = _choice(data.get("isolation", "direct"), ISOLATION_MODES, f"{source}: isolation")
    output_format = _choice(data.get("output_format", "json"), ("json", "json+"), f"{source}: output_format")
    engine = _choice(data.get("engine", "fio"), ENGINES, f"{source}: engine")
    engine_options = data.get("options") or {}
    if not isinstance(engine_options, dict):
        raise IolabError("must be a mapping", context=f"{source}: options")
    if engine_options and engine == "fio":
        raise IolabError("engine options need an engine: set `engine:` (fio options go under `fio:`)",
                         context=f"{source}: options")
    filesystem = data.get("filesystem")
    if filesystem is not None:
        _choice(filesystem, ("ext4", "xfs"), f"{source}: filesystem")

    defaults = _parse_defaults(data.get("defaults") or {}, source)
    fio_global = _fio_options(data.get("fio") or {}, f"{source}: fio")
    tests, seen = [], set()
    for index, ctx, raw in yamlfile.named_items(data["tests"], f"{source}: tests", what="test",
                                                  allowed=TEST_KEYS):
        name = str(raw["name"])
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$", name):
            raise IolabError(f"test names become file names: use letters, digits and . _ + - only, got {name!r}",
                             context=f"{ctx}.name")
        if name in seen:
            raise IolabError("duplicate test name", context=f"{source}: tests[{index}] ({name})")
        seen.add(name)
        tests.append(_parse_test(name, raw, f"{source}: tests[{index}] ({name})"))
    presets = _parse_presets(data.get("presets") or {}, seen, source)
    order = _choice(data.get("order", "tests"), ORDERS, f"{source}: order")

    return Recipe(name=data["name"], description=data["description"], tests=tests,
                  about=data.get("about", ""), tool=data.get("tool", ""), statistic=statistic,
                  isolation=isolation, defaults=defaults, fio=fio_global, filesystem=filesystem,
                  output_format=output_format, notes=data.get("notes", ""), presets=presets,
                  engine=engine, options=engine_options, source=source, order=order)


def _parse_defaults(defaults_in, source: str) -> dict:
    """The recipe's ``defaults:`` block, every value checked and in seconds or bytes."""
    if not isinstance(defaults_in, dict):
        raise IolabError("must be a mapping", context=f"{source}: defaults")
    check_keys(defaults_in, DEFAULT_KEYS, f"{source}: defaults")
    defaults = {"size": parse_size(defaults_in.get("size", "1G"), context=f"{source}: defaults.size"),
                "repeat": _positive_int(defaults_in.get("repeat", 1), f"{source}: defaults.repeat"),
                "ramp_time": 0.0, "pause": 0.0, "warmup": False, "runtime": None}
    for key in ("runtime", "ramp_time", "pause"):
        value = defaults_in.get(key)
        if value not in (None, 0):
            defaults[key] = parse_seconds(value, context=f"{source}: defaults.{key}")
    defaults["max_repeat"] = _positive_int(defaults_in.get("max_repeat", defaults["repeat"]),
                                           f"{source}: defaults.max_repeat")
    if defaults["max_repeat"] < defaults["repeat"]:
        raise IolabError(f"must be >= repeat ({defaults['repeat']})", context=f"{source}: defaults.max_repeat")
    cov_target = defaults_in.get("cov_target", 0.03)
    if isinstance(cov_target, bool) or not isinstance(cov_target, (int, float)) or not 0 < cov_target < 1:
        raise IolabError(f"must be a fraction between 0 and 1 (0.03 = 3%), got {cov_target!r}",
                         context=f"{source}: defaults.cov_target")
    defaults["cov_target"] = float(cov_target)
    if "warmup" in defaults_in:
        if not isinstance(defaults_in["warmup"], bool):
            raise IolabError(f"must be true or false, got {defaults_in['warmup']!r}", context=f"{source}: defaults.warmup")
        defaults["warmup"] = defaults_in["warmup"]
    if "size_mem_factor" in defaults_in:
        factor = defaults_in["size_mem_factor"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
            raise IolabError(f"must be a positive number, got {factor!r}", context=f"{source}: defaults.size_mem_factor")
        defaults["size_mem_factor"] = float(factor)
    if "mem_limit" in defaults_in:
        defaults["mem_limit"] = _mem_limit(defaults_in["mem_limit"], f"{source}: defaults.mem_limit")
    if "watchdog_margin" in defaults_in:  # seconds a test may overrun its estimate before it is stopped
        defaults["watchdog_margin"] = parse_seconds(defaults_in["watchdog_margin"],
                                                    context=f"{source}: defaults.watchdog_margin")
    return defaults


def _parse_test(name: str, raw: dict, ctx: str) -> Test:
    """One entry of ``tests:`` (its name already checked); errors name the test by index and name."""
    if "rw" not in raw:
        raise IolabError("missing required field 'rw'", context=ctx)
    rws = raw["rw"] if isinstance(raw["rw"], list) else [raw["rw"]]
    for rw in rws:
        _choice(rw, RW_VALUES, f"{ctx}.rw")
    test = Test(name=name, description=str(raw.get("description", "")), rw=list(rws))
    if "bs" in raw:
        # written back in fio's own notation: fio reads "4KiB" as 4000 bytes
        test.bs = fio_size(parse_size(raw["bs"], context=f"{ctx}.bs"))
    test.iodepth = _int_list(raw.get("iodepth", 1), f"{ctx}.iodepth")
    test.numjobs = _int_list(raw.get("numjobs", 1), f"{ctx}.numjobs")
    if "rwmixread" in raw:
        mix = raw["rwmixread"]
        if isinstance(mix, bool) or not isinstance(mix, int) or not 0 <= mix <= 100:
            raise IolabError(f"must be a percentage 0-100, got {mix!r}", context=f"{ctx}.rwmixread")
        test.rwmixread = mix
    if "runtime" in raw:
        test.runtime = parse_seconds(raw["runtime"], context=f"{ctx}.runtime")
    if "size" in raw:
        test.size = parse_size(raw["size"], context=f"{ctx}.size")
    test.cache = _choice(raw.get("cache", "isolation"), CACHE_STATES, f"{ctx}.cache")
    test.fio = _fio_options(raw.get("fio") or {}, f"{ctx}.fio")
    return test


def _parse_presets(presets, known: set, source: str) -> dict:
    """``presets:``: name -> non-empty list of the recipe's test names."""
    if not isinstance(presets, dict):
        raise IolabError("must be a mapping of preset name to test names", context=f"{source}: presets")
    for preset, names in presets.items():
        if not isinstance(names, list) or not names:
            raise IolabError("must be a non-empty list of test names", context=f"{source}: presets.{preset}")
        for test_name in names:
            if test_name not in known:
                raise IolabError(f"names unknown test {test_name!r}", context=f"{source}: presets.{preset}")
    return presets


def _fio_options(options, ctx) -> dict:
    if not isinstance(options, dict):
        raise IolabError("must be a mapping of fio options", context=ctx)
    for key, value in options.items():
        if key in RESERVED_FIO:
            raise IolabError(f"{key!r} is set by iolab (use --target)", context=f"{ctx}.{key}")
        if isinstance(value, (dict, list)):
            raise IolabError(f"fio option values must be scalars, got {value!r}", context=f"{ctx}.{key}")
    return {str(k): v for k, v in options.items()}


def load_file(path: str | os.PathLike) -> Recipe:
    """Load a recipe YAML file or a plain fio job file (``.fio``)."""
    path = Path(path)
    text = yamlfile.read_text(path, what="recipe file")
    if path.suffix == ".fio":
        return jobfile_recipe(path, text)
    data = yamlfile.parse(text, str(path))
    return parse_recipe(data, str(path))


def jobfile_recipe(path: Path, text: str) -> Recipe:
    """A plain fio job file run as is: one step, the job file's own jobs."""
    recipe = Recipe(name=path.stem, description=f"fio job file {path.name}, run as is",
                    tests=[], tool="fio", isolation="direct", source=str(path), jobfile=text,
                    defaults={"size": 0, "repeat": 1, "runtime": None, "ramp_time": 0.0,
                              "pause": 0.0, "warmup": False})
    return recipe


def available() -> dict:
    """Built-in recipe names -> file paths."""
    directory = recipes_dir()
    if not directory.is_dir():
        return {}
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def load(name_or_path: str) -> Recipe:
    """A built-in recipe by name, or a recipe / .fio file by path."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml", ".fio") or os.sep in name_or_path:
        if not candidate.exists():
            raise IolabError("no such recipe file", context=name_or_path)
        return load_file(candidate)
    known = available()
    if name_or_path not in known:
        raise IolabError(f"unknown recipe {name_or_path!r}", context="recipe",
                         hint=f"known recipes: {', '.join(known) or 'none'}; see `iolab recipes`")
    return load_file(known[name_or_path])
