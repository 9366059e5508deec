"""fio's I/O engine: --ioengine, the recipes' io_uring preference, the probe, and the engine_sync flag.

The decision on io_uring is tested on its inputs (:class:`UringFacts`): the kernel's
``io_uring_disabled`` cannot be changed safely on a shared machine, and no seccomp
filter or io_uring-less fio is at hand. Everything else runs for real: fio's own
``--enghelp`` and ``--showcmd``, io_uring_setup under bubblewrap, and short runs
(16 MiB, 1 s) on a tmpfs mounted for the test and on a disk file.
"""
import errno
import json
from pathlib import Path
import os
import re

import pandas as pd
import pytest

import iolab
from iolab.analysis.stats import split_flags
from iolab.core.errors import IolabError
from iolab.engine import ioengines, memlock, recipes, runner
from iolab.engine.ioengines import JobEngine, UringFacts
from iolab.isolation import confine
from iolab.report import commentary, i18n

from cli_helpers import ROOT, cli_main, needs_fio, needs_root
from kernel_fixtures import mounted

OFFERED = UringFacts(listed=True, disabled=0, seccomp=0, setup_errno=0, confined=True, fio="fio-3.33")


def _facts(**changes) -> UringFacts:
    return UringFacts(**{**OFFERED.__dict__, **changes})


# ------------------------------------------------------------------ the decision on its inputs

@pytest.mark.parametrize("changes, key", [
    ({}, None),
    ({"disabled": 1}, None),                                   # allowed to this process: setup worked
    ({"disabled": None}, None),                                # a kernel before 6.6: no such setting
    ({"listed": False}, "not_in_fio"),
    ({"disabled": 2, "setup_errno": errno.EPERM}, "disabled"),
    ({"disabled": 1, "setup_errno": errno.EPERM}, "restricted_confined"),
    ({"disabled": 1, "setup_errno": errno.EPERM, "confined": False}, "restricted"),
    ({"seccomp": 2, "setup_errno": errno.EPERM}, "seccomp"),
    ({"setup_errno": errno.ENOSYS}, "no_kernel"),
    ({"setup_errno": errno.EPERM}, "confinement"),
    ({"setup_errno": errno.ENOMEM}, "setup_failed"),
    ({"setup_errno": None, "detail": "bwrap: no permission"}, "untested"),
])
def test_io_uring_is_used_only_where_every_fact_allows_it(changes, key):
    usable, found, reason = ioengines.uring_verdict(_facts(**changes))
    assert usable == (key is None) and found == key
    if key:
        number = changes.get("setup_errno")
        error = changes.get("detail") if number is None else f"{errno.errorcode[number]} ({os.strerror(number)})"
        assert reason == ioengines.REASONS[key].format(fio="fio-3.33", error=error)


def test_a_preferring_recipe_falls_back_to_its_engine_with_the_reason():
    peak = recipes.load("crystaldiskmark").with_overrides(preset="peak")
    refused = _facts(disabled=2, setup_errno=errno.EPERM)
    recipe, decision = ioengines.choose(peak, facts=refused)
    assert recipe.fio["ioengine"] == "libaio" and decision["chosen"] == "libaio" and decision["by"] == "recipe"
    assert decision["fallback"] == {"reason_key": "disabled", "reason": ioengines.REASONS["disabled"]}
    assert decision["io_uring"]["disabled"] == 2 and decision["io_uring"]["setup_error"].startswith("EPERM")
    recipe, decision = ioengines.choose(peak, facts=OFFERED)
    assert recipe.fio["ioengine"] == "io_uring" and decision["chosen"] == "io_uring" and "fallback" not in decision
    assert peak.fio["ioengine"] == "libaio"  # the loaded recipe itself is left as it was


