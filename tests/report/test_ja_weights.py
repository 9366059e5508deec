"""Consistent weights in the Japanese HTML (issue 23 item 6), read in headless Chromium as a reader sees the page:
every bold text (row labels, captions, **bold** in prose) is the same weight, and on a ja page the Japanese font
comes first, so Latin letters in a Japanese row label ("CPUスレッド数") are drawn by the same font as the kana
beside them; row labels keep one line. An English page keeps its Latin fonts first.
"""
import json
import re

import pytest

from cli_helpers import ROOT
from test_html_chromium import CHROMIUM, chromium

FIXTURES = ROOT / "tests" / "fixtures" / "data"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

PROBE = """
<script>
window.addEventListener("load", function () {
  function style(e) { var s = getComputedStyle(e); return {family: s.fontFamily, weight: s.fontWeight,
                                                             wrap: s.whiteSpace, text: e.textContent.trim()}; }
  var labels = Array.prototype.map.call(document.querySelectorAll("table.iolab-table tbody td:first-child"), style);
  var result = {
    labels: labels,
    captions: Array.prototype.map.call(document.querySelectorAll("table.iolab-table caption"), style),
    strong: Array.prototype.map.call(document.querySelectorAll(".jp-RenderedMarkdown strong"), style),
    body: style(document.body),
    lineBreak: getComputedStyle(document.body).lineBreak
  };
  var pre = document.createElement("pre");
  pre.id = "iolab-probe";
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});
</script>
"""


def styles(html, tmp_path):
    probed = tmp_path / (html.stem + ".weights.html")
    probed.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = chromium(probed.as_uri(), "--dump-dom", "--window-size=1280,2000", tmp=tmp_path)
    match = re.search(r'<pre id="iolab-probe">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"no probe result (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_bold_is_one_weight_and_ja_draws_latin_with_the_japanese_font(render_once, tmp_path, lang):
    found = styles(render_once(data=FIXTURES, notebook="compare", lang=lang).html, tmp_path)
    bold = found["labels"] + found["captions"] + found["strong"]
    assert found["labels"] and found["captions"] and found["strong"]
    assert {b["weight"] for b in bold} == {"700"}, {b["text"]: b["weight"] for b in bold if b["weight"] != "700"}
    assert {b["family"] for b in found["labels"] + found["captions"]} == {found["body"]["family"]}
    assert all(b["wrap"] == "nowrap" for b in found["labels"])
    first = found["body"]["family"].split(",")[0].strip().strip('"')
    if lang == "ja":
        # the Japanese font first (it has Latin letters too): "CPU" and "スレッド数" in one design and weight
        assert first == "Hiragino Sans", found["body"]["family"]
        assert found["lineBreak"] == "strict"
        assert any(re.search(r"[A-Za-z]", b["text"]) and re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", b["text"])
                   for b in found["labels"])  # the case that showed it: a Latin word in a Japanese label
    else:
        assert first == "system-ui", found["body"]["family"]
