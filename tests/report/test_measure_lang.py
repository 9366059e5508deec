"""The measure notebook speaks the page's language: its ``lang`` parameter (en, ja; ``iolab batch`` passes an
entry's ``lang``) sets every heading, caption and sentence it writes (issue 23), executed on stored runs."""
import re

import nbformat
import pytest

from iolab.core.errors import IolabError
from iolab.report import figures, i18n, notebooks as report
from cli_helpers import FIXTURES, ROOT, measure_notebook_on_stored_runs

#: a stored quick run and a CrystalDiskMark run of another system: two recipes, so per-recipe headings too
QUICK = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-quick-312c"
CDM = FIXTURES / "data" / "nvme-node" / "20261120T223550Z-crystaldiskmark-f5be"
HEADINGS = ("headings.measured", "headings.results", "headings.commentary")


def _shown(out) -> tuple[str, str]:
    """(the Markdown, the printed text) the executed notebook shows."""
    outputs = [o for c in nbformat.read(str(out), as_version=4).cells if c.cell_type == "code"
               for o in c.get("outputs", [])]
    markdown = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    return markdown, printed


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{lang: (Markdown, printed text)} of measure.ipynb executed on the two stored runs, with no data_dir
    (the notebook says so, in its language)."""
    shown = {}
    for lang in ("en", "ja"):
        tmp = tmp_path_factory.mktemp(f"measure-{lang}")
        out = report.execute(measure_notebook_on_stored_runs(tmp, [QUICK, CDM]), tmp / "out.ipynb", parameters={"lang": lang},
                             cwd=ROOT / "notebooks")
        shown[lang] = _shown(out)
    return shown


@pytest.mark.parametrize("lang, other", [("ja", "en"), ("en", "ja")])
def test_every_heading_is_in_the_notebooks_language(pages, lang, other):
    markdown, _ = pages[lang]
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    for key in HEADINGS:
        assert f"## {i18n.text(key, lang)}" in headings, (key, headings)
        assert f"## {i18n.text(key, other)}" not in headings, (key, headings)
    # the only other headings: one per recipe under the findings, named as the recipe is
    assert {h for h in headings if not h.startswith("## ")} == {"### quick", "### crystaldiskmark"}
    assert len(headings) == len(HEADINGS) + 2
    if lang == "ja":  # no English word left in a heading ('## What was measured', '## Findings')
        assert not any(re.search(r"[A-Za-z]{3,}", h) for h in headings if not h.startswith("### ")), headings


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_captions_tables_and_sentences_follow_the_language(pages, lang):
    markdown, printed = pages[lang]
    page = figures.Page(lang)
    for n in (1, 2):  # each recipe's chart, numbered and captioned in the page's language
        assert page.lead(n) in markdown
    # the temporary store the notebook chose is said in the language too
    store_sentence = i18n.text("measure_notebook.scratch_store", lang, path="PATH")
    assert re.search(re.escape(store_sentence).replace("PATH", r"\S+"), printed), printed
    if lang == "ja":
        assert "Figure" not in markdown and "What was measured" not in markdown and "no data_dir" not in printed


def test_an_unknown_language_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(IolabError, match="unknown language 'fr'"):
        report.execute(ROOT / "notebooks" / "measure.ipynb", tmp_path / "out.ipynb",
                       parameters={"lang": "fr", "dry_run": True}, cwd=ROOT / "notebooks")
