"""An emulated device's limits are ceilings: each test against its ceiling, and why one fell short (issue 23, item 3).

The sentences come from the numbers: the committed fixture store's emulated
``hdd`` (150 IOPS, 100 MB/s: QD1 random I/O at ~100 IOPS, everything else at
the ceiling, the cached run's reads 17-25x above it), and rows shaped like the
demo's emulated sata-ssd (20k IOPS declared, 444 IOPS measured at QD1, 6,812
at QD32) whose manifest records its declared limits as every run does. Also:
every flag the engine writes has a sentence in en and ja and a line in the
README's flags list.
"""
import re

import pandas as pd
import pytest

from iolab.devices import ceilingprobe, emulated
from iolab.report import ceilings, commentary, i18n, notebooks as report
from cli_helpers import FIXTURES, ROOT

DATA = FIXTURES / "data"

SATA_SSD = {"profile": "sata-ssd", "declared": {"read_bps": 500_000_000, "write_bps": 500_000_000,
                                                "read_iops": 20000, "write_iops": 20000}}
HDD_DM_DELAY = {"profile": "hdd", "declared": {"read_bps": 100_000_000, "write_bps": 100_000_000,
                                               "read_iops": 150, "write_iops": 150},
                "emulation": {"kind": "dm-delay", "read_delay_ms": 8, "write_delay_ms": 0}}


def _run(emulated, rows):
    """One run on one emulated target: its manifest row and its results (one repetition per row)."""
    manifests = pd.DataFrame([{"run_id": "r1", "targets": [{"name": "t", "emulated": emulated}]}])
    results = pd.DataFrame([{"system": "demo", "run_id": "r1", "target": "t", "test": test, "direction": direction,
                             "bs": bs, "iodepth": qd, "numjobs": 1, "iops": iops, "bw_mbps": iops * bs / 1e6,
                             "lat_mean_us": lat, "flags": flags, "valid": True}
                            for test, direction, bs, qd, iops, lat, flags in rows])
    return results, manifests


def test_fixture_hdd_reaches_its_ceilings_except_at_queue_depth_one():
    sel = report.select(DATA, host="hdd-node", recipe="crystaldiskmark", with_results=True)
    found = ceilings.against_ceilings(sel.results, sel.manifests).set_index(["test", "direction"])
    assert (found.loc[[("SEQ1M-Q8T1", "read"), ("RND4K-Q32T1", "read")], "verdict"] == "reached").all()
    assert found.loc[("SEQ1M-Q8T1", "read"), "binding"] == "bw"  # 1 MiB: 100 MB/s binds before 150 IOPS
    short = found.loc[("RND4K-Q1T1", "read")]
    assert short["verdict"] == "short" and short["reason"] == "latency" and 0.6 < short["ratio"] < 0.7


def test_cached_reads_above_the_ceiling_are_blamed_on_the_page_cache():
    sel = report.select(DATA, label="HDD, cached", with_results=True)
    found = ceilings.against_ceilings(sel.results, sel.manifests)
    reads = found[found["direction"] == "read"]
    assert (reads["verdict"] == "above").all() and (reads["reason"] == "cache").all()
    text = ceilings.markdown(sel.results, sel.manifests, lang="en")
    assert "went above it in SEQ1M-Q8T1 read (2,522 MB/s, 25x the 100 MB/s ceiling)" in text
    assert "the page cache served part of the reads" in text


@pytest.mark.parametrize("lang, phrases", [
    ("en", ["demo is an emulated device (profile sata-ssd: a loop device throttled by the block cgroup). "
            "The profile's declared limits are ceilings, not expected results: at most 500 MB/s and 20,000 IOPS",
            "stayed below it in RND4K-Q1T1 read (444 IOPS, 2% of 20,000 IOPS): with one I/O in flight the rate is one "
            "over the latency (2.25 ms per I/O on average), and that latency is this host's loop device",
            "stayed below it in RND4K-Q32T1 write (6,812 IOPS, 34% of 20,000 IOPS): with 32 I/Os in flight each took "
            "4.70 ms on average: this host's loop device",
            "reached the ceiling in SEQ1M-Q8T1 read (within 10%)"]),
    ("ja", ["demoはエミュレートしたデバイス（プロファイルsata-ssd：ブロックcgroupで帯域制限したループデバイス）。"
            "宣言した値は上限であって期待値ではない：読み書きとも最大500 MB/秒、20,000 IOPS。",
            "RND4K-Q1T1の読み込み（444 IOPS、上限20,000 IOPSの2%）",
            "同時に32個のI/Oを発行し、1回あたり平均4.70ミリ秒かかった"]),
])
def test_the_demos_sata_ssd_is_said_to_fall_short_of_its_ceiling_and_why(lang, phrases):
    results, manifests = _run(SATA_SSD, [
        ("SEQ1M-Q8T1", "read", 1048576, 8, 470.0, 17000.0, None),
        ("RND4K-Q1T1", "read", 4096, 1, 444.0, 2250.0, "emulated_latency"),
        ("RND4K-Q32T1", "write", 4096, 32, 6812.0, 4700.0, "emulated_latency")])
    text = ceilings.markdown(results, manifests, lang=lang)
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert "follow" not in text


