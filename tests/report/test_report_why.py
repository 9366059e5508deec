"""The single-server report (notebooks/report.ipynb) says why, as the compare page does (issue 23 item 4): each
recipe's own section with its findings and reasons (Bonnie++'s CPU-bound per-char tests, tiobench's one-sample
maxima, sql-bench's and pgbench's flushes), and the "Why" paragraph of the generic shape (queue depth, links).

Rendered with papermill from the stored fixture runs (no fio).
"""
import re

import matplotlib
import pytest

matplotlib.use("Agg")

from iolab.report import i18n, notebooks as report, sections  # noqa: E402
from cli_helpers import ROOT  # noqa: E402

SECTIONS = ROOT / "tests" / "fixtures" / "sections"


def why_bullets(md: str, lang: str) -> list[str]:
    """The bullets under each "**Why**" heading of a page."""
    heading = re.escape(i18n.text("reasons.heading", lang))
    return [b for block in re.findall(heading + r"\n((?:- .*\n)+)", md) for b in block.splitlines()]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_report_carries_the_why_of_the_compare_page(render_once, lang):
    single = render_once(data=SECTIONS, notebook="report", lang=lang).markdown.read_text(encoding="utf-8")
    compare = render_once(data=SECTIONS, notebook="compare", lang=lang).markdown.read_text(encoding="utf-8")
    said = why_bullets(compare, lang)
    assert said  # the fixture runs give the compare page a reason (a queue-depth gain)
    assert [b for b in said if b not in single] == []


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_each_recipe_section_and_its_reasons_are_on_the_report(render_once, lang):
    single = render_once(data=SECTIONS, notebook="report", lang=lang).markdown.read_text(encoding="utf-8")
    sel = report.select(SECTIONS, with_results=True, lang=lang)  # named as the page names them
    kinds, findings = [], []
    for name in sel.recipes:
        found, _rest = sections.build(sel.for_recipe(name).results, lang=lang, context=sel.results)
        for section in found:
            section.close()
            kinds.append(section.kind)
            assert f"#### {section.title}" in single
            findings += [str(s) for s in section.sentences]
    assert {"bonnie", "tiobench", "pgbench", "sqlbench"} <= set(kinds)
    assert [s for s in findings if s not in single] == []
    # among them the reasons: Bonnie++'s per-char tests bound by the CPU (one byte per putc/getc call)
    assert any("`putc`/`getc`" in s for s in findings)
