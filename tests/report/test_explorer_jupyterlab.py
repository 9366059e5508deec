"""The explorer in JupyterLab, as a reader uses it: a real ``jupyter lab`` server on 127.0.0.1 and Debian's
headless ``chromium`` driven through the DevTools protocol (tests/jupyterlab_helpers.py).

A temporary root holds a copy of ``notebooks/explore.ipynb`` and of the stored fixture runs
(``tests/fixtures/data/*-node``), so the explorer shows real data without running fio. The test opens the
notebook, runs every cell, changes widgets in the page (language, test picker, scale) and checks that the
chart image and the texts change, then presses "Render the report" and reads the HTML file it wrote.
The server, Chromium and the temporary root are gone afterwards, also after a failure.

``test_start_and_stop_a_small_run_from_the_page`` starts a small fio run on a plain directory from the run
panel and stops it with Stop (it needs fio; marked ``slow``).
"""
import json
import shutil
import time
from pathlib import Path

import pytest

from cli_helpers import ROOT, needs_fio
from jupyterlab_helpers import CHROMIUM, chromium_page, jupyterlab, lab_root

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

FIXTURES = ROOT / "tests" / "fixtures" / "data"
NOTEBOOK = "notebooks/explore.ipynb"

#: Helpers defined in the page once it has loaded: the notebook panel, a widget control by its label,
#: choosing an option by its text, pressing a button by its text, the explorer's chart image.
PAGE_HELPERS = """
window.iolab = {
  plain: (node) => node.textContent.replace(/\u00a0/g, ' ').trim(),  // ipywidgets writes option spaces as nbsp
  notebook: () => window.jupyterapp && Array.from(window.jupyterapp.shell.widgets('main'))
      .find(w => w.context && w.context.path === '%(notebook)s'),
  kernelIdle: () => {
    const w = window.iolab.notebook();
    const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!(k && k.status === 'idle');
  },
  control: (label, inner) => {
    const box = Array.from(document.querySelectorAll('.jp-OutputArea .lm-Widget'))
        .find(e => { const l = e.querySelector(':scope > label');
                     return l && l.textContent.trim() === label && (!inner || e.querySelector(inner)); });
    if (!box) throw new Error('no control labelled ' + label);
    return box;
  },
  choose: (label, text) => {
    const select = window.iolab.control(label, 'select').querySelector('select');
    const index = Array.from(select.options).findIndex(o => window.iolab.plain(o) === text);
    if (index < 0) throw new Error('no option ' + text + ' in ' + label + ': ' +
        Array.from(select.options).map(o => o.textContent).join(' | '));
    if (select.multiple) { Array.from(select.options).forEach((o, i) => { o.selected = i === index; }); }
    else { select.selectedIndex = index; }
    select.dispatchEvent(new Event('change', {bubbles: true}));
    return true;
  },
  type: (label, value) => {
    const input = window.iolab.control(label, 'input').querySelector('input');
    input.value = value;
    input.dispatchEvent(new Event('input', {bubbles: true}));
    input.dispatchEvent(new Event('change', {bubbles: true}));
    return true;
  },
  press: (text) => {
    const button = Array.from(document.querySelectorAll('.jp-OutputArea button'))
        .find(b => b.textContent.trim() === text);
    if (!button) throw new Error('no button ' + text);
    button.click();
    return true;
  },
  tab: (text) => {
    const tab = Array.from(document.querySelectorAll('.jp-OutputArea .lm-TabBar-tab'))
        .find(t => t.textContent.trim() === text);
    if (!tab) throw new Error('no tab ' + text);
    tab.scrollIntoView();
    const box = tab.getBoundingClientRect();  // Lumino's tab bar picks the tab under the pointer
    const at = {bubbles: true, button: 0, clientX: box.left + box.width / 2, clientY: box.top + box.height / 2};
    tab.dispatchEvent(new PointerEvent('pointerdown', at));
    tab.dispatchEvent(new MouseEvent('mousedown', at));
    document.dispatchEvent(new PointerEvent('pointerup', at));
    document.dispatchEvent(new MouseEvent('mouseup', at));
    return true;
  },
  chart: () => {
    const image = document.querySelector('.jp-OutputArea .widget-output img');
    return image ? image.src : null;
  },
  options: (label) => Array.from(window.iolab.control(label, 'select').querySelectorAll('option'))
      .map(window.iolab.plain),
  text: () => document.body.innerText,  // what is shown
  allText: () => document.body.textContent,  // hidden tabs too
};
true
""" % {"notebook": NOTEBOOK}


