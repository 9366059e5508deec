"""The measure notebook's chart of each recipe is numbered and captioned as the report and compare pages' are,
its words in en and ja (iolab.report.measure_chart), on stored runs (issue 23)."""

import nbformat
import pytest

from iolab.report import figures, i18n, measure_chart, notebooks as report, plot, tables
from cli_helpers import FIXTURES, ROOT, measure_notebook_on_stored_runs

#: a stored quick run (three passes, reads and writes) and a CrystalDiskMark run of another system
QUICK = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-quick-312c"
CDM = FIXTURES / "data" / "nvme-node" / "20261120T223550Z-crystaldiskmark-f5be"


def _expected(results, recipe, lang, *, ci=True):
    names = [tables.caption_for(m, tables.metric_unit(m), lang) for m in measure_chart.METRICS]
    system = i18n.join(list(dict.fromkeys(results["system"])), lang)
    text = i18n.text("measure_chart.caption", lang, recipe=recipe, system=system, left=names[0], right=names[1])
    return text + (i18n.text("measure_chart.ci", lang) if ci else "")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_chart_says_what_it_draws_in_the_pages_language(lang, japanese):
    results = report.select(None, [QUICK]).results
    plot.setup(lang)  # as the page does: axis notes in its language
    try:
        drawn = measure_chart.chart(results, "quick", lang)
    finally:
        plot.setup("en")
    assert drawn.caption == drawn.alt == _expected(results, "quick", lang)
    left, right = drawn.axes[:2]
    # MB/s from 0.4 to 100: a log axis, said in the page's language
    assert left.get_ylabel() == i18n.with_note(tables.caption_for("bw_mbps", "MB/s", lang),
                                               i18n.text("labels.log_scale", lang), lang)
    assert right.get_ylabel() == tables.caption_for("iops", "IOPS", lang)
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert legend == [i18n.label(d, lang, section="directions") for d in ("read", "write")]
    # the bars are the table's means: the tallest IOPS bar is the highest mean IOPS of a test and direction
    means = results.groupby(["test", "direction"])["iops"].mean()
    assert max(p.get_height() for p in right.patches) == pytest.approx(means.max(), rel=1e-6)


def test_one_pass_promises_no_error_bars():
    results = report.select(None, [QUICK]).results
    one = results[results["rep"] == 1]
    assert measure_chart.chart(one, "quick", "en").caption == _expected(one, "quick", "en", ci=False)


def test_the_measure_notebook_numbers_and_captions_each_recipes_chart(tmp_path):
    source = measure_notebook_on_stored_runs(tmp_path, [QUICK, CDM])
    out = report.execute(source, tmp_path / "out.ipynb", parameters={"data_dir": str(tmp_path / "data")},
                         cwd=ROOT / "notebooks")
    outputs = [o for c in nbformat.read(str(out), as_version=4).cells if c.cell_type == "code"
               for o in c.get("outputs", [])]
    shown = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    sel = report.select(None, [QUICK, CDM])
    assert len(images) == len(sel.recipes) == 2
    page = figures.Page("en")
    for n, name in enumerate(sel.recipes, start=1):
        caption = _expected(sel.for_recipe(name).results, name, "en")
        assert page.lead(n) in shown and page.caption(n, caption) in shown
        assert images[n - 1]["metadata"]["image/png"]["alt"] == caption
