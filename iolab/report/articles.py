"""A published article in the report: its tables as printed, the systems it tested, its own remarks.

The figures come from :func:`iolab.analysis.reference.load`; this module only
puts them into the report's shapes (:class:`iolab.report.tables.Table`,
Markdown) in English or Japanese, so the analysis layer needs no translation.
"""
from __future__ import annotations

import pandas as pd

from iolab.analysis import reference
from iolab.core.errors import IolabError
from iolab.report import i18n, tables
from iolab.report.tables import DASH, Table


def reference_table(frame: pd.DataFrame, *, benchmark: str, metric: str, lang: str = "en",
                    caption: str | None = None) -> Table:
    """An article's table from :func:`iolab.analysis.reference.load`: rows = tests, columns = systems, as published."""
    part = frame[(frame["benchmark"] == benchmark) & (frame["metric"] == metric)]
    if part.empty:
        raise IolabError(f"no {metric!r} figures for {benchmark!r}", context="reference_table")
    summary = reference.as_summary(part)
    unit = str(part["unit"].iloc[0])
    caption = caption or f"{benchmark}: {tables.caption_for(metric, unit, lang)}"
    if unit and i18n.unit(unit, lang) not in caption:
        caption = f"{caption} ({i18n.unit(unit, lang)})"
    if reference.unmeasurable(part).any():  # explain +++++ only under a table that has some
        note = i18n.text("labels.published_note_unmeasurable", lang, unmeasurable=i18n.text("labels.unmeasurable", lang))
    else:
        note = i18n.text("labels.published_note", lang)
    return tables.pivot(summary, lang=lang, caption=caption, published=True, notes=[note])


def reference_systems_table(frame: pd.DataFrame, *, lang: str = "en", caption: str | None = None) -> Table:
    """The article's columns: system, device, memory, cache isolated (``caption=""``: none, under a heading)."""
    systems = frame[["system", "device", "memory", "cache_isolated"]].drop_duplicates("system")
    out = pd.DataFrame({
        i18n.text("labels.device", lang): systems["device"].values,
        i18n.text("labels.memory", lang): systems["memory"].values,
        i18n.text("labels.isolation", lang): [tables._yes_no(v, lang) if not pd.isna(v) else DASH
                                              for v in systems["cache_isolated"]],
    }, index=pd.Index(systems["system"].values, name=i18n.text("labels.system", lang)))
    # an article that names no device, memory or cache set-up: no column of dashes
    out = out.loc[:, [not all(pd.isna(v) or str(v) in ("", DASH) for v in out[c]) for c in out.columns]]
    return Table(out, caption=i18n.text("headings.environment", lang) if caption is None else caption)


def notes(frame: pd.DataFrame, lang: str) -> str:
    """The article's remarks on the rows of one table, as a Markdown list ('' when none)."""
    rows = frame[frame["note"].astype(str).str.strip() != ""]
    rows = rows[~reference.unmeasurable(rows)]
    if rows.empty:
        return ""
    items = [f"- {r['system']}, {i18n.test_label(r['test'], '', lang)}: {remark(r, lang)}" for _, r in rows.iterrows()]
    return "**" + i18n.text("labels.article_notes", lang) + "**\n\n" + "\n".join(items)


def remark(row, lang: str) -> str:
    """The article's remark on one row in ``lang``: the ``note_<lang>`` column where filled, else ``note``.

    The reference CSVs carry a Japanese rewording of each English remark
    (``note_ja``), written for Japanese readers rather than word for word.
    """
    if lang != "en":
        own = row.get(f"note_{lang}")
        if own is not None and not pd.isna(own) and str(own).strip():
            return str(own).strip()
    return str(row["note"])


#: What a citation can name, in the order printed (``source:`` of an article in articles.yaml).
CITATION_FIELDS = ("headline", "author", "publication", "date", "url")


def citation(article: str, info: dict, lang: str = "en") -> str:
    """Where an article's figures come from, as one Markdown paragraph.

    Only what ``articles.yaml``'s ``source:`` block records is printed; a field
    it does not record (author, publication, URL...) is named as not recorded,
    never filled in.
    """
    source = info.get("source") or {}
    title = (info.get("title") or {}).get(lang) or article
    date = source.get("date") or source.get("year") or info.get("year")
    known = {"headline": source.get("headline"), "author": source.get("author"),
             "publication": source.get("publication"), "date": date, "url": source.get("url")}
    parts = [i18n.text(f"citation.{name}", lang, value=str(value).strip())
             for name, value in known.items() if value is not None and str(value).strip()]
    missing = [i18n.text(f"citation.field_{name}", lang) for name, value in known.items()
               if value is None or not str(value).strip()]
    text = i18n.text("citation.source", lang, title=title, file=info.get("file", ""),
                     kind=i18n.text(f"citation.kind_{source.get('kind', 'magazine')}", lang))
    gap = "" if lang == "ja" else " "  # Japanese sentences follow each other without a space
    if parts:
        text += gap + i18n.text("citation.recorded", lang, items="; ".join(parts) if lang == "en" else "、".join(parts))
    if missing:
        text += gap + i18n.text("citation.not_recorded", lang, fields=i18n.join(missing, lang))
    return text


#: Metrics whose published figure is itself a comparison (cache on / off, mirroring on vs off).
RATIO_METRICS = ("speedup", "overhead")


def is_ratio(part: pd.DataFrame) -> bool:
    """Whether one table's figures are ratios the article printed (speed-ups, overheads), not measurements."""
    return bool(len(part)) and bool(part["metric"].isin(RATIO_METRICS).all())


def ratio_findings(part: pd.DataFrame, lang: str = "en") -> str:
    """The findings of a ratio table, one bullet per column: the published speed-up (or overhead) per test,
    as a range from the smallest to the largest where a column has several tests, printed as published (9, not 9.0)."""
    def label(row) -> str:
        return i18n.test_label(row["test"], "", lang)

    items = []
    for system in dict.fromkeys(part["system"]):
        rows = part[(part["system"] == system) & pd.to_numeric(part["value"], errors="coerce").notna()]
        if rows.empty:
            continue
        values = pd.to_numeric(rows["value"])
        low, high = rows.loc[values.idxmin()], rows.loc[values.idxmax()]
        if str(low["metric"]) == "overhead":
            for _, r in rows.iterrows():
                items.append(i18n.text("commentary.ratio_overhead", lang, system=system, test=label(r),
                                       value=i18n.as_published(r["value"])))
        elif len(rows) == 1:
            items.append(i18n.text("commentary.ratio_one", lang, system=system, test=label(low),
                                   factor=i18n.as_published(low["value"])))
        else:
            items.append(i18n.text("commentary.ratio_range", lang, system=system, low_test=label(low),
                                   high_test=label(high), low=i18n.as_published(low["value"]),
                                   high=i18n.as_published(high["value"])))
    return "\n".join(f"- {item}" for item in items)


def remarks_without_a_table(frame: pd.DataFrame, specs: list[dict], lang: str = "en") -> str:
    """The article's remarks on what it printed no figure for (x25v's WD HDD: the shape of its curve only),
    which no table's remarks would show, as a Markdown list ('' when none)."""
    shown = {(spec["benchmark"], spec["metric"]) for spec in specs}
    rows = frame[[(b, m) not in shown for b, m in zip(frame["benchmark"], frame["metric"])]]
    return notes(rows, lang)
