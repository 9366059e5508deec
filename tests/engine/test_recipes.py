"""Recipe loading and validation: every error names the file and the field."""
import textwrap

import pytest

from iolab.engine import recipes
from iolab.core.errors import IolabError

GOOD = """
name: t
description: a test recipe
defaults: {size: 32M, runtime: 1, repeat: 2}
fio: {ioengine: psync, direct: 1}
tests:
  - name: SEQ
    rw: [read, write]
    bs: 1M
  - name: MIX
    rw: randrw
    rwmixread: 70
    bs: 4k
    iodepth: 4
"""


def write(tmp_path, text, name="r.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_builtin_recipes_load_and_expand():
    known = recipes.available()
    assert {"quick", "crystaldiskmark"} <= set(known)
    for name in known:
        recipe = recipes.load(name).with_overrides()
        assert recipe.description and recipe.steps(), name
    quick = recipes.load("quick").with_overrides()
    assert [s.id for s in quick.steps()][:2] == ["SEQ1M-Q8T1-read", "SEQ1M-Q8T1-write"]
    assert len(quick.tests) == 4


def test_crystaldiskmark_default_preset_is_cdm8_default():
    cdm = recipes.load("crystaldiskmark").with_overrides()
    assert cdm.preset == "default"
    assert [t.name for t in cdm.tests] == ["SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1"]
    assert cdm.size == 1024**3 and cdm.repeat == 5 and cdm.runtime == 5
    assert cdm.defaults["warmup"] is True and cdm.defaults["pause"] == 5
    assert cdm.fio["direct"] == 1 and cdm.statistic == "best"
    q32 = [s for s in cdm.steps() if s.id == "RND4K-Q32T1-randread"][0]
    assert q32.options["iodepth"] == 32 and q32.options["bs"] == "4k" and q32.options["time_based"] == 1
    nvme = recipes.load("crystaldiskmark").with_overrides(preset="nvme")
    assert [t.name for t in nvme.tests] == ["SEQ1M-Q8T1", "SEQ128K-Q32T1", "RND4K-Q32T16", "RND4K-Q1T1"]
    t16 = [s for s in nvme.steps() if s.test == "RND4K-Q32T16"][0]
    assert t16.options["numjobs"] == 16 and "group_reporting" not in t16.options  # per-client entries


def test_good_recipe_and_overrides(tmp_path):
    recipe = recipes.load(str(write(tmp_path, GOOD)))
    assert recipe.size == 32 * 1024**2 and recipe.repeat == 2
    steps = recipe.steps()
    assert [s.id for s in steps] == ["SEQ-read", "SEQ-write", "MIX"]
    assert steps[2].options["rwmixread"] == 70
    over = recipe.with_overrides(size="8M", runtime="3", repeat=1, isolation="none")
    assert over.size == 8 * 1024**2 and over.runtime == 3 and over.isolation == "none"
    assert recipe.size == 32 * 1024**2  # the original is untouched


@pytest.mark.parametrize("text, field", [
    (GOOD.replace("defaults:", "defaultz:"), "unknown field 'defaultz'"),
    (GOOD.replace("bs: 1M", "bs: 1X"), "tests[0] (SEQ).bs"),
    (GOOD.replace("size: 32M", "size: lots"), "defaults.size"),
    (GOOD.replace("description: a test recipe\n", ""), "missing required field 'description'"),
    (GOOD.replace("rw: randrw", "rw: randreed"), "tests[1] (MIX).rw"),
    (GOOD.replace("iodepth: 4", "iodepth: 0"), "tests[1] (MIX).iodepth"),
    (GOOD.replace("rwmixread: 70", "rwmixread: 170"), "rwmixread"),
    (GOOD.replace("    bs: 4k\n", "    bs: 4k\n    colour: red\n"), "unknown field 'colour'"),
    (GOOD.replace("fio: {ioengine: psync, direct: 1}", "fio: {filename: /dev/sda}"), "fio.filename"),
    (GOOD + "isolation: ramdisk\n", "isolation"),
    ("name: [unclosed\n", "not valid YAML at line"),
])
def test_validation_errors_name_file_and_field(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(IolabError) as err:
        recipes.load(str(path))
    message = str(err.value)
    assert str(path) in message
    assert field in message


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(IolabError, match="unknown recipe 'nope'.*quick"):
        recipes.load("nope")


def test_bad_overrides_are_named():
    recipe = recipes.load("quick")
    with pytest.raises(IolabError, match="--size"):
        recipe.with_overrides(size="-3G")
    with pytest.raises(IolabError, match="--runtime"):
        recipe.with_overrides(runtime="soon")
    with pytest.raises(IolabError, match="unknown preset 'nvme'"):
        recipe.with_overrides(preset="nvme")


def test_plain_fio_job_file(tmp_path):
    path = write(tmp_path, "[global]\nsize=8m\n[a]\nrw=read\n", name="mine.fio")
    recipe = recipes.load(str(path))
    assert recipe.jobfile.startswith("[global]")
    assert [s.id for s in recipe.steps()] == ["mine"]


def test_buffered_and_direct_recipes_pick_their_isolation():
    cdm = recipes.load("crystaldiskmark").with_overrides()
    assert not cdm.buffered and cdm.isolation == "direct" and all(s.direct for s in cdm.steps())
    tio = recipes.load("tiobench").with_overrides()
    assert tio.buffered and tio.isolation == "cgroup" and tio.direct_ok
    assert [s.test for s in tio.steps()] == ["SeqWrite", "RandWrite", "SeqRead", "RandRead"]
    check = recipes.load("cachecheck").with_overrides(mem_limit="64M")
    assert check.size == 256 * 1024**2 and check.isolation == "cgroup"
    assert [s.cache for s in check.steps()] == ["cold", "warm"]


def test_sweep_points_are_tests_of_their_own(tmp_path):
    path = write(tmp_path, GOOD.replace("iodepth: 4", "iodepth: [1, 8]\n    numjobs: [1, 2]"))
    steps = [s for s in recipes.load(str(path)).steps() if s.sweep]
    assert [s.test for s in steps] == ["MIX-Q1T1", "MIX-Q8T1", "MIX-Q1T2", "MIX-Q8T2"]
    assert steps[-1].options["numjobs"] == 2


def test_per_char_io_cannot_fall_back_to_o_direct(tmp_path):
    path = write(tmp_path, GOOD.replace("bs: 4k", "bs: 1"))
    assert not recipes.load(str(path)).direct_ok


def test_choosing_tests_by_name():
    cdm = recipes.load("crystaldiskmark")
    two = cdm.with_overrides(tests=["RND4K-Q1T1", "SEQ128K-Q32T1"])
    assert [t.name for t in two.tests] == ["RND4K-Q1T1", "SEQ128K-Q32T1"]
    assert [t.name for t in two.with_overrides(size="8M").tests] == ["RND4K-Q1T1", "SEQ128K-Q32T1"]
    with pytest.raises(IolabError, match="crystaldiskmark: --tests: no test 'RND9K'"):
        cdm.with_overrides(tests=["RND9K"])
    assert [t.name for t in cdm.with_overrides(preset="peak").with_overrides().tests] == ["SEQ1M-Q8T1", "RND4K-Q32T1"]
