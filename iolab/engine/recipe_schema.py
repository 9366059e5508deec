"""The schema of a recipe file (``recipes/<name>.yaml``): what each field may hold.

:class:`RecipeFile` is what :func:`iolab.engine.recipes.parse_recipe` checks a recipe
against, and what ``schemas/recipe.schema.json`` (for editors) is written from.
What one field cannot say alone (test names unique, presets naming known tests,
engine options needing an engine) is checked by the loader after it.
"""
import re
from typing import Annotated, Any, Dict, List, Literal, Optional

from pydantic import AfterValidator, Field, WithJsonSchema, field_validator

from iolab.core.schema import SECONDS_PATTERN, Count, Scalar, Schema, Seconds, Size, Text, check, one_or_many
from iolab.core.units import human_size

ISOLATION_MODES = ("cgroup", "hugepages", "direct", "none")
STATISTICS = ("best", "mean", "median")
#: The order of a recipe's steps: each test's directions in turn ("tests"), or all reads, then all
#: writes, then all mixes ("directions": CrystalDiskMark's and KDiskMark's order).
ORDERS = ("tests", "directions")
#: What runs a recipe's tests: fio job files, or an engine of its own (iolab.engines).
ENGINES = ("fio", "pgbench", "bonnie", "hdparm", "gnomedisks", "sqlbench", "sustained", "steadystate")
#: cache state a test starts from: dropped by the isolation (default), always cold, or left warm
CACHE_STATES = ("isolation", "cold", "warm")
RW_VALUES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim",
             "randtrim", "trimwrite")
#: fio options iolab sets itself; a recipe that sets them would be ignored silently.
RESERVED_FIO = {"filename", "directory", "output", "output-format", "name"}
#: Below this a memory limit starves fio itself (it hung in D state under 10M) instead of the page cache.
MIN_MEM_LIMIT = 32 * 1024**2
TEST_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"

TestName = Annotated[Text, check(lambda name: re.match(TEST_NAME, name), "test names become file names: use "
                                 "letters, digits and . _ + - only, got {value!r}"), WithJsonSchema(
    {"type": ["string", "number"], "pattern": TEST_NAME, "description": "becomes a file name"})]
Isolation = Literal["cgroup", "hugepages", "direct", "none"]
RW = Literal["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite"]


def check_mem_limit(limit: int, written) -> int:
    """A memory limit in bytes, refused below :data:`MIN_MEM_LIMIT`."""
    if limit < MIN_MEM_LIMIT:
        raise ValueError(f"{written} is below the minimum of {human_size(MIN_MEM_LIMIT)}: under a smaller "
                         "limit fio itself runs out of memory (or hangs) instead of the page cache")
    return limit


def _fio_key(key: str) -> str:
    """A fio option a recipe may set: not one iolab sets itself."""
    if key in RESERVED_FIO:
        raise ValueError(f"{key!r} is set by iolab (use --target)")
    return key


FioOptions = Dict[Annotated[str, AfterValidator(_fio_key)], Scalar]


#: Seconds, where 0 (or nothing) means none.
SecondsOrNone = Annotated[Optional[Seconds], WithJsonSchema(
    {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": SECONDS_PATTERN}, {"type": "null"}]})]


class Defaults(Schema):
    """``defaults:``: sizes and durations every test gets, and how repeats end."""
    size: Size = Field(1024**3, description="the test file's size (default 1G)")
    size_mem_factor: Optional[float] = Field(None, gt=0, description="size = this x mem_limit")
    runtime: SecondsOrNone = Field(None, description="seconds per job (time_based); 0: none")
    repeat: Count = Field(1, description="passes over every test")
    max_repeat: Optional[Count] = Field(None, description="passes at most, until cov_target is met")
    cov_target: Annotated[float, check(lambda v: 0 < v < 1, "must be a fraction between 0 and 1 (0.03 = 3%), "
                                       "got {value!r}")] = Field(
        0.03, description="stop repeating below this coefficient of variation",
        json_schema_extra={"exclusiveMinimum": 0, "exclusiveMaximum": 1})
    ramp_time: SecondsOrNone = None
    pause: SecondsOrNone = Field(None, description="seconds between jobs")
    warmup: bool = False
    mem_limit: Optional[Size] = Field(None, description="the page cache a buffered test may use")
    watchdog_margin: Optional[Seconds] = Field(None, description="seconds a test may overrun its estimate")

    @field_validator("runtime", "ramp_time", "pause", mode="before")
    @classmethod
    def _zero_is_unset(cls, value):
        return None if value == 0 and not isinstance(value, bool) else value

    @field_validator("mem_limit")
    @classmethod
    def _floor(cls, value):
        return value if value is None else check_mem_limit(value, human_size(value))


class TestSpec(Schema):
    """One entry of ``tests:``: one fio job per ``rw`` value (and per iodepth x numjobs of a sweep)."""
    name: TestName
    description: Any = ""
    rw: one_or_many(RW)
    bs: Size = None
    iodepth: one_or_many(Count) = [1]
    numjobs: one_or_many(Count) = [1]
    rwmixread: int = Field(None, ge=0, le=100, description="percent reads of a mixed job")
    fio: Optional[FioOptions] = None
    runtime: Seconds = None
    size: Size = None
    cache: Literal["isolation", "cold", "warm"] = "isolation"


class EnginePreference(Schema):
    """``ioengine:``: the engine the tests run with where the kernel lets fio use it, instead of ``fio:``'s
    ``ioengine`` (which stays the fallback; the manifest records the choice and why)."""
    prefer: Literal["io_uring"] = Field(description="io_uring where the kernel offers it (probed before the run)")
    presets: Optional[List[Text]] = Field(None, description="only under these presets (none: always)")
    options: Optional[FioOptions] = Field(
        None, description="fio options of the preferred engine, set on each test that runs it (io_uring: "
                          "registerfiles, fixedbufs; fixedbufs only where the test's buffers fit RLIMIT_MEMLOCK)")
    depth_1: Literal["psync", "pvsync2"] = Field(
        None, description="the engine of tests that keep one I/O in flight (every iodepth 1) and name no engine: "
                          "there an asynchronous engine only adds a system call per I/O")


class RecipeFile(Schema):
    """A recipe: a declarative benchmark suite (see :mod:`iolab.engine.recipes`)."""
    name: str
    description: str = Field(description="one line for `iolab recipes`")
    about: str = ""
    tool: str = Field("", description="the tool it emulates, e.g. CrystalDiskMark 8")
    statistic: Literal["best", "mean", "median"] = "best"
    isolation: Isolation = "direct"
    defaults: Optional[Defaults] = None
    fio: Optional[FioOptions] = Field(None, description="[global] fio options for every test")
    tests: List[TestSpec] = Field(min_length=1)
    filesystem: Literal["ext4", "xfs"] = None
    output_format: Literal["json", "json+"] = "json"
    notes: str = ""
    presets: Optional[Dict[str, List[Text]]] = Field(None, description="preset name -> test names")
    engine: Literal["fio", "pgbench", "bonnie", "hdparm", "gnomedisks", "sqlbench", "sustained",
                    "steadystate"] = "fio"
    options: Optional[Dict[str, Any]] = Field(None, description="the engine's own settings")
    order: Literal["tests", "directions"] = "tests"
    ioengine: Optional[EnginePreference] = Field(None, description="an engine preferred over fio.ioengine")
