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
from pathlib import Path

from iolab.core import paths
from iolab.core import schema, yamlfile
from iolab.core.errors import IolabError
from iolab.core.units import fio_size, parse_size
from iolab.engine import recipe_schema
from iolab.engine.jobfile import rules as jobrules
from iolab.engine.runoptions import RunOptions
from iolab.engine.recipemix import MIX_RATIOS, MIXED_RW, direction_rank, parse_mix, with_mixes  # noqa: F401

#: The page cache a buffered test may use when nobody says otherwise (the articles' mem=512M).
DEFAULT_MEM_LIMIT = 512 * 1024**2


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
    ioengine: dict = dataclasses.field(default_factory=dict)  # preferred engine (recipe_schema.EnginePreference)
    size_declared: bool = False  # --size was given (the flash recipes' default amount is then not the capacity)

    # -- values after defaults and overrides --------------------------------------
    @property
    def size(self) -> int:
        return self.defaults["size"]

    @property
    def runtime(self) -> float | None:
        return self.defaults.get("runtime")

    @property
    def repeat(self) -> int:
        """Passes per test at least."""
        return self.defaults.get("repeat", 1)

    @property
    def max_repeat(self) -> int:
        """Passes per test at most, while the coefficient of variation stays above :attr:`cov_target`."""
        return self.defaults.get("max_repeat", self.repeat)

    @property
    def cov_target(self) -> float:
        """Repeats stop below this coefficient of variation."""
        return float(self.defaults.get("cov_target", 0.03))

    @property
    def pause(self) -> float:
        """Seconds between tests (CrystalDiskMark's interval), 0.0 for none."""
        return float(self.defaults.get("pause") or 0.0)

    @property
    def warmup(self) -> bool:
        """One unrecorded pass before each test's measured ones (CrystalDiskMark's "Preparing...")."""
        return bool(self.defaults.get("warmup"))

    @property
    def ramp_time(self) -> float:
        """Seconds fio runs each job before it measures, 0.0 for none."""
        return float(self.defaults.get("ramp_time") or 0.0)

    @property
    def mem_limit(self) -> int:
        """Bytes of page cache a buffered test may use (:data:`DEFAULT_MEM_LIMIT` unless set)."""
        return self.defaults.get("mem_limit", DEFAULT_MEM_LIMIT)

    @property
    def watchdog_margin(self) -> float | None:
        """Seconds a test may overrun its estimate before the watchdog stops it (None: the watchdog's own)."""
        margin = self.defaults.get("watchdog_margin")
        return float(margin) if margin else None

    @property
    def log_interval_ms(self) -> int | None:
        """``--log-interval``: milliseconds per sample of fio's bw/iops/lat logs, None: no logs."""
        return self.defaults.get("log_interval_ms") or None

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
        ratio = value if isinstance(value, int) and value in MIX_RATIOS else None  # RunOptions.mix: checked
        recipe.mix = ratio if ratio is not None else parse_mix(value, context=f"{self.name}: --mix")
        return recipe

    def with_overrides(self, *, size=None, runtime=None, repeat=None, isolation=None,
                       preset=None, mem_limit=None, tests=None) -> "Recipe":
        """A copy with these overrides (as ``--size`` ... give them) checked and applied: :meth:`with_options`."""
        return self.with_options(RunOptions(size=size, runtime=runtime, repeat=repeat, isolation=isolation,
                                            preset=preset, mem_limit=mem_limit, tests=tests))

    def with_options(self, options: RunOptions) -> "Recipe":
        """A copy with a run's options (:class:`~iolab.engine.runoptions.RunOptions`, already checked) applied."""
        recipe = copy.deepcopy(self)
        if options.mem_limit is not None:
            recipe.defaults["mem_limit"] = options.mem_limit
        if "size_mem_factor" in recipe.defaults and options.size is None:
            # e.g. cachecheck: a file 4x the memory the page cache may use
            recipe.defaults["size"] = int(recipe.defaults["size_mem_factor"] * recipe.mem_limit)
        preset, tests = options.preset, options.tests
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
            recipe.tests = self.pick_tests(list(tests), order="given", context="--tests")
            recipe.selected = True
        if recipe.mix is not None:
            recipe.tests = with_mixes(recipe.tests, self.tests, recipe.mix, f"{recipe.name}: --mix")
        if options.size is not None:
            recipe.defaults["size"], recipe.size_declared = options.size, True
        if options.runtime is not None:
            recipe.defaults["runtime"] = options.runtime
        if options.repeat is not None:
            recipe.defaults["repeat"] = options.repeat
            # an explicit --repeat N means exactly N passes
            recipe.defaults["max_repeat"] = options.repeat
        if options.isolation is not None:
            recipe.isolation = options.isolation
        if options.pause is not None:  # recorded in the manifest
            recipe.defaults["pause"] = options.pause
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
                        steps.append(Step(id=step_id, test=name, rw=rw, options=options,
                                          sweep=test.name if swept else None, cache=test.cache,
                                          direct=jobrules.is_direct(self.fio, options, source=f"{self.name}: {name}")))
        if self.order == "directions":  # all reads, then all writes, then the mixes (stable within each)
            steps.sort(key=direction_rank)
        return steps

    def to_dict(self) -> dict:
        """The recipe as it was run (for recipe.yaml in the run directory)."""
        data = {"name": self.name, "description": self.description}
        for key in ("engine", "options", "about", "tool", "statistic", "isolation", "filesystem", "notes", "preset",
                    "mix", "ioengine"):
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


