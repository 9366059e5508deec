"""Article-shaped tables: statistics behind them, shape, units, formatting, en/ja."""
from pathlib import Path

import re

import pandas as pd
import pytest

from iolab.analysis import reference
from iolab.report import articles, commentary, environment, notebooks as report, tables
from iolab.core.errors import IolabError
import cli_helpers
from cli_helpers import ROOT

FIXTURES = cli_helpers.FIXTURES / "data"


def results(rows):
    """rows: (system, test, direction, rep, bw_mbps[, flags, valid, isolation])."""
    out = []
    for row in rows:
        system, test, direction, rep, bw, *rest = row
        flags, valid, isolation = (rest + ["", True, "direct"][len(rest):])[:3]
        out.append({"system": system, "label": system, "host": system.lower(), "test": test, "direction": direction,
                    "rep": rep, "bw_mbps": bw, "iops": bw * 1e6 / 4096, "lat_mean_us": 1000.0 * rep,
                    "flags": flags, "valid": valid, "error": None, "isolation": isolation, "target": "t"})
    return pd.DataFrame(out)


def test_summarize_mean_ci_best_flags_and_invalid_rows():
    data = results([
        ("B", "SEQ", "read", 1, 100.0), ("B", "SEQ", "read", 2, 102.0), ("B", "SEQ", "read", 3, 104.0, "cpu_bound"),
        ("B", "SEQ", "read", 4, 999.0, "", False),  # invalid: left out
        ("A", "SEQ", "read", 1, 50.0, "", True, "none"),
    ])
    s = tables.summarize(data, value="bw_mbps")
    assert list(s["system"]) == ["B", "A"]  # the data's order, not alphabetical
    b = s.iloc[0]
    assert b["n"] == 3 and b["n_excluded"] == 1
    assert b["mean"] == pytest.approx(102.0) and b["value"] == pytest.approx(102.0)
    assert b["best"] == pytest.approx(104.0)
    # Student's t, 2 degrees of freedom: 4.303 * 2 / sqrt(3)
    assert b["ci_high"] - b["mean"] == pytest.approx(4.303 * 2 / 3 ** 0.5, rel=1e-3)
    assert b["flags"] == "cpu_bound" and b["unit"] == "MB/s"
    assert bool(b["cache_isolated"]) and not bool(s.iloc[1]["cache_isolated"])
    best = tables.summarize(data, value="bw_mbps", statistic="best")
    assert best.iloc[0]["value"] == pytest.approx(104.0)


def test_summarize_latency_in_milliseconds_and_best_is_the_minimum():
    data = results([("A", "RND", "read", 1, 1.0), ("A", "RND", "read", 2, 1.0)])
    s = tables.summarize(data, value="lat_mean_us", statistic="best")
    assert s.iloc[0]["unit"] == "ms"
    assert s.iloc[0]["mean"] == pytest.approx(1.5) and s.iloc[0]["value"] == pytest.approx(1.0)


def test_summarize_rejects_unknown_statistic_and_missing_system_column():
    data = results([("A", "T", "read", 1, 1.0)])
    with pytest.raises(IolabError, match="unknown statistic 'max'"):
        tables.summarize(data, statistic="max")
    with pytest.raises(IolabError, match="no column 'who'"):
        tables.summarize(data, system="who")


def test_pivot_rows_tests_columns_systems_with_ci():
    data = results([(s, t, d, r, v * (1 + r / 100)) for s, v in (("HDD", 100.0), ("SSD", 500.0))
                    for t in ("SEQ1M-Q8T1", "RND4K-Q1T1") for d in ("read", "write") for r in (1, 2, 3)])
    table = tables.pivot(tables.summarize(data), lang="en")
    assert list(table.frame.columns) == ["HDD", "SSD"]
    assert list(table.frame.index) == [("SEQ1M-Q8T1", "read"), ("SEQ1M-Q8T1", "write"),
                                       ("RND4K-Q1T1", "read"), ("RND4K-Q1T1", "write")]
    assert table.caption == "Throughput (MB/s)"
    assert table.frame.iloc[0, 0].startswith("102 ± ")
    assert table.data.iloc[0, 1] == pytest.approx(510.0)
    ja = tables.pivot(tables.summarize(data), lang="ja")
    assert ja.caption == "スループット（MB/秒）"
    assert ("SEQ1M-Q8T1", "読み込み") in list(ja.frame.index)