def test_every_crystaldiskmark_preset_and_qd_sweep_prefer_io_uring():
    cdm = recipes.load("crystaldiskmark")
    for preset in ("default", "real-world", "peak", "nvme-peak", "nvme"):
        recipe, decision = ioengines.choose(cdm.with_overrides(preset=preset), facts=OFFERED)
        ran = {s.test: s.options.get("ioengine", recipe.fio["ioengine"]) for s in recipe.steps()}
        # one I/O in flight: psync (one system call per I/O); deeper queues: io_uring
        assert ran == {t: "psync" if t.split("-")[1].startswith("Q1T") else "io_uring" for t in ran}, (preset, ran)
        assert decision["chosen"] == "io_uring"
        assert decision.get("depth_1", {}).get("tests", []) == sorted({t for t, e in ran.items() if e == "psync"},
                                                                      key=list(ran).index), preset
    refused = _facts(disabled=2, setup_errno=errno.EPERM)
    recipe, decision = ioengines.choose(cdm.with_overrides(preset="default"), facts=refused)
    ran = {s.test: s.options.get("ioengine", recipe.fio["ioengine"]) for s in recipe.steps()}
    assert ran == {"SEQ1M-Q8T1": "libaio", "SEQ1M-Q1T1": "psync", "RND4K-Q32T1": "libaio", "RND4K-Q1T1": "psync"}
    assert decision["fallback"]["reason_key"] == "disabled"
    recipe, decision = ioengines.choose(cdm.with_overrides(preset="default"), "libaio", facts=OFFERED)
    assert {s.options.get("ioengine", recipe.fio["ioengine"]) for s in recipe.steps()} == {"libaio"}  # --ioengine: all
    sweep, decision = ioengines.choose(recipes.load("qd-sweep").with_overrides(), facts=OFFERED)
    assert sweep.fio["ioengine"] == "io_uring" and decision["prefer"] == "io_uring"
    assert ioengines.choose(recipes.load("quick").with_overrides(), facts=OFFERED)[0].fio["ioengine"] == "libaio"


def test_io_urings_registered_files_and_buffers_where_the_buffers_fit_rlimit_memlock():
    cdm = recipes.load("crystaldiskmark").with_overrides(preset="nvme")
    recipe, decision = ioengines.choose(cdm, facts=OFFERED)
    uring = {t.name: t.fio for t in recipe.tests if "ioengine" not in t.fio}
    assert set(uring) == {"SEQ1M-Q8T1", "SEQ128K-Q32T1", "RND4K-Q32T16"} and decision["options"] == {
        "registerfiles": 1, "fixedbufs": 1}
    assert all(options["registerfiles"] == 1 for options in uring.values())
    # with 4 MiB locked at most, half may be pinned: SEQ1M at Q8 (8 MiB) and SEQ128K at Q32 (4 MiB) go without
    # fixedbufs, RND4K at Q32 in 16 jobs (2 MiB) keeps them
    small, decision = ioengines.choose(cdm, facts=OFFERED, memlock=4 * 2**20)
    without = decision["without_fixedbufs"]
    assert [t["test"] for t in without["tests"]] == ["SEQ1M-Q8T1", "SEQ128K-Q32T1"]
    assert [t["pinned_bytes"] for t in without["tests"]] == [8 * 2**20, 4 * 2**20] and without["memlock_bytes"] == 4 * 2**20
    assert [t.fio["fixedbufs"] for t in small.tests if t.name in ("SEQ1M-Q8T1", "SEQ128K-Q32T1")] == [0, 0]  # fio: off
    fits, decision = ioengines.choose(cdm, facts=OFFERED, memlock=memlock.resource.RLIM_INFINITY)
    assert "without_fixedbufs" not in decision and all(t.fio.get("fixedbufs") == 1 for t in fits.tests
                                                       if "ioengine" not in t.fio)
    # --ioengine io_uring is the engine as asked, without the recipe's options
    plain, _ = ioengines.choose(cdm, "io_uring", facts=OFFERED)
    assert not any("fixedbufs" in t.fio or "registerfiles" in t.fio for t in plain.tests)
    # each choice worked on its own copy: the recipe as loaded is untouched
    assert cdm.fio == recipes.load("crystaldiskmark").with_overrides(preset="nvme").fio
    assert not any({"fixedbufs", "registerfiles", "ioengine"} & set(t.fio) for t in cdm.tests)


def test_deciding_the_options_leaves_the_memlock_limit_the_run_raises_it_for_its_duration():
    """choose() only reads the limit fio will get (a dry run or a notebook's kernel keeps its own); the run raises
    this process's soft limit (which fio inherits) to it, and gives the old one back afterwards."""
    limit = memlock.resource.RLIMIT_MEMLOCK
    soft, hard = memlock.resource.getrlimit(limit)
    lowered = 2**20 if hard == memlock.resource.RLIM_INFINITY else min(2**20, hard)
    memlock.resource.setrlimit(limit, (lowered, hard))
    try:
        ioengines.choose(recipes.load("crystaldiskmark").with_overrides(), facts=OFFERED)
        assert memlock.resource.getrlimit(limit) == (lowered, hard)
        with memlock.raised():
            assert memlock.resource.getrlimit(limit)[0] == memlock.fio_rlimit_memlock() != lowered
        assert memlock.resource.getrlimit(limit) == (lowered, hard)
    finally:
        memlock.resource.setrlimit(limit, (soft, hard))


