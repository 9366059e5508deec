"""An article whose columns are comparisons, not systems: Nytro's "cache on / off", Hyper-V's "mirroring on / off".

Such an article prints one ratio per test (a speed-up, a cost) for a pair of set-ups. Its reference CSV names
each pair in one English string (``Nytro MegaRAID cache on vs off (3x SATA HDD RAID5)``); ``articles.yaml``'s
``compares`` gives each its name as a comparison and the set-up it was made on, in English and Japanese
(product names kept), so the page lists comparisons under "Comparison", not systems, and a Japanese page
says them in Japanese.
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
    """``{CSV name: the comparison's name in lang}`` for the comparisons in ``frame``."""
    i18n.check_lang(lang)
    return {name: str(entry[lang]) for name, entry in _compares(frame).items()}


def labelled(frame: pd.DataFrame, lang: str) -> pd.DataFrame:
    """``frame`` with each comparison's CSV name replaced by its name in ``lang`` (systems unchanged)."""
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
