"""An article whose columns are comparisons (Nytro's cache on / off, Hyper-V's mirroring on / off) reads as
comparisons, in the page's language, not as systems with the CSV's English names (issue 23 items 5, 6 and 9)."""
import re

import pytest

from iolab.analysis import reference
from iolab.report import articles, comparisons, i18n, notebooks as report


@pytest.mark.parametrize("article", ["nytro", "hyperv-tpcb"])
def test_every_column_of_a_ratio_article_is_a_named_comparison(article):
    frame = reference.load(article=article)
    assert comparisons.is_comparison(frame)
    names = comparisons.names(frame, "ja")
    assert set(names) == set(frame["system"])
    assert not any(re.search(r"\bvs\b|\bon\b|\boff\b", n) for n in names.values())  # said in Japanese
    table = articles.reference_systems_table(frame, lang="ja", caption="")
    assert table.frame.index.name == "比較" and list(table.frame.columns) == ["構成"]


def test_an_article_of_systems_keeps_its_systems():
    frame = reference.load(article="dedicated-server-2013")
    assert not comparisons.is_comparison(frame) and comparisons.labelled(frame, "en") is frame
    # on a Japanese page the systems' own names, their brackets full-width (i18n.page_name): no comparison's name
    assert list(comparisons.labelled(frame, "ja")["system"]) == [i18n.page_name(s, "ja") for s in frame["system"]]
    assert articles.reference_systems_table(frame, lang="en", caption="").frame.index.name == "System"


def _section(markdown: str, heading: str) -> str:
    start = markdown.index("## " + heading)
    end = markdown.find("\n## ", start + 3)
    return markdown[start:end if end >= 0 else None]


def test_nytro_page_lists_comparisons_with_captions_in_one_bracket(tmp_path):
    en = report.report(reference="nytro", lang="en", out=tmp_path / "en").markdown.read_text(encoding="utf-8")
    ja = report.report(reference="nytro", lang="ja", out=tmp_path / "ja").markdown.read_text(encoding="utf-8")
    for page in (en, ja):
        assert "Nytro MegaRAID cache on vs" not in page  # the CSV's name, as if it were a system
    assert "| Comparison | Set-up |" in en and "| Flash cache on / off | Nytro MegaRAID card" in en
    assert "**CrystalDiskMark 3: speed-up with the flash cache (x)**" in en
    assert "**TPC-C: speed-up with the flash cache (x, vendor figure)**" in en
    assert "| 比較 | 構成 |" in ja and "**CrystalDiskMark 3：フラッシュキャッシュによる高速化（倍）**" in ja
    assert not re.search(r"\)\s*\(|）（", en + ja)  # never '(cache on / off) (x)'
    # a lone figure is said once in its section: by the findings, not also by the sentence in place of a chart
    tpcc = _section(en, "TPC-C")
    assert tpcc.count("9x") == 1 and "- **Flash cache on / HDDs only**, transactions: 9x as fast" in tpcc


def test_hyperv_page_in_japanese_names_its_comparisons_in_japanese(tmp_path):
    ja = report.report(reference="hyperv-tpcb", lang="ja", out=tmp_path).markdown.read_text(encoding="utf-8")
    for english in ("network mirroring on vs off", "vs LeftHand mirrored", "| システム |"):
        assert english not in ja, english
    assert "| ネットワークミラーリング有効／無効 | LeftHandのiSCSIストレージ |" in ja
    # the article's "more than 2.5x" is said by the finding, not as 2.5x with the remark repeating it under it
    assert "**IO Accelerator／ミラーリングしたLeftHand**、トランザクション：2.5倍を超える速さ（記事の数値）。" in ja
    assert "2.5倍を超える" in ja and ja.count("2.5倍を超える") == 1
    assert _section(ja, "TPC-B：iSCSI").count("10%") == 1


def test_a_lower_bound_the_article_gives_is_said_as_one():
    frame = reference.load(article="hyperv-tpcb")
    speedup = frame[frame["metric"] == "speedup"]
    assert comparisons.more_than(frame) == {"StorageWorks IO Accelerator vs LeftHand mirrored"}
    assert articles.ratio_findings(speedup, "en") == \
        "- **IO Accelerator / mirrored LeftHand**, transactions: more than 2.5x as fast, as the article gives it."
    assert articles.notes(speedup, "en") == ""  # its remark, "more than 2.5x", is the finding's "more than"
    overhead = frame[frame["metric"] == "overhead"]
    assert "3 VMs x 4 vCPU" in articles.notes(overhead, "en")  # other remarks stay
