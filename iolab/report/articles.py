"""A published article in the report: its tables as printed, the systems it tested, its own remarks.

The figures come from :func:`iolab.analysis.reference.load`; this module only
puts them into the report's shapes (:class:`iolab.report.tables.Table`,
Markdown) in English or Japanese, so the analysis layer needs no translation.
"""
from __future__ import annotations

import re

import pandas as pd

from iolab.analysis import reference
from iolab.core.errors import IolabError
from iolab.report import beside, comparisons, environment, i18n, tables
from iolab.report.tables import DASH, Table


def reference_table(frame: pd.DataFrame, *, benchmark: str, metric: str, lang: str = "en",
                    caption: str | None = None) -> Table:
    """An article's table from :func:`iolab.analysis.reference.load`: rows = tests, columns = systems, as published."""
    part = frame[(frame["benchmark"] == benchmark) & (frame["metric"] == metric)]
    if part.empty:
        raise IolabError(f"no {metric!r} figures for {benchmark!r}", context="reference_table")
    summary = reference.as_summary(comparisons.labelled(part, lang))  # a comparison's column: its name, in lang
    unit = str(part["unit"].iloc[0])
    caption = caption or f"{benchmark}{i18n.colon(lang)}{tables.caption_for(metric, unit, lang)}"
    if unit and not _names_unit(caption, i18n.unit(unit, lang)):
        # one bracket: "TPC-C: speed-up (x, vendor figure)" is written so; a title's note never gets a second one
        caption = i18n.with_note(caption, i18n.unit(unit, lang), lang)
    if reference.unmeasurable(part).any():  # explain +++++ only under a table that has some
        note = i18n.text("labels.published_note_unmeasurable", lang, unmeasurable=i18n.text("labels.unmeasurable", lang))
    else:
        note = i18n.text("labels.published_note", lang)
    # measured columns beside the article's: the note says which columns are which, and their scale and file size
    measured = beside.table_notes(part, lang)
    if measured:
        unmeasurable = reference.unmeasurable(part).any()
        note = i18n.text("labels.unmeasurable_note", lang, unmeasurable=i18n.text("labels.unmeasurable", lang)) \
            if unmeasurable else ""
    if benchmark == "hdparm" and unit == "MB/s":  # hdparm's "MB/sec" is MiB/s, printed so in the article
        note = i18n.join_sentences([n for n in (note, i18n.text("labels.published_note_hdparm", lang)) if n], lang)
    table = tables.pivot(summary, lang=lang, caption=caption, published=True, notes=measured + [note])
    renamed = beside.scaled_names(part, lang)  # a column at another scale than the article's says so in its header
    if renamed:
        table.frame = table.frame.rename(columns=renamed)
        table.data = table.data.rename(columns=renamed)
    return table


def _names_unit(caption: str, unit: str) -> bool:
    """Whether ``caption`` names ``unit`` as a word of its own (``(s, lower is better)``), not inside a word."""
    return re.search(rf"(?<![\w/]){re.escape(unit)}(?![\w/])", caption) is not None


def reference_systems_table(frame: pd.DataFrame, *, lang: str = "en", caption: str | None = None) -> Table:
    """The article's columns: system, device, memory, cache isolated (``caption=""``: none, under a heading);
    an article of comparisons (cache on / off) lists each comparison and its set-up instead."""
    if comparisons.is_comparison(frame):
        return comparisons.table(frame, lang, caption=caption)
    systems = comparisons.labelled(frame, lang)[["system", "device", "memory", "cache_isolated"]] \
        .drop_duplicates("system")  # each system as the page names it (SATA HDD（mem=512M） in Japanese)
    out = pd.DataFrame({
        i18n.text("labels.device", lang): systems["device"].values,
        i18n.text("labels.memory", lang): systems["memory"].values,
        i18n.text("labels.isolation", lang): [environment.yes_no(v, lang) if not pd.isna(v) else DASH
                                              for v in systems["cache_isolated"]],
    }, index=pd.Index(systems["system"].values, name=i18n.text("labels.system", lang)))
    # an article that names no device, memory or cache set-up: no column of dashes
    out = out.loc[:, [not all(pd.isna(v) or str(v) in ("", DASH) for v in out[c]) for c in out.columns]]
    return Table(out, caption=i18n.text("headings.environment", lang) if caption is None else caption)


