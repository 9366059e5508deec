"""What a recipe's ``tool`` line means: iolab's reproduction of a classic tool's tests, not the tool itself.

A manifest records the tool a recipe emulates (``tool: CrystalDiskMark 8``).
Printed bare after "tool:", a reader takes it for the program that ran; every
place a report names it goes through :func:`describe` instead.
"""
from __future__ import annotations

from iolab.report import i18n

#: Tools iolab runs itself: the name is the truth as it stands.
OWN = {"fio", "iolab"}
#: Tools whose original program the recipe really runs (pgbench on a throw-away PostgreSQL).
ORIGINAL = ("pgbench",)
#: Tools reproduced in Python (iolab's own timing and SQL), not as fio jobs.
REWRITTEN = ("sql-bench",)


def describe(tool, lang: str, *, unknown: str = "") -> str:
    """``CrystalDiskMark 8`` -> "iolab's fio reproduction of the tests of CrystalDiskMark 8 (not the original program)"."""
    name = "" if tool is None else str(tool).strip()
    if not name or name.lower() == "nan":
        return unknown or i18n.text("text.measured_unknown", lang)
    lowered = name.lower()
    if lowered.startswith("imported from "):  # iolab import: the sentence says who measured it
        return name
    if lowered in OWN:
        return name
    if lowered.startswith(ORIGINAL):
        return i18n.text("text.tool_original", lang, tool=name)
    if lowered.startswith(REWRITTEN):
        return i18n.text("text.tool_rewrite", lang, tool=name)
    return i18n.text("text.tool_fio", lang, tool=qualified(name, lang))


def qualified(name: str, lang: str) -> str:
    """``CrystalDiskMark 8 (smoke subset)`` -> ``CrystalDiskMark 8（一部のテストのみ）``: a recipe's own words after the
    tool's name, in the page's language where the locale has them (``tool_qualifiers``), else as written in the
    page's brackets (``tiobench 0.3.3 (tiotest)`` -> ``tiobench 0.3.3（tiotest）`` on a Japanese page)."""
    name = str(name)
    base, bracket, rest = name.partition(" (")
    qualifier = rest[:-1] if bracket and rest.endswith(")") else ""
    if not qualifier or not i18n.has(f"tool_qualifiers.{qualifier}", lang):
        return i18n.page_name(name, lang)  # a qualifier of the recipe's own words: the page's brackets
    return base + i18n.paren(i18n.text(f"tool_qualifiers.{qualifier}", lang), lang)
