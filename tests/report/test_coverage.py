"""What a comparison leaves out, said where the reader sees the gap (issue 23, item 3).

The committed fixture store holds a run that failed at its first write
(ssd-node's quick run: ENOSPC, the six tests after it never ran), a run that
measured nothing (broken-node: fio was not installed) and a run not isolated
from the page cache (hdd-node's "HDD, cached"). The compare notebook -- the
one the demo and every article use -- is rendered for real with papermill and
must list each failed test with fio's reason, the tests never reached and the
run that measured nothing, and its findings must say what the comparison
covers, in English and Japanese.
"""
import pandas as pd
import pytest

from iolab.report import i18n, failures, narrative, notebooks as report
from cli_helpers import FIXTURES

DATA = FIXTURES / "data"
NO_SPACE = DATA / "ssd-node" / "20261120T223550Z-quick-6c0d"  # SEQ1M-Q8T1-write: ENOSPC, then six tests skipped
NOTHING = DATA / "broken-node" / "20261120T223550Z-quick-a797"  # failed before its first test


def test_not_run_tests_are_the_ones_an_unfinished_run_never_reached():
    manifests = report.select(runs=[NO_SPACE]).manifests
    skipped = failures.not_run_tests(manifests)
    assert len(skipped) == 6 and set(skipped["system"]) == {manifests["system_name"].iloc[0]}
    assert skipped[["test", "direction"]].iloc[0].tolist() == ["SEQ1M-Q1T1", "read"]
    assert failures.planned_tests(manifests) == ["SEQ1M-Q8T1", "SEQ1M-Q1T1", "RND4K-Q32T1", "RND4K-Q1T1"]


def test_completed_runs_leave_nothing_to_say():
    manifests = report.select(DATA, host="nvme-node").manifests
    assert failures.coverage_sentences(manifests, lang="en") == []
    assert failures.coverage_markdown(manifests, lang="ja") == ""
    assert failures.not_run_tests(manifests).empty


@pytest.mark.parametrize("lang, failed, skipped, nothing", [
    ("en", "**SEQ1M-Q8T1 write** on SATA SSD (emulated) failed: `fio exited with 1: fio: io_u error",
     "SATA SSD (emulated): 6 tests not run, because the run stopped before them: SEQ1M-Q1T1 read,",
     "measured nothing: the run ended **failed** before its first test: `fio is not installed"),
    ("ja", "SATA SSD (emulated)の**SEQ1M-Q8T1の書き込み**：「失敗」で終わった",
     "SATA SSD (emulated)：実行がその前に止まったため、6個のテストは実行されなかった：SEQ1M-Q1T1の読み込み、",
     "は何も測定していない：最初のテストの前に状態「失敗」で終了した（`fio is not installed"),
])
def test_coverage_names_the_failed_test_with_fios_reason_the_tests_not_run_and_the_empty_run(
        lang, failed, skipped, nothing):
    manifests = report.select(runs=[NO_SPACE, NOTHING]).manifests
    text = failures.coverage_markdown(manifests, lang=lang, names=manifests["system_name"])
    assert failed in text and "No space left on device" in text
    assert skipped in text and nothing in text
    assert text.count("\n- ") == 3  # one bullet each: the failure, the tests not run, the empty run


def _summary(rows):
    frame = pd.DataFrame(rows, columns=["system", "test", "direction", "value"])
    frame["metric"] = "bw_mbps"
    frame["unit"] = "MB/s"
    frame["cache_isolated"] = [s != "cached" for s in frame["system"]]
    frame["n"] = 3
    frame["ci_low"] = frame["ci_high"] = float("nan")
    return frame


def test_findings_say_which_tests_a_compared_system_lacks():
    summary = _summary([("A", "T1", "read", 100.0), ("B", "T1", "read", 50.0),
                        ("A", "T2", "read", 100.0), ("B", "T2", "read", 40.0),
                        ("A", "T3", "read", 100.0)])
    text = narrative.describe(summary, lang="en")
    assert "B has no figure for T3 read (1 of the 3 tests): the comparison with it covers the other 2." in text
    ja = narrative.describe(summary, lang="ja")
    assert "BにはT3の読み込みの数値がない（3個のテストのうち1個）。" in ja