def parse_recipe(data, source: str) -> Recipe:
    """Validate a recipe mapping against :class:`~iolab.engine.recipe_schema.RecipeFile`; every error
    names ``source`` and the field."""
    if not isinstance(data, dict):
        raise IolabError("a recipe must be a YAML mapping", context=source)
    spec = schema.validate(recipe_schema.RecipeFile, data, source)
    if spec.options and spec.engine == "fio":
        raise IolabError("engine options need an engine: set `engine:` (fio options go under `fio:`)",
                         context=f"{source}: options")
    tests, seen = [], set()
    for index, test in enumerate(spec.tests):
        if test.name in seen:
            raise IolabError("duplicate test name", context=f"{source}: tests[{index}] ({test.name})")
        seen.add(test.name)
        # bs written back in fio's own notation: fio reads "4KiB" as 4000 bytes
        tests.append(Test(name=test.name, description=str(test.description), rw=test.rw,
                          bs=fio_size(test.bs) if test.bs else None, iodepth=test.iodepth, numjobs=test.numjobs,
                          rwmixread=test.rwmixread, fio=test.fio or {}, runtime=test.runtime, size=test.size,
                          cache=test.cache))
    for preset, names in (spec.presets or {}).items():
        if not names:
            raise IolabError("must be a non-empty list of test names", context=f"{source}: presets.{preset}")
        unknown = [n for n in names if n not in seen]
        if unknown:
            raise IolabError(f"names unknown test {unknown[0]!r}", context=f"{source}: presets.{preset}")
    for preset in (spec.ioengine.presets or []) if spec.ioengine else []:
        if preset not in (spec.presets or {}):
            raise IolabError(f"names unknown preset {preset!r}", context=f"{source}: ioengine.presets")
    return Recipe(name=spec.name, description=spec.description, tests=tests, about=spec.about, tool=spec.tool,
                  statistic=spec.statistic, isolation=spec.isolation,
                  defaults=_defaults(spec.defaults or recipe_schema.Defaults(), source), fio=spec.fio or {},
                  filesystem=spec.filesystem, output_format=spec.output_format, notes=spec.notes,
                  presets=spec.presets or {}, engine=spec.engine, options=spec.options or {}, source=source,
                  order=spec.order, ioengine=spec.ioengine.model_dump(exclude_none=True) if spec.ioengine else {})


def _defaults(given: recipe_schema.Defaults, source: str) -> dict:
    """The recipe's ``defaults:`` as the runner reads them: seconds and bytes, unset ones filled in."""
    defaults = {"size": given.size, "repeat": given.repeat, "ramp_time": given.ramp_time or 0.0,
                "pause": given.pause or 0.0, "warmup": given.warmup, "runtime": given.runtime,
                "max_repeat": given.max_repeat or given.repeat, "cov_target": float(given.cov_target)}
    if defaults["max_repeat"] < defaults["repeat"]:
        raise IolabError(f"must be >= repeat ({defaults['repeat']})", context=f"{source}: defaults.max_repeat")
    for key in ("size_mem_factor", "mem_limit", "watchdog_margin"):
        if getattr(given, key) is not None:
            defaults[key] = getattr(given, key)
    return defaults


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