@pytest.fixture(scope="module")
def explorer_page():
    """explore.ipynb open in JupyterLab in headless Chromium, every cell run: ``(page, root)``."""
    with lab_root() as tmp:
        root = tmp / "root"
        (root / "notebooks").mkdir(parents=True)
        shutil.copy(ROOT / NOTEBOOK, root / NOTEBOOK)
        for store in FIXTURES.glob("*-node"):
            shutil.copytree(store, root / "tests" / "fixtures" / "data" / store.name)
        state = tmp / "state"
        with jupyterlab(root, state) as lab, chromium_page(state) as page:
            page.call("Page.navigate", url=lab.open_url(NOTEBOOK))
            page.wait_for("!!(window.jupyterapp && window.jupyterapp.started !== undefined)", 60, "JupyterLab loaded")
            page.evaluate(PAGE_HELPERS)
            page.wait_for("window.iolab.kernelIdle()", 90, "the notebook's kernel started")
            page.evaluate("window.jupyterapp.shell.activateById(window.iolab.notebook().id); "
                          "window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for("window.iolab.chart() !== null && window.iolab.kernelIdle()", 120,
                          "the explorer's chart after Run All")
            yield page, root


def _wait_chart_change(page, before: str, what: str) -> str:
    return page.wait_for(f"(() => {{ const c = window.iolab.chart(); return c && c !== {json.dumps(before)} "
                         f"&& window.iolab.kernelIdle() ? c : null; }})()", 60, what)


def _cut_labels(page) -> list:
    """The shown controls' labels cut short with an ellipsis (the run panel's 「キャッシュの…」)."""
    return page.evaluate("Array.from(document.querySelectorAll('.widget-label')).filter(e => e.offsetParent !== null "
                         "&& e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)")