def test_findings_never_say_only_one_system_was_measured_while_another_fills_the_tables():
    summary = _summary([("A", "T1", "read", 100.0), ("cached", "T1", "read", 9000.0),
                        ("A", "T2", "read", 90.0), ("cached", "T2", "read", 9000.0)])
    text = narrative.describe(summary, lang="en")
    assert "only A was measured" not in text
    assert text.startswith("Only A was isolated from the page cache here, so no other system is compared with it. "
                           "cached is left out of the comparison: not isolated from the page cache")
    assert "キャッシュから隔離していないため比較から外した" in narrative.describe(summary, lang="ja")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_compare_page_lists_failures_under_the_tables_they_explain(render_once, lang):
    md = render_once(data=DATA, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    quick = md.split("## " + ("Recipe: quick" if lang == "en" else "レシピ：quick"))[1]
    heading = "Failed tests and tests not run" if lang == "en" else "失敗したテストと実行されなかったテスト"
    # under the quick recipe's tables: the ENOSPC write with fio's words, the six tests never reached
    assert f"### {heading}" in quick and "No space left on device: write offset=61865984" in quick
    assert ("6 tests not run" if lang == "en" else "6個のテストは実行されなかった") in quick
    # the run that measured nothing has its own section at the end, with its reason, headed as what it is
    # (not a second "failed tests" heading) and without the note on what a fault leaves measured
    nothing = "Runs that measured nothing" if lang == "en" else "何も測定しなかった実行"
    assert f"\n## {heading}" not in md
    last = md.split(f"\n## {nothing}")[-1]
    assert f"\n## {nothing}" in md and "fio is not installed" in last
    assert i18n.text("failures.kept", lang) not in last
    # the findings say what the comparison covers, and leave the cached run out by name
    if lang == "en":
        assert "SATA SSD (emulated) has a figure for 1 of the 8 tests only (SEQ1M-Q8T1 read)" in quick
        assert "HDD, cached is left out of the comparison: not isolated from the page cache" in quick
        assert "**quick**, " in md and "s: 4 tests;" in md.split("**quick**, ")[1]  # its description, then the count
    else:
        assert "SATA SSD（エミュレート）の数値は8個のテストのうち1個（SEQ1M-Q8T1の読み込み）だけ" in quick


def test_coverage_note_beside_a_cached_system_says_cache_isolated():
    """An isolated system alone beside a cached one that fills the table: "only A has results" would be false."""
    from iolab.report import commentary
    summary = _summary([("A", "T1", "read", 100.0), ("cached", "T1", "read", 9000.0),
                        ("A", "T2", "read", 90.0), ("B", "T2", "read", 80.0)])
    summary["unmeasurable"] = False
    text = commentary.describe(summary, lang="en")
    assert "only A has a cache-isolated result for T1 read (the other figures there are the page cache's)" in text
    assert "only A has results" not in text
    assert "T1の読み込みでページキャッシュから隔離した結果はAのみ" in commentary.describe(summary, lang="ja")


def test_a_target_in_ram_is_left_out_of_the_factors_and_said_to_be_memory():
    """tmpfs beside two disks: "tmpfs is 2,341x as fast" would compare memory with storage."""
    summary = _summary([("tmpfs", "T1", "read", 9000.0), ("A", "T1", "read", 100.0), ("B", "T1", "read", 50.0)])
    summary["flags"] = ["ram_backed", None, None]
    text = narrative.describe(summary, lang="en")
    assert "tmpfs is left out of the comparison: its target is on a file system in RAM (tmpfs or ramfs)" in text
    assert text.startswith("A is 2.0x as fast as B in T1 read.") and "tmpfs is" not in text.split(".")[0]
    assert "(ram_backed)" in text  # and the caveat names the flag
    ja = narrative.describe(summary, lang="ja")
    assert "tmpfsは対象がRAM上のファイルシステム（tmpfsまたはramfs）にあるため比較から外した。" in ja


def test_a_system_with_few_figures_is_said_once_not_also_by_what_it_lacks():
    """'has a figure for 1 of the 8 tests only (...)' was followed by 'and the other 7 have no ... figure': the
    same fact twice in one sentence (the demo's failed SATA SSD run)."""
    summary = _summary([("A", f"T{i}", "read", 100.0) for i in range(1, 5)] + [("B", "T1", "read", 50.0)])
    text = narrative.describe(summary, lang="en")
    assert "B has a figure for 1 of the 4 tests only (T1 read): the comparison with it covers that test." in text
    assert "have no B figure" not in text
    ja = narrative.describe(summary, lang="ja")
    assert "Bの数値は4個のテストのうち1個（T1の読み込み）だけで、Bとの比較はその範囲に限られる。" in ja and "残り" not in ja
