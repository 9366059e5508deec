"""Articles in reports: the source citation, the remarks in Japanese, and your runs beside an article with their caveats.

Everything is rendered for real (papermill, the compare notebook) from the
shipped reference figures and from copies of the committed fixture runs,
whose results.csv is given the flags a real run records.
"""
import csv
import re
import shutil

import pandas as pd
import pytest
import yaml

from iolab.analysis import reference
from iolab.core.errors import IolabError
from iolab.report import articles, beside, i18n, notebooks as report
from cli_helpers import FIXTURES

ARTICLE = "dedicated-server-2013"
REFERENCE_DIR = reference.default_dir()


#: The citations as the source texts give them (a copy of the project's shared record, kept with the figures).
CITATIONS = REFERENCE_DIR / "citations.csv"


def _citations() -> dict:
    with open(CITATIONS, encoding="utf-8") as handle:
        return {row["article"]: row for row in csv.DictReader(handle)}


def test_articles_yaml_cites_what_citations_csv_gives_and_nothing_more():
    """Every article has a row in citations.csv, and its source block holds those facts only:
    the headline, series, author and affiliation where given, no date, URL or publication (none is given)."""
    rows = _citations()
    assert set(rows) == set(reference.articles())
    for name, row in rows.items():
        source = reference.article_info(name)["source"]
        assert (source.get("headline") or "") == row["headline"], name
        assert (source.get("author") or "") == row["author"].replace(" (pen name)", ""), name
        assert (source.get("affiliation") or "") == row["affiliation"].split(" (")[0], name
        assert row["series"].startswith(source.get("series") or ""), name
        assert not {"date", "url", "publication", "year"} & set(source), (name, source)
        assert set(source) <= {"kind", "headline", "series", "series_gloss", "part", "author", "pen_name",
                               "affiliation", "affiliation_self", "as_given"}, name
        assert set(source["as_given"]) == {"en", "ja"}, name


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("name", sorted(reference.articles()))
def test_every_article_cites_its_source_and_says_once_what_is_not_known(name, lang):
    info = reference.article_info(name)
    row = _citations()[name]
    text = articles.citation(name, info, lang)
    assert info["title"][lang] in text and f"data/reference/{info['file']}" in text
    assert text.startswith("**Source**: " if lang == "en" else "**出典**：")
    for given in ("headline", "author"):
        if row[given]:
            assert row[given].replace(" (pen name)", "") in text, (given, text)
    if row["affiliation"]:
        assert row["affiliation"].split(" (")[0] in text
    # nothing invented: no URL, no date (2013 is iolab's name for the article, not a date the source gives)
    assert "http" not in text and "www." not in text and "2013" not in text.split("data/reference")[0]
    # what the source does not give is said once, in one sentence
    marker = "Not given in the source" if lang == "en" else "の記載がないため"
    assert text.count(marker) == 1, text
    missing = {"en": ["publication", "date", "URL"], "ja": ["掲載誌", "日付", "URL"]}[lang]
    unknown = text.split("so not given here" if lang == "en" else "原文には")[-1]
    assert all(word in unknown for word in missing), text
    assert (("headline" if lang == "en" else "見出し、") in unknown) == (not row["headline"]), text
    assert (("author" if lang == "en" else "著者、") in unknown) == (not row["author"]), text
    if lang == "ja":
        assert " (" not in text.split("iolabでの呼び名")[0] and "Source" not in text


def test_citation_in_japanese_quotes_a_title_that_holds_brackets_with_double_brackets():
    text = articles.citation("nytro", reference.article_info("nytro"), "ja")
    assert "『フラッシュメモリを利用したハイブリッドストレージ「Nytro MegaRAID」』（連載「仮想化道場」のコラム）、著者：山本 雅史。" in text
    en = articles.citation("gigaexpress", reference.article_info("gigaexpress"), "en")
    assert en.startswith("**Source**: “SSDに関する検証 その1”, a column in the series “緊急特集!!” (special feature) "
                         "by ミラニスタ (a pen name). As the source gives it: printed as <緊急特集!!SSDに関する検証 その1>")


def test_citation_prints_publication_details_only_when_recorded():
    info = {"file": "x.csv", "title": {"en": "A test", "ja": "テスト"},
            "source": {"kind": "article", "author": "A. Writer", "publication": "Storage Monthly", "date": "2013-05",
                       "url": "https://example.org/a"}}
    text = articles.citation("x", info, "en")
    assert "by A. Writer" in text and "published in Storage Monthly" in text and "dated 2013-05" in text
    assert "https://example.org/a" in text and text.endswith("Not given in the source, so not given here: the headline.")


def test_citation_refuses_an_unknown_kind_of_source():
    with pytest.raises(IolabError, match="unknown source kind"):
        articles.citation("x", {"file": "x.csv", "source": {"kind": "magazine"}}, "en")