def reference_environment(frame: pd.DataFrame, *, lang: str = "en") -> Table | str:
    """The article's "Test environment": :func:`reference_systems_table` under the heading, or, where the article
    gives nothing of its systems but their names (gigaexpress, x25v-raid0), one sentence naming them instead of a
    table of one column."""
    table = reference_systems_table(frame, lang=lang, caption="")
    if len(table.frame.columns):
        return table
    systems = [f"**{name}**" for name in table.frame.index]
    return i18n.text("labels.systems_only", lang, systems=i18n.join(systems, lang), n=len(systems))


def notes(frame: pd.DataFrame, lang: str, *, heading: str = "labels.article_notes") -> str:
    """The article's remarks on the rows of one table, as a Markdown list under ``heading`` ('' when none)."""
    rows = frame[frame["note"].astype(str).str.strip() != ""]
    rows = rows[~reference.unmeasurable(rows) & ~rows["system"].isin(comparisons.more_than(rows))]  # in the findings
    rows = comparisons.labelled(rows, lang)
    if rows.empty:
        return ""
    items = []
    said = pd.Series([remark(r, lang) for _, r in rows.iterrows()], index=rows.index, dtype=object)
    for text in dict.fromkeys(said):
        part = rows[said == text]
        systems, tests = list(dict.fromkeys(part["system"])), list(dict.fromkeys(part["test"]))
        if len(part) > 1 and len(part) == len(systems) * len(tests) == len(set(zip(part["system"], part["test"]))):
            # one remark on every test of several systems (gigaexpress' 'one run shown'): said once, not four times
            where = i18n.paren(i18n.join([i18n.test_label(t, "", lang) for t in tests], lang), lang)
            items.append(f"- {i18n.join(systems, lang)}{where}{i18n.colon(lang)}{text}")
            continue
        items += [f"- {i18n.comma_list([r['system'], i18n.test_label(r['test'], '', lang)], lang)}"
                  f"{i18n.colon(lang)}{text}"
                  for _, r in part.iterrows()]
    return "**" + i18n.text(heading, lang) + "**\n\n" + "\n".join(items)


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


#: What a citation can name, in the order its "not given" sentence lists what a source lacks.
CITATION_FIELDS = ("headline", "author", "publication", "date", "url")

#: What kind of work a source is (``source.kind`` in articles.yaml; ``citation.kind_<kind>`` in the locales).
CITATION_KINDS = ("article", "blog_post", "column")


def _given(source: dict, name: str) -> str | None:
    value = source.get(name)
    if value is None or not str(value).strip():
        return None
    return str(value).strip()


def _quoted(value: str, lang: str) -> str:
    """A title in the page's quotation marks (Japanese: 『』 around a title that holds 「」 itself)."""
    key = "citation.headline_nested" if "「" in value else "citation.headline"
    return i18n.text(key, lang, value=value)


def _work(source: dict, lang: str) -> str:
    """"“Headline”, a column in the series “S” (special feature) by A (a pen name)" / 「見出し」（連載「S」のコラム）、著者 A."""
    kind = source.get("kind") or "article"
    if kind not in CITATION_KINDS:
        raise IolabError(f"unknown source kind {kind!r}", context="articles.yaml",
                         hint="one of " + ", ".join(CITATION_KINDS))
    what = i18n.text(f"citation.kind_{kind}", lang)
    series = _given(source, "series")
    if series:
        where = i18n.text("citation.in_series", lang, series=_quoted(series, lang))
        gloss = (source.get("series_gloss") or {}).get(lang)  # per language: a Japanese page needs none
        if gloss:
            where += i18n.text("citation.gloss", lang, gloss=gloss)
        if _given(source, "part"):
            where += i18n.text("citation.part", lang, part=source["part"])
        what = i18n.text("citation.work_in_series", lang, what=what, where=where)
    headline = _given(source, "headline")
    if headline:
        what = i18n.text("citation.headline_work", lang, headline=_quoted(headline, lang), what=what)
    author = _given(source, "author")
    if author:
        by = i18n.text("citation.by", lang, author=author)
        if source.get("pen_name"):
            by += i18n.text("citation.pen_name", lang)
        if _given(source, "affiliation"):
            key = "citation.affiliation_self" if source.get("affiliation_self") else "citation.affiliation"
            by += i18n.text(key, lang, affiliation=source["affiliation"])
        what += by
    return what