def test_article_table_is_crystaldiskmark_shaped():
    data = results([(s, t, d, 1, 10.0) for s in ("A", "B") for t in ("SEQ1M-Q8T1", "RND4K-Q1T1")
                    for d in ("read", "write")])
    table = tables.article_table(data, statistic="best")
    assert list(table.frame.index) == ["SEQ1M-Q8T1", "RND4K-Q1T1"]
    assert list(table.frame.columns) == [("A", "read"), ("A", "write"), ("B", "read"), ("B", "write")]
    assert "±" not in table.frame.iloc[0, 0]  # a CI belongs to the mean only
    assert table.notes == ["Values come from a single repetition: no confidence interval "
                           "(run with --repeat 3 or more for one)."]
    three = results([(s, t, d, rep, 10.0 + rep) for s in ("A", "B") for t in ("SEQ1M-Q8T1",)
                     for d in ("read",) for rep in (1, 2, 3)])
    assert tables.article_table(three, statistic="best").notes == ["Values are the best of 3 repetitions."]


def test_results_table_has_metric_and_unit_in_the_header():
    data = results([("A", "T", "read", r, 100.0 + r) for r in (1, 2, 3)])
    table = tables.results_table(data, metrics=("bw_mbps", "iops", "lat_mean_us"))
    heads = {c[0] for c in table.frame.columns}
    assert heads == {"Throughput (MB/s)", "IOPS", "Mean latency (ms)"}
    ja = tables.results_table(data, metrics=("bw_mbps", "lat_mean_us"), lang="ja")
    assert {c[0] for c in ja.frame.columns} == {"スループット（MB/秒）", "平均レイテンシ（ミリ秒）"}


def test_table_markdown_and_html():
    data = results([("A|x", "T", "read", 1, 1.5)])
    table = tables.pivot(tables.summarize(data), lang="en", ci=False)
    md = table.to_markdown()
    assert md.splitlines()[0] == "**Throughput (MB/s)**"
    assert "| Test | Direction | A\\|x |" in md and "|---|---|---:|" in md
    html = table._repr_html_()
    assert "<caption>Throughput (MB/s)</caption>" in html and "<th class=\"iolab-word\" style=\"text-align: left;\">Test</th>" in html


def test_reference_table_shows_figures_as_published():
    frame = reference.load(article="dedicated-server-2013")
    table = articles.reference_table(frame, benchmark="bonnie++", metric="throughput", lang="en")
    assert table.caption == "bonnie++: Throughput (KB/s)"
    assert table.frame.loc["Block write", "SSD Intel 330 (mem=512M)"] == "258,506"
    assert table.frame.loc["Per-char read", "SATA HDD (16GB RAM)"] == "+++++"
    tio = articles.reference_table(frame, benchmark="tiobench", metric="throughput", lang="ja")
    # the article's system on a Japanese page: its bracket full-width (i18n.page_name), the figure as published
    assert tio.frame.loc["シーケンシャル読み込み", "SATA HDD（16GB RAM）"] == "19,339.364"
    assert "（MB/秒）" in tio.caption
    with pytest.raises(IolabError, match="no 'nothing' figures"):
        articles.reference_table(frame, benchmark="bonnie++", metric="nothing")


def test_reference_table_explains_plus_signs_only_where_there_are_some():
    """'+++++ = too fast for the tool to time' under a table with no +++++ explains nothing shown."""
    frame = reference.load(article="dedicated-server-2013")
    bonnie = articles.reference_table(frame, benchmark="bonnie++", metric="throughput", lang="en")
    assert bonnie.notes == ["Figures as published in the article; +++++ = too fast for the tool to time."]
    tio = articles.reference_table(frame, benchmark="tiobench", metric="throughput", lang="en")
    assert tio.notes == ["Figures as published in the article."]
    ja = articles.reference_table(frame, benchmark="tiobench", metric="throughput", lang="ja")
    assert ja.notes == ["記事に掲載された数値。"]
    ja = articles.reference_table(frame, benchmark="bonnie++", metric="rate", lang="ja")
    assert ja.notes == ["記事に掲載された数値。+++++は速すぎてツールが計測できなかったことを示す。"]