def test_a_preference_naming_an_unknown_preset_is_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ndescription: d\nfio: {ioengine: libaio}\nioengine: {prefer: io_uring, presets: [fast]}\n"
                    "presets: {slow: [A]}\ntests: [{name: A, rw: read, bs: 4k}]\n")
    with pytest.raises(IolabError, match=r"ioengine.presets: names unknown preset 'fast'"):
        recipes.load(str(path))
    path.write_text("name: r\ndescription: d\nioengine: {prefer: libaio}\ntests: [{name: A, rw: read, bs: 4k}]\n")
    with pytest.raises(IolabError, match=r"ioengine.prefer"):
        recipes.load(str(path))


def test_ioengine_is_refused_where_no_fio_job_of_iolab_runs_it(tmp_path, capsys, caplog):
    with pytest.raises(IolabError, match="its own engine \\(bonnie\\)"):
        ioengines.choose(recipes.load("bonnie"), "io_uring")
    job = tmp_path / "mine.fio"
    job.write_text("[a]\nrw=read\nsize=1m\n")
    with pytest.raises(IolabError, match="set ioengine in the job file"):
        ioengines.choose(recipes.load(str(job)), "psync")
    code, _, err = cli_main(capsys, caplog, "run", "quick", "--hosts", tmp_path / "none.yaml", "--ioengine", "psync")
    assert code != 0 and "--ioengine is not supported with --hosts" in err


# ------------------------------------------------------------------ when an engine submits synchronously

@pytest.mark.parametrize("job, ram, why", [
    (JobEngine("libaio", True, 32), True, "libaio_ram"),
    (JobEngine("libaio", False, 32), False, "libaio_buffered"),
    (JobEngine("psync", True, 4), False, "sync_engine"),
    (JobEngine("pvsync2", False, 2), True, "sync_engine"),
    (JobEngine("libaio", True, 32), False, None),        # O_DIRECT on a disk: asynchronous
    (JobEngine("io_uring", True, 32), True, None),       # io_uring on tmpfs
    (JobEngine("io_uring", False, 32), False, None),     # io_uring buffered: its workers take the wait
    (JobEngine("libaio", True, 1), True, "libaio_ram"),  # on RAM its system calls cost more than the I/O
    (JobEngine("libaio", False, 1), False, None),        # buffered, one I/O asked for: nothing lost
    (JobEngine("psync", False, 1), False, None),
])
def test_the_engine_is_a_ceiling_only_where_it_serialises_a_deeper_queue(job, ram, why):
    assert ioengines.submits_synchronously(job, ram_backed=ram) == why


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_engine_sync_and_every_fallback_reason_have_their_sentences(lang):
    summary = pd.DataFrame([{"system": "tmp", "test": "RND4K-Q32T1", "direction": "read", "value": 1.0,
                             "metric": "bw_mbps", "unit": "MB/s", "cache_isolated": True, "n": 3,
                             "ci_low": float("nan"), "ci_high": float("nan"), "flags": ioengines.FLAG, "cov": 0.01}])
    text = " ".join(commentary.caveat_sentences(commentary.caveats(summary), lang=lang))
    assert ("(engine_sync)" in text or "（engine_sync）" in text) and "io_uring" in text and "RND4K-Q32T1" in text
    for key, english in ioengines.REASONS.items():
        said = i18n.text(f"engine.{key}", lang, fio="fio-X", error="EPERM-X")
        for value in ("fio-X", "EPERM-X"):  # the same placeholders as the manifest's English reason
            assert (value in said) == (value in english.format(fio="fio-X", error="EPERM-X")), (key, value)
        if lang == "en":
            assert said == english.format(fio="fio-X", error="EPERM-X")
    assert i18n.has("engine.fallback", lang)
    flags_section = (ROOT / "README.md").read_text(encoding="utf-8").split("### Flags")[1].split("\n## ")[0]
    assert "`engine_sync`" in flags_section


# ------------------------------------------------------------------ real fio, real kernel