def citation(article: str, info: dict, lang: str = "en") -> str:
    """Where an article's figures come from, as one Markdown paragraph.

    Printed from ``articles.yaml``'s ``source:`` block, which holds only what
    the source text gives of itself (``data/reference/citations.csv``):
    headline, series, author and affiliation, kind, and how the text gives
    them (``as_given``). What it does not give (the headline, a date, a URL,
    the publication...) is named once, in one sentence, never filled in.
    """
    source = info.get("source") or {}
    title = (info.get("title") or {}).get(lang) or article
    gap = "" if lang == "ja" else " "  # Japanese sentences follow each other without a space
    sentences = [i18n.text("citation.source", lang, work=_work(source, lang))]
    as_given = (source.get("as_given") or {}).get(lang)
    if as_given:
        sentences.append(i18n.text("citation.as_given", lang, text=str(as_given).strip()))
    details = [i18n.text(f"citation.{name}", lang, value=_given(source, name))
               for name in ("publication", "date", "url") if _given(source, name)]
    if details:
        sentences.append(i18n.text("citation.recorded", lang, items=i18n.join(details, lang)))
    sentences.append(i18n.text("citation.transcribed", lang, title=title, file=info.get("file", "")))
    missing = [i18n.text(f"citation.field_{name}", lang) for name in CITATION_FIELDS if not _given(source, name)]
    if missing:
        sentences.append(i18n.text("citation.not_given", lang, fields=i18n.join(missing, lang)))
    return gap.join(sentences)


#: Metrics whose published figure is itself a comparison (cache on / off, mirroring on vs off).
RATIO_METRICS = comparisons.RATIO_METRICS


def is_ratio(part: pd.DataFrame) -> bool:
    """Whether one table's figures are ratios the article printed (speed-ups, overheads), not measurements."""
    return bool(len(part)) and bool(part["metric"].isin(RATIO_METRICS).all())


def ratio_findings(part: pd.DataFrame, lang: str = "en") -> str:
    """The findings of a ratio table, one bullet per column: the published speed-up (or overhead) per test,
    as a range from the smallest to the largest where a column has several tests, printed as published (9, not 9.0)."""
    def label(row) -> str:
        return i18n.test_label(row["test"], "", lang)

    items = []
    bounds = {comparisons.names(part, lang).get(s, s) for s in comparisons.more_than(part)}
    part = comparisons.labelled(part, lang)
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
            items.append(i18n.text("commentary.ratio_one_more" if system in bounds else "commentary.ratio_one",
                                   lang, system=system, test=label(low),
                                   factor=i18n.as_published(low["value"])))
        else:
            items.append(i18n.text("commentary.ratio_range", lang, system=system, low_test=label(low),
                                   high_test=label(high), low=i18n.as_published(low["value"]),
                                   high=i18n.as_published(high["value"])))
    return "\n".join(f"- {item}" for item in items)


def remarks_without_a_table(frame: pd.DataFrame, specs: list[dict], lang: str = "en") -> str:
    """The article's remarks on what it printed no figure for (x25v's WD HDD: the shape of its curve only),
    which no table's remarks would show, as a Markdown list ('' when none), headed apart from the tables' own
    remarks (not a second "The article's remarks")."""
    shown = {(spec["benchmark"], spec["metric"]) for spec in specs}
    rows = frame[[(b, m) not in shown for b, m in zip(frame["benchmark"], frame["metric"])]]
    return notes(rows, lang, heading="labels.article_notes_unplaced")