def test_article_remarks_are_translated_in_the_report_layer():
    """The article's own remarks under a table: the heading in the report's language, unmeasurable rows left out."""
    frame = reference.load(article="gigaexpress")
    part = frame[(frame["benchmark"] == "hdparm") & (frame["metric"] == "throughput")]
    en, ja = articles.notes(part, "en"), articles.notes(part, "ja")
    # 'one run shown' on both tests of both systems: one line (articles.notes), then the mean's own remark
    assert en.startswith("**The article's remarks**\n\n- RAID5 SCSI HDD /dev/sda1 and GigaExpress SSD /dev/sdb1 "
                         "(-T cached reads and -t buffered disk reads): one run shown")
    assert ja.startswith("**記事の注記**\n\n")
    assert en.count("\n- ") == ja.count("\n- ") == 2
    assert articles.notes(part[part["note"].astype(str).str.strip() == ""], "en") == ""


def test_environment_and_provenance_tables_from_fixture_manifests():
    sel = report.select(FIXTURES, with_results=True)
    env = environment.environment_table(sel.manifests, lang="en", names=sel.manifests["system_name"])
    # six runs, six columns: a label used by two recipes gets the recipe added
    assert env.frame.shape[1] == 6
    assert "HDD (emulated) · crystaldiskmark" in env.frame.columns
    assert env.frame.loc["Cache isolation", "HDD, cached"] == "none"
    assert env.frame.loc["Test size", "NVMe"] == "1 GiB"
    ja = environment.environment_table(sel.manifests, lang="ja")
    assert "キャッシュの隔離" in ja.frame.index and "カーネル" in ja.frame.index
    prov = environment.provenance_table(report.select(FIXTURES).manifests, lang="en")
    failed = prov.frame[prov.frame["Status"].str.startswith("failed")]
    assert len(failed) == 2 and failed["Status"].str.contains("No space left|fio is not installed").all()


def test_many_systems_turn_the_tables():
    data = results([(f"srv{i:02d}", t, d, 1, 100.0 + i) for i in range(10) for t in ("SEQ", "RND")
                    for d in ("read", "write")])
    table = tables.article_table(data)
    assert table.frame.shape == (10, 4)
    assert table.frame.index.name == "System" and list(table.frame.columns)[0] == ("SEQ", "read")
    assert tables.article_table(data, orient="tests").frame.shape == (2, 20)
    sel = report.select(FIXTURES, with_results=True)
    env = environment.environment_table(sel.manifests, orient="systems")
    assert env.frame.shape[0] == 6 and "Kernel" in env.frame.columns


def test_variants_of_one_test_are_not_pooled():
    data = results([("A", "tpcb", "", rep, 100.0 * jobs) for jobs in (1, 8) for rep in (1, 2)])
    data["numjobs"] = [1, 1, 8, 8]
    s = tables.summarize(data)
    assert dict(zip(s["test"], s["value"])) == {"tpcb (numjobs=1)": 100.0, "tpcb (numjobs=8)": 800.0}
    same = results([("A", "SEQ", "read", rep, 1.0) for rep in (1, 2)]).assign(numjobs=1)
    assert list(tables.summarize(same)["test"]) == ["SEQ"]


def test_no_memory_limit_row_for_o_direct_runs():
    """An O_DIRECT run sets no memory limit; the environment table must not suggest one."""
    base = {"run_id": "r1", "host": "h", "recipe": "quick", "label": "disk", "status": "completed",
            "options": {"mem_limit": "512M", "size": "64M"}}
    direct = environment.environment_table([{**base, "isolation": {"mode": "direct", "mem_limit": 512 * 2**20}}])
    assert "Memory limit" not in direct.frame.index
    cgroup = environment.environment_table([{**base, "isolation": {"mode": "cgroup", "mem_limit": 512 * 2**20}}])
    assert cgroup.frame.loc["Memory limit", "disk"] == "512 MiB"