def test_a_cpu_bound_test_is_blamed_on_the_cpu_and_dm_delay_named_at_queue_depth_one():
    results, manifests = _run(HDD_DM_DELAY, [
        ("RND4K-Q1T1", "read", 4096, 1, 90.0, 11000.0, "emulated_delay"),
        ("RND4K-Q32T1", "read", 4096, 32, 60.0, 500000.0, "emulated_delay;cpu_bound")])
    found = ceilings.against_ceilings(results, manifests).set_index("test")
    assert found.loc["RND4K-Q32T1", "reason"] == "cpu" and found.loc["RND4K-Q1T1", "reason"] == "latency"
    text = ceilings.markdown(results, manifests, lang="en")
    assert "each I/O waits the emulated 8 ms delay (dm-delay)" in text
    assert "the CPU, not the throttle, set the rate" in text


def test_a_device_that_is_not_emulated_gets_no_ceiling_sentence():
    sel = report.select(DATA, host="nvme-node", with_results=True)
    assert ceilings.markdown(sel.results, sel.manifests, lang="en") == ""
    results, manifests = _run({"profile": "no-such-profile"}, [("T", "read", 4096, 1, 10.0, 100.0, None)])
    assert ceilings.against_ceilings(results, manifests).empty  # unknown limits: nothing is claimed


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_compare_page_states_the_emulated_hdds_ceilings(render_once, lang):
    md = render_once(data=DATA, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    if lang == "en":
        assert "**Emulated devices.** HDD (emulated) is an emulated device (profile hdd" in md
        assert "HDD (emulated) stayed below it in RND4K-Q1T1 read (100 IOPS, 67% of 150 IOPS)" in md
    else:
        assert "**エミュレートしたデバイス**：HDD（エミュレート）はエミュレートしたデバイス（プロファイルhdd" in md
        assert "RND4K-Q1T1の読み込み（100 IOPS、上限150 IOPSの67%）" in md


#: Every flag the engine, the statistics and the classic tools write into results.csv.
ENGINE_FLAGS = ["cache_suspect", "cpu_bound", "too_short", "high_variance", "small_file", "oom_killed",
                "emulated_latency", "emulated_delay", "v1_writeback", "ram_backed", "first_sample_dropped",
                "fleet_aggregate", "contended"]


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("flag", ENGINE_FLAGS)
def test_every_flag_has_a_sentence_and_a_readme_line(flag, lang):
    assert i18n.has(f"flags.{flag}", lang), flag
    summary = pd.DataFrame([{"system": "tmp", "test": "T", "direction": "read", "value": 1.0, "metric": "bw_mbps",
                             "unit": "MB/s", "cache_isolated": True, "n": 3, "ci_low": float("nan"),
                             "ci_high": float("nan"), "flags": flag, "cov": 0.2}])
    found = commentary.caveats(summary)
    text = " ".join(commentary.caveat_sentences(found, lang=lang)) if not found.empty else \
        i18n.text(f"flags.{flag}", lang, system="tmp", tests="T", threshold=5, cov=20)
    assert (f"({flag})" in text or f"（{flag}）" in text) and "flagged" not in text and "フラグ " not in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    flags_section = readme.split("### Flags")[1].split("\n## ")[0]
    assert re.search(rf"`{flag}`", flags_section), flag


def test_ram_backed_says_the_figures_are_memorys_in_both_languages():
    assert "not a storage device's" in i18n.text("flags.ram_backed", "en", system="tmpfs", tests="all tests")
    assert "ストレージデバイスではなくメモリ" in i18n.text("flags.ram_backed", "ja", system="tmpfs", tests="全テスト")


def test_the_same_ceiling_at_queue_depth_1_and_32_is_explained():
    results, manifests = _run(HDD_DM_DELAY | {"emulation": None}, [
        ("RND4K-Q1T1", "read", 4096, 1, 149.0, 6700.0, "emulated_latency"),
        ("RND4K-Q32T1", "read", 4096, 32, 151.0, 210000.0, "emulated_latency")])
    text = ceilings.markdown(results, manifests, lang="en")
    assert ("RND4K-Q1T1 read and RND4K-Q32T1 read run at the same 150 IOPS with 1 and 32 I/Os in flight: "
            "the throttle sets the rate, so a deeper queue cannot raise it") in text
    assert "同時に発行するI/Oの数（1、32）によらず同じ150 IOPSになる" in ceilings.markdown(results, manifests, lang="ja")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_plain_report_states_the_ceilings_too(render_once, lang):
    md = render_once(data=DATA, lang=lang).markdown.read_text(encoding="utf-8")  # report.ipynb
    heading = "**Emulated devices.** " if lang == "en" else "**エミュレートしたデバイス**："
    assert heading in md
    assert ("stayed below it in RND4K-Q1T1 read (100 IOPS, 67% of 150 IOPS)" if lang == "en"
            else "RND4K-Q1T1の読み込み（100 IOPS、上限150 IOPSの67%）") in md


def test_an_emulated_device_of_unknown_limits_is_said_so_not_guessed():
    """The fixture's sata-ssd run names profile 'ssd' and records no limits; iolab ships no such profile."""
    sel = report.select(DATA, host="ssd-node", recipe="crystaldiskmark", with_results=True)
    assert ceilings.against_ceilings(sel.results, sel.manifests).empty
    text = ceilings.markdown(sel.results, sel.manifests, lang="en")
    assert text == ("**Emulated devices.** SATA SSD (emulated) is an emulated device (profile ssd) whose run records "
                    "no declared limits, and iolab ships no profile of that name: its figures cannot be held against "
                    "a ceiling.")
    assert "宣言値がなく" in ceilings.markdown(sel.results, sel.manifests, lang="ja")
    unthrottled, manifests = _run({"profile": "unthrottled", "declared": {"read_bps": None}},
                                  [("T", "read", 4096, 1, 10.0, 100.0, None)])
    assert ceilings.markdown(unthrottled, manifests, lang="en") == ""  # a control with no limits: nothing to say


# --------------------------------------------------------------------------- the probe made with the device (issue 26, item 4)

def _fio_report(figures: dict, cpu: float = 20.0) -> dict:
    """fio's JSON for the probe's jobs: ``figures`` maps a declared limit to what its job reached (bytes/s or IOPS)."""
    jobs = []
    for job in ceilingprobe.JOBS:
        value = figures[job.limit]
        side = {"bw_bytes": value if job.unit == "bps" else value * job.bs, "iops": value if job.unit == "iops"
                else value / job.bs}
        jobs.append({"jobname": job.limit, job.direction: side, "usr_cpu": cpu / 2, "sys_cpu": cpu / 2})
    return {"jobs": jobs}


def _probed(figures: dict, cpu: float = 20.0) -> dict:
    """SATA_SSD as a run records it now: its declared limits, the probe's record and what was reachable."""
    profile = emulated.load_profiles()["sata-ssd"]
    record = ceilingprobe.judge(profile, ceilingprobe.jobs_for(profile), _fio_report(figures, cpu))
    return SATA_SSD | {"ceiling_probe": record, "reachable": record["reachable"]}


#: the demo's host: the loop device gave 6,812 random 4K writes at QD32 against the profile's 20k
SHORT_OF_WRITES = {"read_bps": 505e6, "write_bps": 498e6, "read_iops": 19_950.0, "write_iops": 6812.0}


def test_the_probe_records_only_the_limits_the_host_did_not_reach():
    record = _probed(SHORT_OF_WRITES)["ceiling_probe"]
    assert record["reachable"] == {"write_iops": 6812.0} and record["held_by"] == ["loop device"]
    assert {j["limit"]: j["reached"] for j in record["jobs"]} == {"read_bps": True, "write_bps": True,
                                                                 "read_iops": True, "write_iops": False}
    assert _probed(SHORT_OF_WRITES, cpu=99.0)["ceiling_probe"]["held_by"] == ["cpu"]


@pytest.mark.parametrize("lang, phrases", [
    ("en", ["demo: ceiling not reached on this host (loop device): when the device was made, a probe of 1 s per "
            "limit under the profile's own limits reached random 4K write (QD32) 6,812 IOPS of the declared "
            "20,000 IOPS",
            "stayed below it in RND4K-Q32T1 write (6,800 IOPS, 34% of 20,000 IOPS): ceiling not reached on this host "
            "(loop device)"]),
    ("ja", ["demo：このホストでは上限に届かない（ループデバイス）。",
            "ランダム4K書き込み（QD32）は6,812 IOPS（宣言値20,000 IOPS）"]),
])
def test_a_limit_out_of_the_hosts_reach_is_said_so_never_followed(lang, phrases):
    results, manifests = _run(_probed(SHORT_OF_WRITES), [
        ("SEQ1M-Q8T1", "read", 1048576, 8, 470.0, 17000.0, None),
        ("RND4K-Q32T1", "write", 4096, 32, 6800.0, 4700.0, "emulated_latency")])
    found = ceilings.against_ceilings(results, manifests).set_index("test")
    assert found.loc["RND4K-Q32T1", "reason"] == "host" and found.loc["SEQ1M-Q8T1", "verdict"] == "reached"
    text = ceilings.markdown(results, manifests, lang=lang)
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert "follow" not in text


def test_a_probe_that_reached_every_limit_flags_nothing_and_a_skipped_one_is_said_skipped():
    reached = {"read_bps": 499e6, "write_bps": 497e6, "read_iops": 19_990.0, "write_iops": 19_980.0}
    results, manifests = _run(_probed(reached), [("RND4K-Q32T1", "write", 4096, 32, 6812.0, 4700.0, None)])
    text = ceilings.markdown(results, manifests, lang="en")
    assert "reached every declared limit on this host" in text and "not reached" not in text
    assert ceilings.against_ceilings(results, manifests)["reason"].tolist() == ["loop"]  # the test's own shortfall
    skipped = SATA_SSD | {"ceiling_probe": ceilingprobe.not_probed(ceilingprobe.SKIPPED), "reachable": None}
    results, manifests = _run(skipped, [("RND4K-Q32T1", "write", 4096, 32, 6812.0, 4700.0, None)])
    assert "the probe of the declared limits was skipped on request" in ceilings.markdown(results, manifests)
    assert "測っていない" in ceilings.markdown(results, manifests, lang="ja")


# --------------------------------------------------------------------------- each shared fact once (issue 23)

def _two_runs(rows_by_system):
    """The demo's shape: one run per emulated device, each with its own profile and the probe it made."""
    reached = {"read_bps": 499e6, "write_bps": 497e6, "read_iops": 19_990.0, "write_iops": 19_980.0}
    frames, manifests = [], []
    for i, (system, emulated_, rows) in enumerate(rows_by_system):
        results, manifest = _run(emulated_ | {"ceiling_probe": _probed(reached)["ceiling_probe"]}, rows)
        frames.append(results.assign(system=system, run_id=f"r{i}"))
        manifests.append(manifest.assign(run_id=f"r{i}"))
    return pd.concat(frames, ignore_index=True), pd.concat(manifests, ignore_index=True)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_what_the_systems_share_is_said_once_and_each_systems_figures_for_it(lang):
    hdd = SATA_SSD | {"profile": "hdd", "declared": HDD_DM_DELAY["declared"]}
    results, manifests = _two_runs([
        ("emulated hdd", hdd, [("RND4K-Q1T1", "read", 4096, 1, 100.0, 9900.0, None),
                               ("RND4K-Q32T1", "write", 4096, 32, 100.0, 300000.0, None)]),
        ("emulated sata-ssd", SATA_SSD, [("RND4K-Q1T1", "read", 4096, 1, 444.0, 2250.0, None),
                                         ("RND4K-Q32T1", "write", 4096, 32, 6812.0, 4700.0, None)])])
    text = ceilings.markdown(results, manifests, lang=lang)
    t = lambda key, **fields: i18n.text(f"ceilings.{key}", lang, **fields)  # noqa: E731
    # once: the heading, what a declared limit is, the probe's finding, each explanation of a shortfall
    assert text.count(t("lead", heading=t("heading"))) == 1
    general = t("intro", systems="emulated hdd", n=1, profile="hdd", limits="@").split("@")[1]
    assert text.count(general) == 1 and general.strip(" 。.;；")
    assert text.count(t("probe_reached", systems=i18n.join(["emulated hdd", "emulated sata-ssd"], lang), n=2)) == 1
    first_latency = t("why_latency", lat="9.90")
    first_loop = t("why_loop", oio="32", lat="300")
    assert first_latency in text and first_loop in text
    for key in ("why_latency", "why_loop"):
        shared = t(key, lat="@", oio="@").split("@")[-1]  # the explanation after the figures
        assert text.count(shared) == 1, (key, shared, text)
    # per system only its own figures: the sata-ssd's latency and I/Os in flight
    assert t("why_latency_again", lat="2.25") in text and t("why_loop_again", oio="32", lat="4.70") in text
    assert t("intro_more", systems="emulated sata-ssd", n=1, profile="sata-ssd",
             limits=t("limits_both", limits=f"500 {i18n.unit('MB/s', lang)}" +
                      ("、" if lang == "ja" else " and ") + "20,000 IOPS")) in text
