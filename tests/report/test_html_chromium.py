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
    font: getComputedStyle(document.body).fontFamily
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
    proc = chromium(probed.as_uri(), "--dump-dom", tmp=tmp)
    match = re.search(r'<pre id="iolab-probe">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"no probe result (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("chromium")
    compare = report.report(data=FIXTURES, notebook="compare", lang="en", out=out / "compare")
    article = report.report(reference="dedicated-server-2013", lang="ja", out=out / "article")
    return out, {"compare": compare, "article": article}


@pytest.mark.parametrize("name, images, captions", [
    ("compare", 6, ["Test environment", "Throughput (MB/s)", "IOPS"]),
    ("article", 7, ["Bonnie++: スループット", "tiobench: 最大レイテンシ"]),
])
def test_report_loads_offline_with_images_and_tables(reports, name, images, captions):
    out, files = reports
    result = probe(files[name].html, out)
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