@needs_fio
def test_an_unknown_engine_is_refused_naming_it_and_fios_engines(tmp_path, capsys, caplog):
    code, out, err = cli_main(capsys, caplog, "run", "quick", "--target", tmp_path, "--data", tmp_path / "data",
                              "--ioengine", "warp_drive", "--size", "16M", "--runtime", "1", "--repeat", "1")
    assert code != 0 and "no I/O engine 'warp_drive'" in err and "libaio" in err and "io_uring" in err
    assert not (tmp_path / "data").exists()
    assert "libaio" in ioengines.engines() and "psync" in ioengines.engines()


@needs_fio
def test_the_probe_tries_io_uring_where_fio_runs():
    facts = ioengines.uring_facts()
    assert facts.listed == ("io_uring" in ioengines.engines())
    assert facts.confined == (confine.unavailable() is None)
    assert facts.setup_errno is not None, facts.detail
    if facts.disabled == 2:
        assert facts.setup_errno != 0
    if facts.disabled in (0, None) and facts.seccomp in (0, None):  # nothing forbids it: only a kernel without it
        assert facts.setup_errno in (0, errno.ENOSYS)


@needs_fio
def test_qd_sweep_and_crystaldiskmark_pick_io_uring_when_the_kernel_offers_it(tmp_path):
    usable = ioengines.uring_verdict(ioengines.uring_facts())[0]
    expected = "io_uring" if usable else "libaio"
    sweep, _ = runner.plan("qd-sweep", [str(tmp_path)], size="16M", runtime=1)
    peak, _ = runner.plan("crystaldiskmark", [str(tmp_path)], size="16M", runtime=1, preset="peak")
    default, _ = runner.plan("crystaldiskmark", [str(tmp_path)], size="16M", runtime=1)
    assert sweep.fio["ioengine"] == peak.fio["ioengine"] == default.fio["ioengine"] == expected
    quick, _ = runner.plan("quick", [str(tmp_path)], size="16M", runtime=1)
    assert quick.fio["ioengine"] == "libaio"  # no preference: the recipe's own engine
    from iolab.engine import dryrun
    text = dryrun.dry_run("qd-sweep", [str(tmp_path)], size="16M", runtime=1)
    assert text.count(f"ioengine={expected}") == len(sweep.steps())


@needs_fio
def test_a_job_files_engines_are_read_as_fio_reads_them():
    text = "[global]\nioengine=libaio\niodepth=8\n[a]\nrw=read\ndirect=1\n[b]\nioengine=psync\nbuffered=0\n" \
           "[global]\nioengine=io_uring\n[c]\nrw=read\n"
    assert ioengines.of_job_text(text) == {"a": JobEngine("libaio", True, 8), "b": JobEngine("psync", True, 8),
                                           "c": JobEngine("io_uring", False, 8)}
    assert ioengines.of_job_text("[d]\nrw=read\n") == {"d": JobEngine("psync", False, 1)}


SWEEP = """
name: sweep
description: random reads at two depths
isolation: direct
defaults: {{size: 16M, runtime: 1, repeat: 1}}
fio: {{ioengine: {engine}, direct: 1, norandommap: 1}}
{preference}
tests:
  - name: RND4K
    rw: randread
    bs: 4k
    iodepth: [1, 8]
"""


def _recipe(tmp_path, engine="libaio", preference="") -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(engine=engine, preference=preference))
    return str(path)


def _run(tmp_path, target, **kwargs):
    result = runner.run(_recipe(tmp_path, **kwargs.pop("recipe", {})), [str(target)], data_dir=tmp_path / "data",
                        progress=False, **kwargs)
    assert result.manifest["status"] == "completed", result.manifest.get("reason")
    manifest = json.loads((result.path / "manifest.json").read_text())
    return iolab.load(result.path), manifest, result.path


def _flagged(table, test) -> bool:
    return table.loc[table["test"] == test, "flags"].map(lambda f: ioengines.FLAG in split_flags(f)).all()


def _job_engines(run_dir) -> set:
    return {m for p in (run_dir / "jobs").glob("RND4K*.fio") for m in re.findall(r"^ioengine=(\S+)$",
                                                                                p.read_text(), re.M)}