def test_every_english_remark_has_a_japanese_one():
    for name in ("dedicated-server-2013.csv", "other-articles.csv"):
        with open(REFERENCE_DIR / name, encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                assert bool(row["note"]) == bool(row["note_ja"]), (name, row)
                if row["note_ja"]:
                    assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", row["note_ja"]), row["note_ja"]


def test_remark_falls_back_to_english_only_where_untranslated():
    assert articles.remark(pd.Series({"note": "one run shown", "note_ja": "1 回だけ"}), "ja") == "1 回だけ"
    assert articles.remark(pd.Series({"note": "one run shown", "note_ja": float("nan")}), "ja") == "one run shown"
    assert articles.remark(pd.Series({"note": "one run shown", "note_ja": "1 回だけ"}), "en") == "one run shown"


def test_japanese_page_shows_the_remarks_in_japanese_with_the_citation(tmp_path):
    ja = report.report(reference="gigaexpress", lang="ja", out=tmp_path / "ja").markdown.read_text(encoding="utf-8")
    assert "記事の注記" in ja
    assert "HDDの約9倍。hdparmのCPU使用率は20%ほどにとどまり" in ja
    assert "1回だけの実行結果" in ja
    for english in ("one run shown", "about 9x the HDD", "did not reach the rated"):
        assert english not in ja, english
    assert "**出典**：「SSDに関する検証 その1」（連載「緊急特集!!」のコラム）、著者：ミラニスタ（ペンネーム）。" in ja
    assert "data/reference/other-articles.csv" in ja


def test_english_article_page_cites_its_source_under_the_title(render_once):
    md = render_once(reference=ARTICLE, lang="en").markdown.read_text(encoding="utf-8")
    head = md.split("\n## ")[0]  # before the first section: the reader sees where the figures come from first
    assert "**Source**: “SSDやioDriveといった高速ストレージの性能をチェック" in head
    assert "Not given in the source, so not given here: the author, publication, date and URL." in head


def _flagged_copy(tmp_path, recipe, flags, isolation=None):
    """A copy of the hdd-node fixture run of ``recipe`` whose rows carry ``flags`` (and ``isolation``)."""
    source = next((FIXTURES / "sections" / "hdd-node").glob(f"*-{recipe}-*"))
    target = tmp_path / "store" / "hdd-node" / source.name
    shutil.copytree(source, target)
    frame = pd.read_csv(target / "results.csv")
    frame["flags"] = flags
    if isolation:
        frame["isolation"] = isolation
    frame.to_csv(target / "results.csv", index=False)
    if isolation:
        manifest = target / "manifest.json"
        manifest.write_text(manifest.read_text().replace('"mode": "cgroup"', f'"mode": "{isolation}"'))
    return target


def test_runs_beside_an_article_keep_their_flags(tmp_path):
    """`iolab report RUN --reference ...`: the run's caveats used to be dropped in the article's view."""
    bonnie = _flagged_copy(tmp_path, "bonnie", "v1_writeback;emulated_latency")
    tio = _flagged_copy(tmp_path, "tiobench", "cache_suspect", isolation="none")
    sel = report.select(None, [bonnie, tio], with_results=True)
    mine = beside.as_reference(sel.results, article=ARTICLE)
    assert set(mine.loc[mine["benchmark"] == "bonnie++", "flags"]) == {"v1_writeback;emulated_latency"}
    tiobench = mine[mine["benchmark"] == "tiobench"]
    assert set(tiobench["flags"]) == {"cache_suspect"} and not tiobench["cache_isolated"].any()
    summary = beside.as_summary(beside.beside(reference.load(article=ARTICLE), sel.results, article=ARTICLE))
    assert set(summary.loc[summary["system"] == "SATA HDD (mem=512M)", "flags"]) == {""}  # the article: none

    # a quick run has no place in the article's tables: named under the citation, not dropped silently
    quick = FIXTURES / "sections" / "ssd-node" / "20261120T230919Z-quick-aa01"
    for lang, sentences in {"en": ["buffered writes under cgroup v1", "(cache_suspect)",
                                   "HDD (emulated) was not isolated from the page cache, and no isolated run",
                                   "Not put beside the article: SATA SSD (emulated) (quick)"],
                            "ja": ["v1_writeback", "cache_suspect", "HDD（エミュレート）はページキャッシュから隔離されておらず",
                                   "記事の表に並べていないもの：SATA SSD（エミュレート）（quick）"]}.items():
        md = report.report([bonnie, tio, quick], reference=ARTICLE, lang=lang, out=tmp_path / lang) \
            .markdown.read_text(encoding="utf-8")
        bonnie_part = [p for p in md.split("\n## ") if p.startswith("Bonnie++")][0]  # its throughput table
        assert ("HDD (emulated)" if lang == "en" else "HDD（エミュレート）") in bonnie_part and "v1_writeback" in bonnie_part
        for sentence in sentences:
            assert sentence in md, (lang, sentence)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_every_articles_test_names_read_as_words(lang):
    """No raw identifier (x25v's 'read_all_positions') in a table or sentence; in Japanese every test named in
    English words is translated (sql-bench's own test names, ATIS & co., stay as the tool prints them)."""
    for name in reference.articles():
        for test in reference.load(article=name)["test"].unique():
            shown = i18n.test_label(test, "", lang)
            assert "_" not in shown, (name, test, lang)
            if lang == "ja" and (" " in test or "_" in test):
                assert shown != test, (name, test)


def test_japanese_method_notes_have_no_space_between_sentences():
    """A folded YAML block joined the 2013 article's Japanese sentences with spaces ('測定した。 キャッシュ')."""
    for name in reference.articles():
        ja = reference.method(reference.article_info(name), "ja")
        assert ja and "。 " not in ja and "、 " not in ja, (name, ja)


def test_runs_with_no_place_in_the_article_are_named_not_dropped():
    """A quick run given with --reference dedicated-server-2013 vanished without a word."""
    quick = FIXTURES / "sections" / "hdd-node" / "20261120T230919Z-quick-8cbf"
    bonnie = FIXTURES / "sections" / "nvme-node" / "20261120T230919Z-bonnie-16e4"
    sel = report.select(None, [quick, bonnie], with_results=True)
    published = reference.load(article=ARTICLE)
    assert beside.left_out(published, sel.results, article=ARTICLE) == ["HDD (emulated)"]
    assert beside.left_out_note(published, sel.results, article=ARTICLE, lang="en") == (
        "Not put beside the article: HDD (emulated) (quick): the article's tables have no place for those tests "
        "(they show bonnie++, tiobench and sql-bench).")
    assert "HDD (emulated)（quick）" in beside.left_out_note(published, sel.results, article=ARTICLE, lang="ja")
    only_bonnie = report.select(None, [bonnie], with_results=True).results
    assert beside.left_out_note(published, only_bonnie, article=ARTICLE) == ""


def test_a_remark_on_a_system_with_no_figure_is_shown_not_lost():
    """x25v-raid0 describes a WD HDD's curve without a figure: no table carries it, so its remark went nowhere."""
    frame = reference.load(article="x25v-raid0")
    specs = reference.table_specs(reference.article_info("x25v-raid0"), frame)
    en = articles.remarks_without_a_table(frame, specs, "en")
    # headed apart from the tables' remarks above it (the page showed "The article's remarks" twice)
    assert en == ("**The article's remarks on what it printed no figures for**\n\n- WD 1TB HDD, Read rate by "
                  "position: typical HDD: throughput falls "
                  "from the outer (start) to the inner (end) of the disk")
    ja = articles.remarks_without_a_table(frame, specs, "ja")
    assert "典型的なHDDの形" in ja and ja.startswith("**数値の掲載がない対象についての記事の注記**")
    two013 = reference.load(article=ARTICLE)
    assert articles.remarks_without_a_table(two013, reference.table_specs(reference.article_info(ARTICLE), two013),
                                            "en") == ""


@pytest.mark.parametrize("lang, with_plus, without", [
    ("en", "Figures as published in the article; +++++ = too fast for the tool to time.",
     "Figures as published in the article."),
    ("ja", "記事に掲載された数値。+++++は速すぎてツールが計測できなかったことを示す。", "記事に掲載された数値。"),
])
def test_the_note_under_a_published_table_is_one_whole_sentence_per_language(lang, with_plus, without):
    """The +++++ explanation is written whole in each locale (published_note_unmeasurable), not glued to
    published_note by cutting its full stop in English only."""
    frame = reference.load(article=ARTICLE)
    bonnie = articles.reference_table(frame, benchmark="bonnie++", metric="throughput", lang=lang)
    assert bonnie.notes == [with_plus] == [i18n.text("labels.published_note_unmeasurable", lang, unmeasurable="+++++")]
    tio = articles.reference_table(frame, benchmark="tiobench", metric="throughput", lang=lang)
    assert tio.notes == [without]


@pytest.mark.parametrize("lang, said", [
    ("en", "- RAID5 SCSI HDD /dev/sda1 and GigaExpress SSD /dev/sdb1 (-T cached reads and -t buffered disk reads): "
           "one run shown"),
    ("ja", "- RAID5 SCSI HDD /dev/sda1、GigaExpress SSD /dev/sdb1（-Tキャッシュ読み込み、-tバッファ付きディスク読み込み）："
           "1回だけの実行結果"),
])
def test_one_remark_on_every_test_of_several_systems_is_said_once(lang, said):
    """gigaexpress: 'one run shown' on both tests of both systems was four lines; one line names them all."""
    text = articles.notes(reference.load(article="gigaexpress"), lang)
    assert said in text.splitlines()
    assert text.count("one run shown" if lang == "en" else "1回だけの実行結果") == 1
    # a remark on some tests of a system only keeps its own line (x25v: read and write differ)
    x25v = articles.notes(reference.load(article="x25v-raid0"), lang).splitlines()
    assert len([line for line in x25v if line.startswith("- ")]) == 3
