"""The exported HTML in a real browser: headless Chromium, offline, from file://.

A probe script is added to a copy of each report; after load it records the
images (and whether each decoded), the tables and every resource the page
fetched. Chromium runs with name resolution and proxying pointed at nothing, so
a report that needed the network would show it. Needs Debian's ``chromium``
package (``apt-get install chromium``).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.report import notebooks as report
from cli_helpers import ROOT
from test_beside_article import RUNS as BESIDE_RUNS

FIXTURES = ROOT / "tests" / "fixtures" / "data"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

PROBE = """
<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var result = {
    images: images.length,
    broken: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length,
    alts: images.map(function (i) { return i.alt; }),
    tables: document.querySelectorAll("table").length,
    captions: Array.prototype.map.call(document.querySelectorAll("table caption"), function (c) { return c.textContent; }),
    code: document.querySelectorAll(".jp-InputArea, .jp-CodeMirrorEditor").length,
    fetched: performance.getEntriesByType("resource").map(function (r) { return r.name; })
                 .filter(function (n) { return n.indexOf("data:") !== 0; }),
    title: document.title,
    font: getComputedStyle(document.body).fontFamily,
    text: document.body.innerText,
    // a cell or title whose text does not fit: wider content than its box shows, or past the page's edge
    overflowing: Array.prototype.filter.call(
        document.querySelectorAll("td, th, caption, h1, h2, h3, h4, p, li"),
        function (e) {
          var r = e.getBoundingClientRect();
          return e.scrollWidth > e.clientWidth + 1 || r.right > document.documentElement.clientWidth + 1;
        }).map(function (e) { return e.tagName + ": " + e.textContent.slice(0, 80); }),
    // where each table heading's text breaks onto a new line: "the character before|the one after"
    headingBreaks: [].concat.apply([], Array.prototype.map.call(document.querySelectorAll("th"), function (th) {
      var breaks = [], walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT), node, top = null, before = "";
      while ((node = walker.nextNode())) {
        for (var i = 0; i < node.length; i++) {
          var range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          var rect = range.getClientRects()[0];
          if (!rect || !node.data[i].trim()) { continue; }
          if (top !== null && rect.top > top + 2) { breaks.push(before + "|" + node.data[i]); }
          top = rect.top;
          before = node.data[i];
        }
      }
      return breaks;
    })),
    pageWidth: document.documentElement.scrollWidth,
    viewWidth: document.documentElement.clientWidth
  };
  var pre = document.createElement("pre");
  pre.id = "iolab-probe";
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});
</script>
"""


def chromium(url: str, *extra: str, tmp: Path) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=10000", *extra, url]
    env = {**os.environ, "HOME": str(tmp)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def probe(html: Path, tmp: Path) -> dict:
    text = html.read_text(encoding="utf-8")
    probed = html.with_name(html.stem + ".probe.html")
    probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = chromium(probed.as_uri(), "--dump-dom", "--window-size=1280,2000", tmp=tmp)
    match = re.search(r'<pre id="iolab-probe">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"no probe result (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory, render_once):
    """The demo's kind of page (a comparison of runs), one run alone, and the 2013 rebuild; en and ja."""
    out = tmp_path_factory.mktemp("chromium")
    files = {}
    for lang, suffix in (("en", ""), ("ja", "-ja")):
        # the same render test_ceilings and test_coverage read (render_once's key: data, notebook, lang)
        files["compare" + suffix] = render_once(data=FIXTURES, notebook="compare", lang=lang)
        files["single" + suffix] = report.report(data=FIXTURES, host="nvme-node", notebook="compare", lang=lang,
                                                 out=out / f"single{suffix}")
    files["article"] = render_once(reference="dedicated-server-2013", lang="ja")
    files["article-en"] = render_once(reference="dedicated-server-2013", lang="en")  # test_articles reads it too
    # runs beside the 2013 article: the render test_beside_article reads
    files["beside-ja"] = render_once(runs=tuple(BESIDE_RUNS), reference="dedicated-server-2013", lang="ja")
    return out, files


PAGES = ["compare", "compare-ja", "single", "single-ja", "article", "article-en", "beside-ja"]


@pytest.fixture(scope="module")
def probed(reports):
    out, files = reports
    return {name: probe(files[name].html, out) for name in PAGES}