@needs_fio
@needs_root
def test_libaio_on_tmpfs_is_flagged_and_io_uring_is_not(tmp_path):
    with mounted(tmp_path / "ram", "tmpfs", "64m") as ram:
        libaio, manifest, run_dir = _run(tmp_path, ram)
        assert set(libaio["ioengine"]) == {"libaio"} and _job_engines(run_dir) == {"libaio"}
        assert _flagged(libaio, "RND4K-Q8T1") and _flagged(libaio, "RND4K-Q1T1")
        assert all(t["ioengine"] == "libaio" for t in manifest["tests"])
        assert manifest["ioengine"] == {"by": "recipe", "chosen": "libaio"}
        if not ioengines.uring_verdict(ioengines.uring_facts())[0]:
            pytest.skip("io_uring is not offered here: " + ioengines.uring_verdict(ioengines.uring_facts())[2])
        uring, manifest, run_dir = _run(tmp_path, ram, ioengine="io_uring")
    assert set(uring["ioengine"]) == {"io_uring"} and _job_engines(run_dir) == {"io_uring"}
    assert not _flagged(uring, "RND4K-Q8T1") and "ram_backed" in uring["flags"].iloc[0]
    assert manifest["ioengine"]["by"] == "--ioengine" and manifest["ioengine"]["chosen"] == "io_uring"
    assert manifest["ioengine"]["io_uring"]["setup_errno"] == 0
    assert all(t["ioengine"] == "io_uring" for t in manifest["tests"])


@needs_fio
def test_on_a_disk_file_direct_libaio_is_unflagged_and_psync_at_depth_is(tmp_path):
    libaio, _, _ = _run(tmp_path, tmp_path)
    assert not _flagged(libaio, "RND4K-Q8T1")
    psync, manifest, run_dir = _run(tmp_path, tmp_path, ioengine="psync")
    assert _flagged(psync, "RND4K-Q8T1") and not _flagged(psync, "RND4K-Q1T1")
    assert _job_engines(run_dir) == {"psync"} and manifest["ioengine"] == {"by": "--ioengine", "requested": "psync",
                                                                           "chosen": "psync"}


@needs_fio
def test_a_recipes_io_uring_preference_is_recorded_with_what_each_test_ran(tmp_path):
    table, manifest, run_dir = _run(tmp_path, tmp_path, recipe={"preference": "ioengine: {prefer: io_uring}"})
    usable, key, reason = ioengines.uring_verdict(ioengines.uring_facts())
    engine = "io_uring" if usable else "libaio"
    assert manifest["ioengine"]["by"] == "recipe" and manifest["ioengine"]["chosen"] == engine
    assert manifest["ioengine"].get("fallback") == (None if usable else {"reason_key": key, "reason": reason})
    assert [t["ioengine"] for t in manifest["tests"]] == [engine, engine]
    assert _job_engines(run_dir) == {engine} and set(table["ioengine"]) == {engine}
    assert "ioengine" in (run_dir / "recipe.yaml").read_text()


@needs_fio
@needs_root
def test_registered_buffers_larger_than_rlimit_memlock_run_confined_with_cap_ipc_lock_alone(tmp_path):
    """crystaldiskmark's SEQ1M-Q8T1 registers 8 MiB of buffers (io_uring fixedbufs): under bubblewrap, which drops
    every capability, the kernel counts them against RLIMIT_MEMLOCK (8 MiB here: fio failed with ENOMEM, so the
    row went without fixed buffers and reached 0.944 of plain fio's best in benchmarks/engine_ceiling.py). A run
    that registers buffers keeps CAP_IPC_LOCK alone, within iolab's own bound, and the row runs as the recipe
    asks; the confinement record says so."""
    if not ioengines.uring_verdict(ioengines.uring_facts())[0]:
        pytest.skip("io_uring is not offered here: " + ioengines.uring_verdict(ioengines.uring_facts())[2])
    result = runner.run("crystaldiskmark", [str(tmp_path)], data_dir=tmp_path / "data", progress=False,
                        tests=("SEQ1M-Q8T1",), size="16M", runtime=1, repeat=1)
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    decision = manifest["ioengine"]
    assert decision["fixedbufs_tests"] == ["SEQ1M-Q8T1"] and "without_fixedbufs" not in decision, decision
    assert manifest["confinement"]["confined"] and manifest["confinement"]["capabilities"] == ["CAP_IPC_LOCK"]
    jobs = "".join(p.read_text() for p in (result.path / "jobs").glob("SEQ1M-Q8T1*.fio"))
    assert re.search(r"^fixedbufs=1$", jobs, re.M) and re.search(r"^ioengine=io_uring$", jobs, re.M)
    table = iolab.load(result.path)
    assert table["valid"].all() and (table["bw_mbps"] > 0).all() and not table["error"].notna().any()
    # a plain job file's own fixedbufs get no capability: the file names its options, iolab adds none
    assert not memlock.pins_buffers({"by": "job file"})


