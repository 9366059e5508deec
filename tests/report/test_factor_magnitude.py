"""Factors from 100 up are said as orders of magnitude in prose, the number in brackets, by one rule
(iolab.report.i18n.times, issue 23 item 5); tables keep the number."""
import re

import pytest

import pandas as pd

from iolab.report import commentary, i18n, narrative, notebooks as report
from iolab.report.sections.sqlbench import sqlbench_section
from cli_helpers import ROOT
from test_commentary import summary

FIXTURES = ROOT / "tests" / "fixtures" / "data"
SECTIONS = ROOT / "tests" / "fixtures" / "sections"


@pytest.mark.parametrize("value, en, ja", [
    (2.54, "2.5x", "2.5倍"),
    (99.4, "99x", "99倍"),
    (100.0, "two orders of magnitude (100x)", "2桁（100倍）"),
    (121.8, "more than two orders of magnitude (122x)", "2桁以上（122倍）"),
    (8027.6, "more than three orders of magnitude (8,028x)", "3桁以上（8,028倍）"),
    (431078.0, "more than five orders of magnitude (431,078x)", "5桁以上（431,078倍）"),
])
def test_one_rule_for_a_factor_in_prose(value, en, ja):
    assert i18n.times(value, "en") == en and i18n.times(value, "ja") == ja
    assert i18n.factor(value) in en  # the number is the one tables print


def test_a_lower_value_and_a_range_follow_the_same_rule():
    assert i18n.times(2.5, "en", fraction=True) == "by a factor of 2.5"
    assert i18n.times(897.0, "en", fraction=True) == "by more than two orders of magnitude (897x)"
    assert i18n.times(897.0, "ja", fraction=True) == "2桁以上（897分の1）"
    assert i18n.times_range(53.0, 126.0, "en") == "53–126x"  # the low end decides: 53x is not two orders
    assert i18n.times_range(2341.0, 2711.0, "en") == "more than three orders of magnitude (2,341–2,711x)"


def test_constructed_frames_say_a_ram_target_and_a_one_sample_maximum_as_orders_of_magnitude():
    ram = summary([("tmpfs", "SEQ", "read", 2711.0), ("disk", "SEQ", "read", 1.0),
                   ("tmpfs", "RND", "read", 2341.0), ("disk", "RND", "read", 1.0)])
    text = commentary.describe(ram, lang="en", baseline="disk")
    assert "tmpfs leads with 2,711 MB/s, more than three orders of magnitude (2,711x) above disk." in text
    assert "3桁以上（2,711倍）" in commentary.describe(ram, lang="ja", baseline="disk")
    assert narrative.pair_paragraph(ram, "tmpfs", "disk", lang="en") == \
        "tmpfs is more than three orders of magnitude (2,341–2,711x) faster than disk in every test."
    lat = summary([("fast", "a", "", 0.046), ("slow", "a", "", 19830.0)], metric="lat_max_us", unit="ms")
    text = commentary.describe(lat, lang="en", baseline="slow")
    assert "slow takes more than five orders of magnitude (431,087x) longer: 19,830 ms." in text
    assert "the largest factor between two of them here, more than five orders of magnitude (431,087x)," in text
    small = summary([("A", "SEQ", "read", 200.0), ("B", "SEQ", "read", 100.0)])
    assert "A leads with 200 MB/s, 2.0x that of B." in commentary.describe(small, lang="en")


#: a factor of 100 or more written as a bare number in prose: '8,028x', '431,078倍' (not inside the brackets
#: after 'orders of magnitude' / '桁以上')
_BARE = re.compile(r"(?<![（(\d,.–])(\d{1,3}(?:,\d{3})+|\d{3,})(?:\.\d+)?(?:x\b|倍|分の1)")


def _prose(markdown: str) -> list[str]:
    """The page's sentences: no table rows, no code, no image."""
    return [line for line in markdown.splitlines()
            if line.strip() and not line.lstrip().startswith(("|", "![", "<", "```"))]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_rendered_pages_say_no_factor_from_100_up_as_a_bare_number(render_once, lang):
    article = render_once(reference="dedicated-server-2013", lang=lang).markdown.read_text(encoding="utf-8")
    demo = render_once(data=FIXTURES, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    for page in (article, demo):
        bare = [m.group(0) for line in _prose(page) for m in _BARE.finditer(line)]
        assert not bare, bare
    said = "more than three orders of magnitude (8,028x)" if lang == "en" else "3桁以上（8,028倍）"
    assert said in article  # the cached 16 GB run's random read, as the cache section says it
    tables = [line for line in article.splitlines() if line.startswith("|")]
    assert tables and not any("orders of magnitude" in t or "桁以上" in t for t in tables)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_section_store_says_its_emulated_ssd_against_hdd_in_orders_of_magnitude(render_once, lang):
    """The sections fixture store (the report notebook, as test_report_why reads it): its SATA SSD is hundreds of
    times the HDD at 4K, and every such factor on the page is said as orders of magnitude."""
    page = render_once(data=SECTIONS, notebook="report", lang=lang).markdown.read_text(encoding="utf-8")
    bare = [m.group(0) for line in _prose(page) for m in _BARE.finditer(line)]
    assert not bare, bare
    said = re.findall(r"more than two orders of magnitude \((\d+)(?:–\d+)?x\)" if lang == "en"
                      else r"2桁以上（(\d+)(?:–\d+)?倍）", page)
    assert said and all(100 <= int(n) < 1000 for n in said)


def test_sqlbench_widest_gap_beside_a_ram_disk_is_said_as_orders_of_magnitude():
    """The stored sql-bench run of the emulated HDD beside a constructed system 300 times as fast in every test."""
    hdd = report.select(str(SECTIONS / "hdd-node"), with_results=True).for_recipe("sqlbench").results
    ram = hdd.assign(system="RAM disk", host="ram-node", run_id=hdd["run_id"] + "-ram",
                     runtime_s=hdd["runtime_s"] / 300)
    both = pd.concat([hdd, ram], ignore_index=True)
    en = " ".join(sqlbench_section(both, lang="en").sentences)
    ja = "".join(sqlbench_section(both, lang="ja").sentences)
    assert "more than two orders of magnitude (300x) longer." in en and "x as long" not in en
    assert "2桁以上（300倍）長い。" in ja


def test_every_orders_of_magnitude_sentence_has_its_plain_one_with_the_same_fields():
    import string

    def keys(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield from keys(value, path) if isinstance(value, dict) else [path]
    for lang in ("en", "ja"):
        found = [k for k in keys(i18n.catalog(lang)) if k.endswith("_magnitude")]
        assert len(found) >= 8
        for key in found:
            fields = [{f for _, f, _, _ in string.Formatter().parse(i18n.text(k, lang)) if f}
                      for k in (key, key[:-len("_magnitude")])]
            assert fields[0] == fields[1], key
