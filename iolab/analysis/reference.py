"""Figures published in magazine articles (``data/reference/``), as tidy DataFrames.

The compare notebook renders an article's tables from these figures and the
commentary must find what the article found: a check that the report machinery
(tables, units, ratios, cache detection) is right.

>>> frame = load(article="dedicated-server-2013")          # doctest: +SKIP
>>> frame.query("benchmark == 'bonnie++' and metric == 'throughput'")  # doctest: +SKIP
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pandas as pd
import yaml

from iolab.core import paths
from iolab.core.errors import IolabError

#: Columns every article frame has (``device``, ``memory``, ``cache_isolated``
#: are added where the article's columns say so, else left empty).
REFERENCE_COLUMNS = ["article", "benchmark", "test", "metric", "unit", "system", "device",
                     "memory", "cache_isolated", "value", "note"]


def default_dir() -> Path:
    """The shipped reference figures (``data/reference``; ``IOLAB_REFERENCE`` overrides)."""
    return paths.shipped("reference")


def _dir(path) -> Path:
    root = Path(path) if path is not None else default_dir()
    if not (root / "articles.yaml").is_file():
        raise IolabError("no articles.yaml here: not a reference directory", context=str(root),
                         hint="set IOLAB_REFERENCE or pass path= to the data/reference directory")
    return root


@functools.lru_cache(maxsize=8)
def _articles(root: str) -> dict:
    path = Path(root) / "articles.yaml"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise IolabError(f"unreadable: {exc}", context=str(path)) from exc


def articles(path: str | os.PathLike | None = None) -> dict:
    """Metadata of every article: ``{id: {title: {en, ja}, method, baseline, groups, ...}}``."""
    return _articles(str(_dir(path)))


def article_info(article: str, path: str | os.PathLike | None = None) -> dict:
    """One article's metadata, or an :class:`IolabError` naming the known ones."""
    known = articles(path)
    if article not in known:
        raise IolabError(f"unknown article {article!r}", context="reference",
                         hint="known: " + ", ".join(sorted(known)))
    return known[article]


def load(article: str | None = None, *, benchmark: str | None = None,
         path: str | os.PathLike | None = None) -> pd.DataFrame:
    """Published figures, one row per (benchmark, test, metric, system).

    ``article=None`` returns every article. ``value`` is a float (NaN where the
    article printed no number; ``note`` says why). Row order is the article's.
    """
    root = _dir(path)
    wanted = [article] if article is not None else list(articles(root))
    frames = []
    for name in wanted:
        info = article_info(name, root)
        csv = root / info["file"]
        try:
            frame = pd.read_csv(csv, dtype={"note": "string"}, keep_default_na=True)
        except (OSError, ValueError) as exc:
            raise IolabError(f"unreadable: {exc}", context=str(csv)) from exc
        frame = frame[frame["article"] == name]
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    for column in REFERENCE_COLUMNS:
        if column not in frame.columns:
            frame[column] = pd.NA
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    frame["cache_isolated"] = frame["cache_isolated"].map(
        lambda v: pd.NA if pd.isna(v) else str(v).strip().lower() == "true")
    frame["note"] = frame["note"].fillna("").astype(str)
    frame["unit"] = frame["unit"].fillna("").astype(str)
    if benchmark is not None:
        frame = frame[frame["benchmark"] == benchmark]
        if frame.empty:
            raise IolabError(f"no benchmark {benchmark!r} in this article", context=str(article))
    return frame[REFERENCE_COLUMNS + [c for c in frame.columns if c not in REFERENCE_COLUMNS]].reset_index(drop=True)


def rated_specs(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """Vendors' rated figures: ``device, interface, spec, unit, value, note``."""
    csv = _dir(path) / "rated-specs.csv"
    try:
        frame = pd.read_csv(csv)
    except (OSError, ValueError) as exc:
        raise IolabError(f"unreadable: {exc}", context=str(csv)) from exc
    frame["note"] = frame["note"].fillna("").astype(str)
    return frame


def unmeasurable(frame: pd.DataFrame) -> pd.Series:
    """Rows the tool could not time (Bonnie++ printed ``+++++``)."""
    return frame["value"].isna() & frame["note"].str.contains(r"\+\+\+\+\+", regex=True)


def as_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Reference rows in the shape of :func:`iolab.report.tables.summarize` (n=1, no CI).

    Lets the same tables and commentary run on published figures and on runs.
    """
    out = pd.DataFrame({
        "system": frame["system"].astype(str),
        "test": frame["test"].astype(str),
        "direction": "",
        "metric": frame["metric"].astype(str),
        "unit": frame["unit"].astype(str),
        "value": frame["value"].astype(float),
        "n": frame["value"].notna().astype(int),
        "mean": frame["value"].astype(float),
        "median": frame["value"].astype(float),
        "std": float("nan"),
        "cov": float("nan"),
        "ci_low": float("nan"),
        "ci_high": float("nan"),
        "best": frame["value"].astype(float),
        "flags": "",
        "note": frame["note"],
        "unmeasurable": unmeasurable(frame),
        "device": frame["device"],
        "cache_isolated": frame["cache_isolated"],
        "benchmark": frame["benchmark"].astype(str),
    })
    return out.reset_index(drop=True)


def method(info: dict, lang: str) -> str:
    """The article's method notes in ``lang`` (English when not translated; '' when none)."""
    text = info.get("method") or {}
    return str(text.get(lang) or text.get("en") or "")


def table_specs(info: dict, frame: pd.DataFrame) -> list[dict]:
    """The article's tables: as listed in ``articles.yaml``, else one per
    (benchmark, metric) with a number, in the article's order."""
    if info.get("tables"):
        return list(info["tables"])
    part = frame[frame["value"].notna()][["benchmark", "metric"]].drop_duplicates()
    return [{"benchmark": b, "metric": m, "title": f"{b}: {m}"} for b, m in part.itertuples(index=False)]