def test_reference_systems_table_has_no_column_of_dashes():
    from iolab.analysis import reference
    # nytro's columns are comparisons: each with its set-up (iolab.report.comparisons), no empty system columns
    nytro = articles.reference_systems_table(reference.load(article="nytro"))
    assert list(nytro.frame.columns) == ["Set-up"] and len(nytro.frame) == 2
    full = articles.reference_systems_table(reference.load(article="dedicated-server-2013"))
    assert list(full.frame.columns) == ["Device", "Memory", "Cache isolation"]
    # an article that names its systems and nothing else of them: a sentence, not a table of one column
    assert isinstance(articles.reference_environment(reference.load(article="dedicated-server-2013")), tables.Table)
    assert articles.reference_environment(reference.load(article="gigaexpress")) == (
        "The article gives its systems by name only: **RAID5 SCSI HDD /dev/sda1** and **GigaExpress SSD /dev/sdb1**.")
    assert articles.reference_environment(reference.load(article="x25v-raid0"), lang="ja").startswith(
        "記事はシステムを名前だけで示している：**Intel X25-V 40GB x4 RAID0（Adaptec 1430SA）**、")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_articles_ratio_table_states_its_ratios_not_a_coverage_note(lang):
    """Nytro and Hyper-V print speed-ups and overheads (one column that is itself a comparison): the findings
    state them with the published numbers, not 'only X has results ... nothing to compare'."""
    nytro = reference.load(article="nytro")
    cdm = nytro[nytro["benchmark"] == "crystaldiskmark-3"]
    text = articles.ratio_findings(cdm, lang)
    system = "Flash cache on / off" if lang == "en" else "フラッシュキャッシュ有効／無効"  # articles.yaml's compares
    if lang == "en":
        assert text == (f"- **{system}**: from 3.3x (Sequential read) to 90x (4K QD32 random read/write) as fast, "
                        "as the article gives it; the table lists every test.")
    else:
        assert text == (f"- **{system}**：3.3倍（シーケンシャル読み込み）から90倍（4K QD32ランダム読み書き）まで速い"
                        "（記事の数値。各テストは表のとおり）。")
    tpcc = articles.ratio_findings(nytro[nytro["benchmark"] == "tpc-c"], lang)
    assert ("transactions: 9x as fast" if lang == "en" else "トランザクション：9倍の速さ") in tpcc  # as published: 9
    hyperv = reference.load(article="hyperv-tpcb")
    cost = articles.ratio_findings(hyperv[hyperv["metric"] == "overhead"], lang)
    assert ("transactions: an overhead of 10%" if lang == "en" else "トランザクション：オーバーヘッド10%") in cost
    assert articles.is_ratio(cdm) and not articles.is_ratio(reference.load(article="gigaexpress"))


def test_the_original_tools_figures_are_not_pooled_with_iolabs_as_repetitions():
    """Bonnie++ itself beside iolab's equivalent (one repetition each): the plain report averaged 0.48 and 1.24 MB/s
    as two repetitions and said 'CoV up to 65%'."""
    rows = report.select(ROOT / "tests" / "fixtures" / "sections", host=["nvme-node"], recipe=["bonnie"],
                         with_results=True).results
    s = tables.summarize(rows).set_index("test")
    assert s.loc["putc", "n"] == 1 and s.loc["putc", "value"] == pytest.approx(0.479232)
    assert s.loc["putc (bonnie++)", "n"] == 1 and s.loc["putc (bonnie++)", "value"] == pytest.approx(1.24416)
    assert s["cov"].isna().all()


def test_samples_along_a_device_are_one_measurement_not_repetitions():
    """GNOME Disks' 100 reads at positions along the disk (one repetition): their mean is the run's figure; the
    plain report said 'mean of 100 repetitions' with a 95% CI and flagged the HDD's outer-to-inner decline as
    high variance."""
    rows = report.select(ROOT / "tests" / "fixtures" / "sections", host=["disk-node"], with_results=True).results
    s = tables.summarize(rows).set_index("test")
    read = rows[rows["test"] == "read-rate"]
    assert s.loc["read-rate", "n"] == 1 and s.loc["read-rate", "value"] == pytest.approx(read["bw_mbps"].mean())
    assert pd.isna(s.loc["read-rate", "ci_low"]) and pd.isna(s.loc["read-rate", "cov"])
    assert "high_variance" not in set(commentary.caveats(tables.summarize(rows))["flag"])


