"""Issue 25 item 6: each flash recipe renders in the compare and the report page with its own section, in both
languages, as `iolab report` renders them (papermill).

The runs are real, stored (tests/fixtures/flash: sustained-write and steady-state on emulated:consumer-ssd and
emulated:sata-ssd); tests/report/test_flash_review_page.py checks the sections' figures against the profiles, this
test that the pages hold them: the section's heading once, both drives named under it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from iolab.report import i18n, notebooks as report

FLASH = Path(__file__).resolve().parents[1] / "fixtures" / "flash"
RECIPES = {"sustained-write": "sections.sustained.heading", "steady-state": "sections.steadystate.heading"}


def _section(page: str, heading: str) -> str:
    (line,) = [line for line in page.splitlines() if line.startswith("#") and line.lstrip("#").strip() == heading]
    return page.split(line, 1)[1].split("\n## ")[0]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_compare_page_has_each_recipes_section(tmp_path, lang):
    page = report.report([FLASH], notebook="compare", lang=lang, out=tmp_path / "page").markdown.read_text("utf-8")
    for key in RECIPES.values():
        part = _section(page, i18n.text(key, lang))
        assert "consumer-ssd" in part and "sata-ssd" in part


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("recipe", list(RECIPES))
def test_the_report_page_has_the_recipes_section(tmp_path, recipe, lang):
    page = report.report([FLASH], recipe=recipe, lang=lang, out=tmp_path / "page").markdown.read_text("utf-8")
    part = _section(page, i18n.text(RECIPES[recipe], lang))
    assert "consumer-ssd" in part and "sata-ssd" in part
    other = next(r for r in RECIPES if r != recipe)
    assert i18n.text(RECIPES[other], lang) not in page