@pytest.mark.parametrize("name, images, captions", [
    ("compare", 6, ["Throughput (MB/s)", "IOPS"]),  # the environment table: under its heading, no caption
    ("compare-ja", 6, ["スループット（MB/秒）", "IOPS"]),
    ("article", 7, ["Bonnie++：スループット", "tiobench：最大レイテンシ"]),
    ("article-en", 7, ["Bonnie++: throughput", "tiobench: maximum latency"]),
])
def test_report_loads_offline_with_images_and_tables(probed, name, images, captions):
    result = probed[name]  # the same probe of the same page as the reading tests below: one Chromium per page
    assert result["images"] == images
    assert result["broken"] == 0, result
    assert all(alt and alt != "No description has been provided for this image" for alt in result["alts"])
    assert result["tables"] >= 3
    for caption in captions:
        assert any(c.startswith(caption) for c in result["captions"]), (caption, result["captions"])
    assert result["code"] == 0
    assert result["fetched"] == [], "the report fetched something: it would not open offline"
    assert result["title"]
    # the page names CJK fonts with a fallback, so Japanese text is never a row of boxes
    assert "IPAexGothic" in result["font"] and "Noto Sans CJK JP" in result["font"], result["font"]


def test_japanese_screenshot_draws_glyphs_not_boxes(reports):
    """The ja article in the browser: with a Japanese font installed (tools/install-system-deps.sh),
    the heading's glyphs differ from each other; tofu boxes would all be the same shape."""
    out, files = reports
    shot = out / "article.png"
    proc = chromium(files["article"].html.as_uri(), f"--screenshot={shot}", "--window-size=1280,1600", tmp=out)
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image
    with Image.open(shot) as image:
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50


def test_screenshot(reports):
    out, files = reports
    shot = out / "compare.png"
    proc = chromium(files["compare"].html.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000", tmp=out)
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        # not a blank page: the charts and tables put many colours on it
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50


#: What a reader must never see: Python's reprs of missing values and containers, unfilled
#: templates, and plurals that a count of one breaks.
RAW = re.compile(r"\bnan\b|\bNaN\b|\bNone\b|<NA>|\bNaT\b|dtype|[\[\]]|\{[a-z_|]+\}|\b1 (?:systems|runs|repetitions|tests)\b"
                 r"|\(s\)")

@pytest.mark.parametrize("name", PAGES)
def test_page_reads_like_a_published_article(probed, name):
    """The rendered text (what a reader sees, not the HTML source) at 1280 px: no raw values,
    no text running out of its table cell or past the page, no clipped heading."""
    result = probed[name]
    text = result["text"].split("{\"images\"")[0]  # the probe's own output is not the page
    assert not RAW.findall(text), sorted(set(RAW.findall(text)))
    assert result["overflowing"] == [], result["overflowing"]
    assert result["pageWidth"] <= result["viewWidth"], "the page scrolls sideways"


def _word_character(char: str) -> bool:
    """A kana, a kanji or the long-vowel mark: a line may not break between two of them inside a name."""
    return bool(re.match(r"[\u3041-\u30ff\u4e00-\u9fff]", char))


@pytest.mark.parametrize("name", ["compare-ja", "article", "beside-ja"])
def test_japanese_table_headings_break_between_words_not_inside_them(probed, name):
    """A narrow column's heading 「HDD（エミュレート）」 broke as 「HDD（エミュレー」 / 「ト）」: in the browser, a
    heading's lines now end at a space or before a bracket (word-break: keep-all), never between two kana."""
    breaks = probed[name]["headingBreaks"]
    inside = [b for b in breaks if _word_character(b[0]) and _word_character(b[-1])]
    assert inside == [], inside
    if name == "beside-ja":
        assert "T|（" in breaks or "D|（" in breaks, breaks  # the emulated names' headings do break, at the bracket


@pytest.mark.parametrize("name, sentences", [
    ("article-en", ["Source: “SSDやioDriveといった高速ストレージの性能をチェック――はじめての「さくらの専用サーバ」(4)”, "
                    "an article in the series “はじめての「さくらの専用サーバ」” (part 4).",
                    "data/reference/dedicated-server-2013.csv",
                    "Not given in the source, so not given here: the author, publication, date and URL."]),
    ("article", ["出典：『SSDやioDriveといった高速ストレージの性能をチェック――はじめての「さくらの専用サーバ」(4)』",
                 "data/reference/dedicated-server-2013.csv", "原文には著者、掲載誌、日付、URLの記載がないため"]),
    ("compare", ["This report compares 4 systems measured with", "iolab's fio reproduction of the tests of CrystalDiskMark 8"]),
    ("compare-ja", ["iolabがfioで再現したCrystalDiskMark 8のテスト"]),
    ("single", ["This report shows 1 system measured with crystaldiskmark", "Coverage note: only NVMe was measured here"]),
    ("single-ja", ["測定範囲についての注記"]),
])
def test_page_says_what_it_must(probed, name, sentences):
    text = probed[name]["text"]
    for sentence in sentences:
        assert sentence in text, (name, sentence)
    assert "tool: CrystalDiskMark" not in text and "ツール：CrystalDiskMark" not in text