def test_the_environment_table_says_how_each_run_was_confined():
    """Issue 27: the report says a run went without the kernel's boundary, in both languages."""
    confined = {"label": "a", "confinement": {"confined": True, "tool": "bubblewrap 0.8.0"}}
    loose = {"label": "b", "confinement": {"confined": False, "reason": "--unconfined: bwrap is not installed"}}
    old = {"label": "c"}
    en = environment.environment_table([confined, loose, old], lang="en").frame
    assert en.loc["Confinement", "a"].startswith("bubblewrap 0.8.0")
    assert en.loc["Confinement", "b"] == "UNCONFINED: --unconfined: bwrap is not installed"
    assert en.loc["Confinement", "c"] == environment.DASH
    ja = environment.environment_table([confined, loose], lang="ja").frame
    assert ja.loc["サンドボックス", "b"].startswith("なし（")


def test_html_keeps_row_labels_and_values_on_one_line():
    """The ja report's results table broke "SEQ1M-Q8T1" and "読み込み" (row labels) and "0.435 ±" / "0.011" (a value)
    over two lines: every level of row labels is marked for the page's CSS, and a value's ± holds its numbers."""
    frame = pd.DataFrame({"MB/s": ["0.435 ± 0.011"]},
                         index=pd.MultiIndex.from_tuples([("SEQ1M-Q1T1", "読み込み")], names=["テスト", "方向"]))
    html = tables.Table(frame, caption="結果")._repr_html_()
    assert 'class="dataframe iolab-table iolab-labels-2"' in html
    assert "0.435&nbsp;±&nbsp;0.011" in html and "0.435 ± 0.011" in tables.Table(frame).to_markdown()


@pytest.mark.parametrize("stamp, shown", [
    ("2026-11-20T22:35:50+00:00", "2026-11-20 22:35 UTC"),
    ("2026-11-21T07:35:50+09:00", "2026-11-20 22:35 UTC"),  # one zone on the page: UTC
    ("2026-11-20T22:35:50", "2026-11-20 22:35"),  # no zone recorded: none invented
    ("not a time", "not a time"),
])
def test_a_run_start_reads_as_a_date_and_time(stamp, shown):
    """The environment table printed '2026-11-20T22:35:50+00:00', broken at its hyphen in every column."""
    from iolab.report import environment
    assert environment.when(stamp) == shown


# ---------------------------------------------------------------------------
# a note two tables share is said once (issue 23)