@pytest.mark.parametrize("job, refused", [
    ("[j]\nioengine=io_uring\nfixedbufs=1\nbs=1m\niodepth=8\n", None),  # crystaldiskmark's SEQ1M-Q8T1: 8 MiB
    ("[j]\nioengine=io_uring\nfixedbufs=1\nbs=64m\niodepth=8\n", "would pin 536870912 bytes"),  # past the bound
    ("[global]\nioengine=io_uring\nfixedbufs=1\nblocksize=4k,32m\n[j]\niodepth=8\nnumjobs=2\n",
     "would pin 536870912 bytes"),  # the recipe's [global], the write size, every job
    ("[j]\nioengine=io_uring\nfixedbufs=1\nbssplit=4k/50:128m/50\niodepth=2\n", "would pin"),  # a split's largest
    ("[j]\nlockmem=1g\n", "locks memory itself (lockmem=1g)"),  # mlock: CAP_IPC_LOCK would lift its limit
    ("[j]\niomem=shmhuge\n", "locks memory itself (mem=shmhuge)"),
    ("[j]\nbs=1g\niodepth=64\n", None),  # no registered buffers: nothing locked
])
def test_cap_ipc_lock_is_kept_only_for_job_files_that_lock_within_the_bound(tmp_path, job, refused):
    """The attacker is a recipe (a test's own fio options, the recipe's [global]) or what it asks fio to expand:
    the job files as fio reads them decide whether fio may keep CAP_IPC_LOCK, not the recipe's preference."""
    path = tmp_path / "j.fio"
    path.write_text(job)
    said = memlock.unbounded_locking([path])
    assert (said is None) if refused is None else (refused in (said or "")), said


@needs_fio
@needs_root
def test_a_recipe_asking_to_lock_memory_itself_runs_without_the_capability(tmp_path):
    """A recipe that prefers registered buffers (so iolab would keep CAP_IPC_LOCK) and also asks fio to mlock a
    gigabyte (lockmem): the capability is refused, said in the manifest, and fio stays under RLIMIT_MEMLOCK. The
    registered buffers are then fitted to that limit, not to iolab's own bound: a test whose 8 MiB of buffers
    would fail with ENOMEM under it goes without them (its job file written again), the small one keeps them."""
    if not ioengines.uring_verdict(ioengines.uring_facts())[0]:
        pytest.skip("io_uring is not offered here: " + ioengines.uring_verdict(ioengines.uring_facts())[2])
    recipe = _recipe(tmp_path, engine="psync", preference="ioengine: {prefer: io_uring, options: {fixedbufs: 1}}")
    Path(recipe).write_text(Path(recipe).read_text().replace("fio: {ioengine: psync,", "fio: {ioengine: psync, lockmem: 1m,")
                            + "  - {name: SEQ1M, rw: read, bs: 1m, iodepth: 8}\n")
    result = runner.run(recipe, [str(tmp_path)], data_dir=tmp_path / "data", progress=False)
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("reason")
    assert "capabilities" not in manifest["confinement"] and manifest["confinement"]["confined"]
    assert "locks memory itself (lockmem=1m)" in manifest["confinement"]["lock_memory_refused"]
    decision, large_fits = manifest["ioengine"], memlock.fits(8 * 2**20, memlock.fio_rlimit_memlock())
    assert decision["fixedbufs_tests"] == (["RND4K", "SEQ1M"] if large_fits else ["RND4K"]), decision
    jobs = (result.path / "jobs" / "SEQ1M.fio").read_text()
    assert re.search(r"^fixedbufs=1$" if large_fits else r"^fixedbufs=0$", jobs, re.M), jobs
    if not large_fits:
        without = decision["without_fixedbufs"]
        assert without["tests"] == [{"test": "SEQ1M", "pinned_bytes": 8 * 2**20}], without
        assert without["memlock_bytes"] == memlock.fio_rlimit_memlock() and "CAP_IPC_LOCK was refused" in without["reason"]
    table = iolab.load(result.path)
    assert set(table["test"]) == {"RND4K-Q1T1", "RND4K-Q8T1", "SEQ1M"} and table["valid"].all() and not table["error"].notna().any()