def test_explorer_in_jupyterlab_follows_its_widgets_and_renders_the_report(explorer_page):
    page, root = explorer_page
    # first view: the fixture runs of crystaldiskmark, every test, English
    assert page.evaluate("window.iolab.options('Recipe')")[:2] == ["crystaldiskmark", "quick"]
    text = page.evaluate("window.iolab.text()")
    assert "3 runs of crystaldiskmark; 24 bars, one per test and system (3)" in text
    for control in ("Language", "Scale", "Tests", "View", "Article"):
        page.evaluate(f"window.iolab.control({json.dumps(control)})")  # each is there, or the call throws
    assert page.evaluate("window.iolab.options('View')") == ["bars per test"]
    first = page.evaluate("window.iolab.chart()")

    # the language: every control, the chart and the texts in Japanese
    page.evaluate("window.iolab.choose('Language', '日本語')")
    japanese = _wait_chart_change(page, first, "the chart redrawn in Japanese")
    page.wait_for("window.iolab.text().includes('実行結果を見る')", 30, "the tab titles in Japanese")
    assert _cut_labels(page) == []
    text = page.evaluate("window.iolab.text()")
    assert "crystaldiskmarkの実行3件、棒24本（テストとシステムごと、システムは3種類）" in text
    assert "レポートを作成" in text and "所見" in text
    assert page.evaluate("window.iolab.options('指標')")[0] == "スループット（MB/秒）"
    for label in ("レシピ", "テスト", "表示", "記事", "言語"):
        page.evaluate(f"window.iolab.control({json.dumps(label)})")

    # the test picker: one test, its six bars (read and write of three systems)
    page.evaluate("window.iolab.choose('テスト', 'SEQ1M-Q1T1')")
    one_test = _wait_chart_change(page, japanese, "the chart redrawn for one test")
    page.wait_for("window.iolab.text().includes('棒6本')", 30, "six bars for one test")

    # the scale: a log axis on purpose (auto keeps this test's under-100x spread linear)
    page.evaluate("window.iolab.press('対数')")
    _wait_chart_change(page, one_test, "the chart redrawn on a log axis")

    # an article beside the runs shown: these runs have none of its tests, so its own figures, said so
    charts = page.evaluate("document.querySelectorAll('.jp-OutputArea .widget-output img').length")
    page.evaluate("window.iolab.choose('記事', '専用サーバーのストレージ：SATA HDD・SSD・ioDrive（2013年の記事）')")
    page.wait_for("window.iolab.text().includes('表示中の実行には記事のテスト') && "
                  f"document.querySelectorAll('.jp-OutputArea .widget-output img').length > {charts}", 60,
                  "the article's chart under the runs'")
    page.evaluate("window.iolab.choose('記事', 'なし')")
    page.wait_for("!window.iolab.text().includes('表示中の実行には記事のテスト') && window.iolab.kernelIdle()", 60,
                  "the article's chart gone")

    # render the report of the runs shown: an HTML file under the notebook's ../reports
    page.evaluate("window.iolab.press('レポートを作成')")
    status = page.wait_for("(() => { const m = window.iolab.text().match(/レポートを書き出した：(\\S+\\.html)/); "
                           "return m ? m[1] : null; })()", 180, "the report written")
    html = Path(status)
    assert html.is_file() and html.name == "compare.html"
    assert (root / "reports") in html.parents
    page_text = html.read_text(encoding="utf-8")
    assert "<html" in page_text and "ストレージベンチマーク比較" in page_text

    # the run panel in its tab, in Japanese: a target typed in the page reaches the kernel, its error comes back
    page.evaluate("window.iolab.tab('ベンチマークを実行')")
    page.wait_for("window.iolab.text().includes('保存先')", 30, "the run panel's tab shown")
    assert _cut_labels(page) == []
    missing = root / "missing"
    page.evaluate(f"window.iolab.type('対象パス', {json.dumps(str(missing))})")
    page.evaluate("window.iolab.press('開始')")
    error = page.wait_for("(() => { const m = window.iolab.text().match(/エラー：[^\\n]*/); return m ? m[0] : null; })()",
                          60, "the panel's error")
    assert f"--target {missing}: no such file or directory" in error
    assert not (root / "data").exists()  # nothing was created


@needs_fio
@pytest.mark.slow
def test_start_and_stop_a_small_run_from_the_page(explorer_page):
    """The run panel in the page: Start a 30 s test on a plain directory, Stop it while fio runs; the run
    directory is kept, its manifest says interrupted, the panel says where it is and can start again."""
    page, root = explorer_page
    target = root / "disk"
    target.mkdir()
    if page.evaluate("window.iolab.text().includes('実行結果を見る')"):
        page.evaluate("window.iolab.choose('言語', 'English')")
        page.wait_for("window.iolab.text().includes('Run a benchmark')", 30, "the page in English again")
    page.evaluate("window.iolab.tab('Run a benchmark')")
    page.wait_for("window.iolab.text().includes('Store in')", 30, "the run panel's tab shown")
    for label, value in (("Target", str(target)), ("Size", "16M"), ("Runtime (s)", "30"),
                         ("Tests", "SEQ1M-Q1T1"), ("Label", "stopped in the page")):
        page.evaluate(f"window.iolab.type({json.dumps(label)}, {json.dumps(value)})")
    page.evaluate("window.iolab.press('Start')")
    page.wait_for("window.iolab.allText().includes('Running SEQ1M-Q1T1')", 60, "fio running the first test")
    running = time.monotonic()  # fio has started: left alone, the test would go on for most of its 30 s
    page.evaluate("window.iolab.press('Stop')")
    page.wait_for("window.iolab.allText().includes('Run stopped: what was measured is kept in')", 60,
                  "the run stopped")
    assert time.monotonic() - running < 20, "Stop did not cut the 30 s test short"
    manifests = list((root / "data").glob("*/*/manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text())
    assert manifest["status"] == "interrupted" and manifest["label"] == "stopped in the page"
    assert str(manifests[0].parent) in page.evaluate("window.iolab.allText()")
    assert page.evaluate("!Array.from(document.querySelectorAll('.jp-OutputArea button'))"
                         ".find(b => b.textContent.trim() === 'Start').disabled")