def test_the_throughput_and_iops_tables_share_one_repetitions_note():
    sel = report.select(FIXTURES, recipe="quick", with_results=True)
    separate = [tables.article_table(sel.results, metric=m) for m in ("bw_mbps", "iops")]
    assert separate[0].notes == separate[1].notes and separate[0].notes  # what the page showed twice
    shown = tables.article_tables(sel.results, metrics=("bw_mbps", "iops"))
    assert shown[0].notes == separate[0].notes and shown[1].notes == []
    assert separate[1].notes[0] not in shown[1].to_markdown()
    # the tables themselves unchanged
    assert [t.frame.equals(s.frame) for t, s in zip(shown, separate)] == [True, True]
    # a note that differs (one table from a single pass) stays under its own table
    one = sel.results[(sel.results["rep"] == 1) | (sel.results["test"] != "SEQ1M-Q8T1")].copy()
    one.loc[one["test"] == "SEQ1M-Q8T1", "iops"] = float("nan")
    both = tables.article_tables(one, metrics=("bw_mbps", "iops"))
    assert both[0].notes and both[1].notes and both[0].notes != both[1].notes


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_compare_page_says_the_repetitions_note_once_per_recipe(render_once, lang):
    md = render_once(data=FIXTURES, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    sel = report.select(FIXTURES, recipe="quick", with_results=True)
    note = tables.article_table(sel.results, metric="bw_mbps", lang=lang).notes[0]
    quick = md.split("## " + report.i18n.text("headings.recipe", lang, recipe="quick"), 1)[1].split("\n## ", 1)[0]
    assert quick.count(note) == 1


# ---------------------------------------------------------------------------
# a steady-state run's figure is its measurement window of rounds, not a single repetition (issue 23)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_steady_state_tables_note_says_window_of_rounds_not_repeat(lang):
    """The note under a steady-state summary table said 'a single repetition (run with --repeat 3 or more)'."""
    from iolab.report import sections, steady_window
    sel = report.select(None, [cli_helpers.FIXTURES / "flash"], recipe="steady-state", lang=lang)
    _, rest = sections.build(sel.results)
    rows = steady_window.summary_rows(rest, sel.results, sel.manifests).rows
    assert steady_window.in_window(rows).sum() == 2  # one row per run's window, beside its precondition pass
    for table in (tables.results_table(rows, lang=lang), tables.article_table(rows, lang=lang)):
        assert table.notes == [report.i18n.text("repetitions_note.single_window", lang)]
        assert "--repeat" not in table.notes[0]
    # the precondition pass alone (no window): still a single pass, and --repeat still the advice
    plain = rows[~steady_window.in_window(rows)]
    assert tables.results_table(plain, lang=lang).notes == [report.i18n.text("labels.single_note", lang)]


def test_window_rows_beside_repeated_rows_keep_the_repetitions_note_and_say_the_window():
    from iolab.report import sections, steady_window
    steady = report.select(None, [cli_helpers.FIXTURES / "flash"], recipe="steady-state")
    _, rest = sections.build(steady.results)
    rows = steady_window.summary_rows(rest, steady.results, steady.manifests).rows
    quick = report.select(FIXTURES, recipe="quick", with_results=True).results
    note = tables.results_table(pd.concat([quick, rows], ignore_index=True)).notes[0]
    alone = tables.results_table(quick).notes[0]
    assert note.startswith(tables.repetitions_note(pd.Series([3, 1]), "mean", "en"))
    assert note.endswith(report.i18n.text("repetitions_note.window", "en")) and alone != note
    assert "--repeat" not in note


def test_a_column_of_words_is_set_flush_left_and_figures_flush_right():
    """The article pages' comparison table has one column of set-ups ("Nytro MegaRAID card, three SATA HDDs in
    RAID5"): it was right-aligned like figures. Words go left, figures (shown as "1,840", "0.43 ± 0.01", "90x")
    right, in Markdown and in the HTML (a class the page's CSS sets left)."""
    frame = pd.DataFrame({"Set-up": ["LeftHand iSCSI storage", "StorageWorks IO Accelerator"],
                          "Speed-up": ["90x", "2.5"], "MB/s": ["1,840", "0.43 ± 0.01"], "Note": [tables.DASH, "cache on"]},
                         index=pd.Index(["on / off", "accelerator"], name="Comparison"))
    table = tables.Table(frame)
    assert table.word_columns() == [True, False, False, True]
    assert table.to_markdown().splitlines()[1] == "|---|---|---:|---:|---|"
    cells = [re.findall(r"<(?:td|th)([^>]*)>", row) for row in re.findall(r"<tr.*?</tr>", table._repr_html_(), re.S)]
    # the row labels too; each cell in its own style, which JupyterLab (no report CSS) honours
    assert len(cells) == 3 and all([' class="iolab-word" style="text-align: left;"' in c for c in row]
                                   == [True, True, False, False, True] for row in cells), cells
    # however wide: the 14th column of words is marked as the 2nd (the page's CSS had rules up to the 12th)
    wide = tables.Table(pd.DataFrame([[1] * 12 + ["words"]], columns=[f"c{i}" for i in range(13)]))
    assert re.findall(r'<td class="iolab-word"[^>]*>(\w+)</td>', wide._repr_html_()) == ["words"]
    numbers = tables.Table(frame[["Speed-up"]], data=pd.DataFrame({"Speed-up": [90.0, float("nan")]},
                                                                    index=frame.index))
    assert numbers.word_columns() == [False]
    from iolab.report import notebooks
    assert "iolab-words" not in notebooks._HTML_TEMPLATE  # no per-column rules to run out of
