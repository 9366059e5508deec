"""An article whose columns are comparisons, not systems: Nytro's "cache on / off", Hyper-V's "mirroring on / off".

Such an article prints one ratio per test (a speed-up, a cost) for a pair of set-ups. Its reference CSV names
each pair in one English string (``Nytro MegaRAID cache on vs off (3x SATA HDD RAID5)``); ``articles.yaml``'s
``compares`` gives each its name as a comparison and the set-up it was made on, in English and Japanese
(product names kept), so the page lists comparisons under "Comparison", not systems, and a Japanese page
says them in Japanese. :func:`names` and :func:`labelled` name every column of an article on a page, a system's
brackets as the page's language writes them (``SATA HDD（mem=512M）`` on a Japanese page).
"""
from __future__ import annotations

import pandas as pd

from iolab.analysis import reference
from iolab.core.errors import IolabError
from iolab.report import i18n
from iolab.report.tables import Table

#: Metrics whose published figure is itself a comparison of two set-ups (a speed-up, a cost).
RATIO_METRICS = ("speedup", "overhead")


def _compares(frame: pd.DataFrame) -> dict:
    """``{CSV name: {en, ja, setup: {en, ja}}}`` of the articles in ``frame`` (empty for runs and for articles
    of systems)."""
    out: dict = {}
    if "article" not in frame.columns:
        return out
    for article in dict.fromkeys(frame["article"].dropna().astype(str)):
        try:
            info = reference.article_info(article)
        except IolabError:  # a measured run beside an article carries its own name, not an article's
            continue
        for name, entry in (info.get("compares") or {}).items():
            if not isinstance(entry, dict) or any(not (entry.get(lang) and (entry.get("setup") or {}).get(lang))
                                                  for lang in i18n.LANGS):
                raise IolabError(f"comparison {name!r} needs a name and a setup in {', '.join(i18n.LANGS)}",
                                 context=f"articles.yaml: {article}.compares")
            out[str(name)] = entry
    return out


def is_comparison(frame: pd.DataFrame) -> bool:
    """Whether every column of ``frame`` is a comparison ``articles.yaml`` names (not a system)."""
    compares = _compares(frame)
    return bool(compares) and bool(len(frame)) and frame["system"].astype(str).isin(list(compares)).all()


def names(frame: pd.DataFrame, lang: str) -> dict[str, str]:
    """``{CSV name: its name on a page in lang}`` for the article's columns in ``frame``: a comparison's name from
    ``articles.yaml``, a system's as :func:`iolab.report.i18n.page_name` prints it (``SATA HDD (mem=512M)`` ->
    ``SATA HDD（mem=512M）`` on a Japanese page). Measured systems beside the article keep the names their runs
    were given on the page (:func:`iolab.report.notebooks.select`); the CSVs and English pages keep theirs."""
    i18n.check_lang(lang)
    compares = {name: str(entry[lang]) for name, entry in _compares(frame).items()}
    measured = frame["measured"].fillna(False).astype(bool) if "measured" in frame.columns \
        else pd.Series(False, index=frame.index)
    systems = frame.loc[~measured, "system"].astype(str) if "system" in frame.columns else []
    typeset = {s: i18n.page_name(s, lang) for s in dict.fromkeys(systems) if s not in compares}
    return {**{s: n for s, n in typeset.items() if n != s}, **compares}


def labelled(frame: pd.DataFrame, lang: str) -> pd.DataFrame:
    """``frame`` with each article column's CSV name replaced by its name on a page in ``lang`` (:func:`names`;
    measured systems unchanged)."""
    renamed = names(frame, lang)
    if not renamed:
        return frame
    out = frame.copy()
    out["system"] = out["system"].astype(str).replace(renamed)
    return out


def more_than(frame: pd.DataFrame) -> set[str]:
    """The comparisons in ``frame`` whose published figure is a lower bound (``more_than: true``: Hyper-V's
    "more than 2.5x"), by their CSV names: their findings say "more than", and the remark saying so is not
    repeated under them."""
    return {name for name, entry in _compares(frame).items() if entry.get("more_than")}


def table(frame: pd.DataFrame, lang: str, caption: str | None = None) -> Table:
    """The "Test environment" of a comparison article: each comparison and the set-up it was made on."""
    compares = _compares(frame)
    shown = [s for s in dict.fromkeys(frame["system"].astype(str)) if s in compares]
    index = pd.Index([compares[s][lang] for s in shown], name=i18n.text("comparisons.comparison", lang))
    out = pd.DataFrame({i18n.text("comparisons.setup", lang): [compares[s]["setup"][lang] for s in shown]}, index=index)
    return Table(out, caption=i18n.text("headings.environment", lang) if caption is None else caption)
