"""An article's systems on a Japanese page take full-width brackets (issue 23, item 6): the 2013 article's baseline
"SATA HDD (mem=512M)" reads "SATA HDD（mem=512M）" in ja tables, chart legends and sentences, through the one
bracket rule for names (:func:`iolab.report.i18n.page_name`); the CSVs, articles.yaml and the English page keep
the names as stored. Built from the shipped reference figures only (and the compare notebook for the pages)."""
import re

import pandas as pd
import pytest

from iolab.analysis import reference
from iolab.report import articles, beside, comparisons, figures, i18n, tables

ARTICLE = "dedicated-server-2013"
BASELINE = "SATA HDD (mem=512M)"


def _bracketed(frame) -> list[str]:
    """The stored system names with a half-width bracket (the 2013 article's four)."""
    return [s for s in dict.fromkeys(frame["system"].astype(str)) if "(" in s]


def test_the_rule_typesets_a_names_brackets_on_a_japanese_page_only():
    assert i18n.page_name(BASELINE, "ja") == "SATA HDD（mem=512M）"
    assert i18n.page_name("Intel X25-V 40GB x4 RAID0 (Adaptec 1430SA)", "ja") == \
        "Intel X25-V 40GB x4 RAID0（Adaptec 1430SA）"
    assert i18n.page_name("a (b) c", "ja") == "a（b）c"  # no space beside a full-width bracket
    assert i18n.page_name(BASELINE, "en") == BASELINE and i18n.page_name("NVMe", "ja") == "NVMe"
    # with_note takes the same rule, then the note inside the bracket (one bracket, never two)
    assert i18n.with_note(BASELINE, "規模0.01", "ja") == "SATA HDD（mem=512M、規模0.01）"


def test_the_2013_articles_display_data_names_its_systems_with_full_width_brackets_in_japanese(japanese):
    frame = reference.load(article=ARTICLE)
    stored = _bracketed(frame)
    assert BASELINE in stored and len(stored) == 4
    assert reference.article_info(ARTICLE)["baseline"] == BASELINE  # the data keeps its key
    named = comparisons.names(frame, "ja")
    assert named == {s: i18n.page_name(s, "ja") for s in stored} and named[BASELINE] == "SATA HDD（mem=512M）"
    assert comparisons.names(frame, "en") == {}  # English: every name as stored
    part = frame[(frame["benchmark"] == "bonnie++") & (frame["metric"] == "throughput")]
    for lang in ("en", "ja"):
        expected = [i18n.page_name(s, lang) for s in stored]
        table = articles.reference_table(frame, benchmark="bonnie++", metric="throughput", lang=lang)
        assert [c for c in table.frame.columns if c in expected] == expected  # the table's columns
        env = articles.reference_systems_table(frame, lang=lang)
        assert list(env.frame.index) == expected  # the environment table's rows
        summary = beside.as_summary(part, lang=lang)  # the chart's data
        summary["x"] = [i18n.test_label(t, d, lang) for t, d in zip(summary["test"], summary["direction"])]
        fig = figures.summary_chart(summary, unit="KB/s", ylabel=tables.caption_for("throughput", "KB/s", lang),
                                    lang=lang, published=True, legend_title=i18n.text("labels.system", lang))
        legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert legend == expected
        if lang == "ja":
            assert not any("(" in name or ")" in name for name in [*table.frame.columns, *env.frame.index, *legend])
        else:
            assert not any("（" in name for name in [*table.frame.columns, *env.frame.index, *legend])


def test_measured_systems_beside_the_article_keep_their_page_names():
    """Only the article's own columns are renamed: a run's column is named by its selection (and its scale)."""
    frame = reference.load(article=ARTICLE)
    mine = frame[frame["system"] == BASELINE].assign(system="db (r2)", measured=True)
    both = pd.concat([frame.assign(measured=False), mine], ignore_index=True)
    named = comparisons.names(both, "ja")
    assert "db (r2)" not in named and named[BASELINE] == "SATA HDD（mem=512M）"


@pytest.fixture(scope="module")
def pages(render_once):
    return {lang: render_once(reference=ARTICLE, lang=lang).markdown.read_text(encoding="utf-8")
            for lang in ("en", "ja")}


def test_the_rendered_2013_page_names_its_systems_with_full_width_brackets_in_japanese_only(pages):
    stored = _bracketed(reference.load(article=ARTICLE))
    en, ja = pages["en"], pages["ja"]
    for name in stored:
        shown = i18n.page_name(name, "ja")
        assert name not in ja and shown in ja, name
        # neither bracket half-width beside the name's words (a table's header, a legend's alt text, a sentence)
        head = name.split(" (")[0]
        assert not re.search(re.escape(head) + r" ?\(", ja), name
        assert name in en and shown not in en, name  # the English page as stored
    assert "（" not in en
    # every mention renamed, none lost: the baseline is found under its page name (its comparisons are all said)
    for name in stored:
        assert en.count(name) > 0 and ja.count(i18n.page_name(name, "ja")) == en.count(name), name
