"""Tables in the articles' shape: rows = tests, columns = systems, units stated.

Two layers, as everywhere in iolab's reporting:

* computation: :func:`summarize` (one row per system x test x direction for
  one metric, with n, mean, median, CoV, 95% CI, best, flags; built on
  :func:`iolab.analysis.stats.summarize`); the environment tables are
  :mod:`iolab.report.environment`;
* presentation: functions returning a :class:`Table`, which displays as HTML
  in a notebook and as a Markdown pipe table in Markdown exports, with a
  caption that names the metric and its unit in ``en`` or ``ja``.
"""
from __future__ import annotations

import html
import math
import re
from typing import Sequence

import pandas as pd

from iolab.report import i18n, steady_window
from iolab.analysis import stats
from iolab.core.errors import IolabError

#: Result columns the tables know: (unit, factor from the stored value to the shown value).
METRICS = {
    "bw_mbps": ("MB/s", 1.0),
    "iops": ("IOPS", 1.0),
    "lat_mean_us": ("ms", 1e-3),
    "lat_p50_us": ("ms", 1e-3),
    "lat_p99_us": ("ms", 1e-3),
    "lat_p999_us": ("ms", 1e-3),
    "lat_max_us": ("ms", 1e-3),
    "runtime_s": ("s", 1.0),
}

STATISTICS = ("mean", "median", "best")

DASH = "—"
_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_CELL = re.compile(r"<(td|th)\b([^>]*)>")


def _mark_word_cells(body: str, positions: set[int]) -> str:
    """``body`` (pandas' HTML table) with each cell at one of ``positions`` (1-based, spans counted) of every
    body row and of the last header row set flush left, in its own style (JupyterLab shows an output without the
    report's CSS) and of class iolab-word: no limit on how many columns a table has."""
    def row(match: re.Match) -> str:
        position = 0

        def cell(found: re.Match) -> str:
            nonlocal position
            span = int(m.group(1)) if (m := re.search(r'colspan="(\d+)"', found.group(2))) else 1
            position += span
            return f'<{found.group(1)} class="iolab-word" style="text-align: left;"{found.group(2)}>' \
                if span == 1 and position in positions \
                else found.group(0)
        return _CELL.sub(cell, match.group(0))

    head_end = body.find("</thead>")
    last_head = body.rfind("<tr", 0, head_end) if head_end >= 0 else -1
    start = last_head if last_head >= 0 else body.find("<tbody")
    return body[:start] + _ROW.sub(row, body[start:]) if start >= 0 else body


class Table:
    """A formatted table with a caption and notes; shows as HTML or Markdown.

    ``frame`` holds the display strings (index = row labels); ``data`` the
    numbers behind them (same shape) for tests and further work.
    """

    def __init__(self, frame: pd.DataFrame, *, caption: str = "", notes: Sequence[str] = (),
                 data: pd.DataFrame | None = None):
        self.frame = frame
        self.caption = caption
        self.notes = [n for n in notes if n]
        self.data = data if data is not None else frame

    def __repr__(self) -> str:
        return f"Table({self.caption!r}, {self.frame.shape[0]}x{self.frame.shape[1]})"

    def word_columns(self) -> list[bool]:
        """Per column of ``frame``: True where it holds words, not figures (a set-up, a device: set flush left,
        where figures are set flush right): fewer than half its cells are numbers, in ``data`` or as shown."""
        def figure(value) -> bool:
            if isinstance(value, bool) or value is None:
                return False
            if isinstance(value, (int, float)):
                return not math.isnan(value)
            shown = re.sub(r"[\s,%]|x$|倍$", "", str(value).split("±")[0])  # "0.435 ± 0.011": its mean
            return bool(re.fullmatch(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", shown))

        words = []
        for position, column in enumerate(self.frame.columns):
            data = self.data[column] if column in self.data.columns and self.data[column].ndim == 1 \
                else self.frame.iloc[:, position]
            cells = [v for v in data.tolist() if v is not None and str(v).strip() not in ("", DASH, "nan")]
            # mostly words (an environment column: a host, a kernel, and the odd "2" CPU threads) reads left
            words.append(bool(cells) and sum(figure(v) for v in cells) * 2 < len(cells))
        return words

    def _repr_html_(self) -> str:
        named = any(n for n in self.frame.index.names)
        # named row labels become the first column(s), so the header is one row
        frame = self.frame.reset_index() if named else self.frame
        # each level of row labels a column of its own, kept on one line by the page's CSS ("読み込み", "SEQ1M-Q8T1")
        levels = self.frame.index.nlevels if named else 1
        body = frame.to_html(escape=True, na_rep=DASH, border=0, index=not named,
                             classes=["iolab-table"] + ([f"iolab-labels-{levels}"] if levels > 1 else []))
        # row labels and columns of words flush left (positions count the row labels' columns)
        body = _mark_word_cells(body, {*range(1, levels + 1), *(levels + i + 1 for i, w in enumerate(self.word_columns()) if w)})
        body = body.replace(" ± ", "&nbsp;±&nbsp;")  # "0.435 ± 0.011" kept on one line, not broken after the ±
        if self.caption:
            body = body.replace(">", f">\n  <caption>{html.escape(self.caption)}</caption>", 1)
        notes = "".join(f"<p class=\"iolab-note\"><small>{html.escape(n)}</small></p>" for n in self.notes)
        return body + notes

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def to_markdown(self) -> str:
        frame = self.frame
        index_names = [n or "" for n in (frame.index.names if frame.index.nlevels > 1 else [frame.index.name])]

        def header(column) -> str:
            if isinstance(column, tuple):
                return " / ".join(str(c) for c in column if str(c))
            return str(column)

        def cell(value) -> str:
            text = DASH if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
            return text.replace("|", "\\|").replace("\n", " ")

        heads = index_names + [header(c) for c in frame.columns]
        lines = []
        if self.caption:
            lines += [f"**{self.caption}**", ""]
        lines.append("| " + " | ".join(cell(h) for h in heads) + " |")
        lines.append("|" + "|".join(["---"] * len(index_names) + ["---" if w else "---:" for w in self.word_columns()])
                     + "|")
        for key, row in frame.iterrows():
            keys = list(key) if isinstance(key, tuple) else [key]
            lines.append("| " + " | ".join(cell(k) for k in keys + list(row.values)) + " |")
        if self.notes:
            lines.append("")
            lines += [f"*{n}*" for n in self.notes]
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# computation


def metric_unit(metric: str) -> str:
    return METRICS.get(metric, ("", 1.0))[0]


def summarize(data: pd.DataFrame, *, value: str = "bw_mbps", system: str = "system",
              by: Sequence[str] = ("test", "direction"), statistic: str = "mean") -> pd.DataFrame:
    """One row per system x ``by`` for the metric ``value``.

    Columns: ``system``, the ``by`` columns, ``metric, unit, value`` (the chosen
    ``statistic``: mean, median or best as CrystalDiskMark keeps it), ``n``,
    ``n_excluded``, ``mean, median, std, cov, ci_low, ci_high, best`` (in the
    display unit: latency in ms), ``flags`` (every flag of the group's rows,
    ';'-joined), ``cache_isolated`` (False where the isolation was ``none``).
    Rows marked invalid or carrying a fio error are left out (see
    :func:`iolab.analysis.stats.valid_rows`).
    """
    if statistic not in STATISTICS:
        raise IolabError(f"unknown statistic {statistic!r}", context="summarize",
                         hint="use one of " + ", ".join(STATISTICS))
    if system not in data.columns:
        raise IolabError(f"no column {system!r} naming the systems", context="summarize",
                         hint="use iolab.report.notebooks.select() or pass system='label'")
    by = [b for b in by if b in data.columns]
    keys = [system] + by
    columns = ["system"] + by + ["metric", "unit", "value", "n", "n_excluded", "mean", "median", "std", "cov",
                      "ci_low", "ci_high", "best", "flags", "cache_isolated", "device"]
    if data.empty:
        return pd.DataFrame(columns=columns)
    frame = split_variants(data)
    frame[value] = pd.to_numeric(frame[value], errors="coerce")
    frame = pool_samples(frame, value, keys)
    out = stats.summarize(frame, by=keys, metrics=[value], keep=())
    unit, scale = METRICS.get(value, ("", 1.0))
    for column in ("mean", "median", "std", "ci_low", "ci_high", "best"):
        out[column] = out[column] * scale
    out["unit"] = unit
    out["value"] = out[statistic]
    flags = frame.groupby(keys, dropna=False, sort=False)["flags"].agg(
        lambda s: ";".join(dict.fromkeys(f for v in s for f in stats.split_flags(v)))) \
        if "flags" in frame.columns else None
    isolation = frame.groupby(keys, dropna=False, sort=False)["isolation"].agg(
        lambda s: not (s.astype(str) == "none").any()) if "isolation" in frame.columns else None
    out["flags"] = [flags.get(tuple(k), "") if flags is not None else "" for k in out[keys].itertuples(index=False)]
    # the device a system measured (host and target): pairs a cached run with an isolated one
    parts = [c for c in ("host", "target") if c in frame.columns]
    if parts:
        ident = frame[parts].fillna("").astype(str).agg(":".join, axis=1)
        device = ident.groupby([frame[k] for k in keys], dropna=False, sort=False).first()
        out["device"] = [device.get(tuple(k)) for k in out[keys].itertuples(index=False)]
    else:
        out["device"] = None
    out["cache_isolated"] = [bool(isolation.get(tuple(k), True)) if isolation is not None else True
                             for k in out[keys].itertuples(index=False)]
    out = out.rename(columns={system: "system"}) if system != "system" else out
    # keep the data's order of tests and systems, not alphabetical
    order = {name: i for i, name in enumerate(dict.fromkeys(frame[system].astype(str)))}
    test_order = {name: i for i, name in enumerate(dict.fromkeys(frame["test"].astype(str)))} if "test" in by else {}
    out["_s"] = out["system"].astype(str).map(order)
    out["_t"] = out["test"].astype(str).map(test_order) if test_order else 0
    # a mixed test's one figure (direction 'mix', iolab.analysis.mixfigure) after its read and write parts
    out["_m"] = out["direction"].astype(str).eq("mix") if "direction" in by else False
    sort = ["_t"] + (["_m", "direction"] if "direction" in by else []) + ["_s"]
    out = out.sort_values(sort, kind="stable").drop(columns=["_s", "_t", "_m"]).reset_index(drop=True)
    return out[columns]


#: Job parameters that make different measurements under one test name (qd-sweep, pgbench clients).
VARIANT_COLUMNS = ("bs", "iodepth", "numjobs")
#: Original programs whose figures iolab shows beside its own equivalent's.
ORIGINAL_TOOLS = ("bonnie++", "hdparm", "tiotest")


def pool_samples(frame: pd.DataFrame, value: str, keys: Sequence[str]) -> pd.DataFrame:
    """Samples of one repetition (GNOME Disks' reads at positions along a device) are one measurement: their
    mean, so n, the CI and the CoV count repetitions, not positions (an HDD's decline is no variance)."""
    if "sample" not in frame.columns or not frame["sample"].notna().any():
        return frame
    sampled = frame["sample"].notna()
    group = [c for c in dict.fromkeys(list(keys) + ["run_id", "rep"]) if c in frame.columns]
    parts = frame[sampled].groupby(group, dropna=False, sort=False)
    pooled = parts.first().reset_index()
    pooled[value] = parts[value].mean().values
    if "flags" in frame.columns:
        pooled["flags"] = parts["flags"].agg(lambda v: ";".join(dict.fromkeys(
            f for x in v for f in stats.split_flags(x)))).values
    return pd.concat([frame[~sampled], pooled[frame.columns]], ignore_index=True)


def split_variants(data: pd.DataFrame) -> pd.DataFrame:
    """A copy where a test run with several block sizes, queue depths or job counts
    becomes one test per variant (``"clients (numjobs=8)"``), so that different
    measurements are never pooled as if they were repetitions; the original tool's
    rows beside iolab's equivalent (bonnie++, hdparm) are their own test (``"putc (bonnie++)"``)."""
    frame = data.copy()
    if "test" not in frame.columns or frame.empty:
        return frame
    if "tool" in frame.columns and (frame.groupby("test")["tool"].nunique() > 1).any():
        original = frame["tool"].astype(str).isin(ORIGINAL_TOOLS)
        frame.loc[original, "test"] = frame.loc[original, "test"].astype(str) + " (" + frame.loc[original, "tool"] + ")"
    varying = [c for c in VARIANT_COLUMNS if c in frame.columns
               and (frame.groupby("test")[c].nunique(dropna=True) > 1).any()]
    if not varying:
        return frame
    def name(row):
        parts = [f"{c}={row[c]:g}" if isinstance(row[c], float) else f"{c}={row[c]}" for c in varying
                 if not pd.isna(row[c]) and frame.loc[frame["test"] == row["test"], c].nunique() > 1]
        return f"{row['test']} ({', '.join(parts)})" if parts else row["test"]
    frame["test"] = frame.apply(name, axis=1)
    return frame


def _fmt_ci(row, lang: str) -> str:
    text = i18n.number(row["value"])
    if row.get("n", 1) and row.get("n", 1) >= 2 and not pd.isna(row.get("ci_high")):
        half = (row["ci_high"] - row["ci_low"]) / 2
        text += f" ± {i18n.number(half, digits=i18n.default_digits(row['value']))}"
    return text


def _row_labels(frame: pd.DataFrame, lang: str) -> pd.MultiIndex | pd.Index:
    tests = [i18n.label(t, lang, section="tests") for t in frame["test"]]
    if "direction" in frame.columns and frame["direction"].astype(str).str.len().gt(0).any():
        directions = [i18n.label(d, lang, section="directions") for d in frame["direction"].fillna("")]
        return pd.MultiIndex.from_arrays([tests, directions],
                                         names=[i18n.text("labels.test", lang), i18n.text("labels.direction", lang)])
    return pd.Index(tests, name=i18n.text("labels.test", lang))


def pivot(summary: pd.DataFrame, *, lang: str = "en", caption: str | None = None, ci: bool = True,
          columns: str = "system", published: bool = False, notes: Sequence[str] = ()) -> Table:
    """Rows = (test, direction), columns = systems; values with ``± CI`` when repeated.

    ``published`` prints values as the article did and ``+++++`` where the tool
    could not time a test.
    """
    i18n.check_lang(lang)
    if summary.empty:
        return Table(pd.DataFrame(), caption=caption or "", notes=[i18n.text("text.no_runs", lang)])
    frame = summary.copy()
    if "direction" not in frame.columns:
        frame["direction"] = ""
    frame["direction"] = frame["direction"].fillna("").astype(str)
    keys = ["test", "direction"]
    if published:
        too_fast = frame["unmeasurable"] if "unmeasurable" in frame.columns else False
        frame["shown"] = [i18n.text("labels.unmeasurable", lang) if tf else i18n.as_published(v)
                          for v, tf in zip(frame["value"], too_fast if not isinstance(too_fast, bool)
                                           else [False] * len(frame))]
    elif ci:
        frame["shown"] = [_fmt_ci(row, lang) for _, row in frame.iterrows()]
    else:
        frame["shown"] = [i18n.number(v) for v in frame["value"]]
    tests = list(dict.fromkeys(frame["test"]))
    systems = list(dict.fromkeys(frame[columns]))
    shown = frame.pivot_table(index=keys, columns=columns, values="shown", aggfunc="first", sort=False)
    numbers = frame.pivot_table(index=keys, columns=columns, values="value", aggfunc="first", sort=False,
                                dropna=False)
    order = frame[keys].drop_duplicates()
    order["_t"] = order["test"].map({t: i for i, t in enumerate(tests)})
    order = order.sort_values(["_t"], kind="stable")
    index = pd.MultiIndex.from_frame(order[keys])
    shown = shown.reindex(index=index, columns=systems)
    numbers = numbers.reindex(index=index, columns=systems)
    shown = shown.fillna(DASH)
    labels = _row_labels(order, lang)
    shown.index = labels
    numbers.index = labels
    shown.columns.name = None
    numbers.columns.name = None
    if caption is None:
        metric = str(frame["metric"].iloc[0]) if "metric" in frame.columns else ""
        unit = str(frame["unit"].iloc[0]) if "unit" in frame.columns else ""
        caption = caption_for(metric, unit, lang)
    return Table(shown, caption=caption, notes=notes, data=numbers)


def caption_for(metric: str, unit: str, lang: str) -> str:
    name = i18n.label(metric, lang, section="metrics")
    unit = i18n.unit(unit, lang) if unit else ""
    return f"{name}{i18n.paren(unit, lang)}" if unit and unit != name else name


def results_table(data: pd.DataFrame, *, metrics: Sequence[str] = ("bw_mbps", "iops"), system: str = "system",
                  statistic: str = "mean", lang: str = "en", by: Sequence[str] = ("test", "direction")) -> Table:
    """Rows = test x direction, columns = (metric with unit, system): the report's results table."""
    i18n.check_lang(lang)
    parts, numbers = [], []
    for metric in metrics:
        summary = summarize(data, value=metric, system=system, statistic=statistic, by=by)
        if summary.empty:
            continue
        table = pivot(summary, lang=lang, ci=statistic == "mean")
        head = caption_for(metric, metric_unit(metric), lang)
        parts.append(pd.concat({head: table.frame}, axis=1))
        numbers.append(pd.concat({head: table.data}, axis=1))
    if not parts:
        return Table(pd.DataFrame(), caption=i18n.text("headings.results", lang), notes=[i18n.text("text.no_runs", lang)])
    frame = pd.concat(parts, axis=1).fillna(DASH)
    n = summarize(data, value=metrics[0], system=system, statistic=statistic, by=by)["n"]
    note = repetitions_note(n, statistic, lang, windows=bool(steady_window.in_window(data).any()))
    return Table(frame, caption=i18n.text("headings.results", lang), notes=[note],
                 data=pd.concat(numbers, axis=1))


def repetitions_note(n: pd.Series, statistic: str, lang: str, *, windows: bool = False) -> str:
    """The note under a table: how many repetitions each value stands for, and what ± means.

    ``windows``: some values are a steady-state run's measurement window, the mean of its rounds as one figure
    (:mod:`iolab.report.steady_window`): the note says so, and never suggests ``--repeat`` for them (a round is
    a point in time on a changing drive, not a repetition)."""
    if len(n) and n.nunique() == 1 and int(n.iloc[0]) == 1:
        return i18n.text("repetitions_note.single_window" if windows else "labels.single_note", lang)
    if statistic == "mean":
        key = "labels.ci_note" if n.nunique() == 1 else "labels.ci_note_varied"
    else:
        key = "labels.stat_note" if n.nunique() == 1 else "labels.stat_note_varied"
    note = i18n.text(key, lang, statistic=i18n.text(f"labels.{statistic}", lang), n=int(n.iloc[0]) if len(n) else 0)
    return i18n.join_sentences([note, i18n.text("repetitions_note.window", lang)], lang) if windows else note


#: More systems than this and tables turn: one row per system.
MAX_COLUMNS = 8


def article_table(data: pd.DataFrame, *, metric: str = "bw_mbps", system: str = "system", statistic: str = "mean",
                  lang: str = "en", caption: str | None = None, orient: str = "auto") -> Table:
    """CrystalDiskMark's shape: rows = tests, columns = (system, direction).

    ``orient="systems"`` (automatic beyond :data:`MAX_COLUMNS` systems) turns
    it: rows = systems, columns = (test, direction), for comparisons of many
    servers.
    """
    summary = summarize(data, value=metric, system=system, statistic=statistic)
    if summary.empty:
        return Table(pd.DataFrame(), caption=caption or "", notes=[i18n.text("text.no_runs", lang)])
    # a CI belongs to the mean: other statistics are shown without one
    summary["shown"] = [_fmt_ci(row, lang) if statistic == "mean" else i18n.number(row["value"])
                        for _, row in summary.iterrows()]
    tests = list(dict.fromkeys(summary["test"]))
    systems = list(dict.fromkeys(summary["system"]))
    directions = list(dict.fromkeys(summary["direction"]))
    shown = summary.pivot_table(index="test", columns=["system", "direction"], values="shown", aggfunc="first")
    numbers = summary.pivot_table(index="test", columns=["system", "direction"], values="value", aggfunc="first")
    cols = pd.MultiIndex.from_product([systems, directions])
    shown = shown.reindex(index=tests, columns=cols).astype(object).fillna(DASH)  # a column no row had is float
    numbers = numbers.reindex(index=tests, columns=cols)
    labels = pd.Index([i18n.label(t, lang, section="tests") for t in tests], name=i18n.text("labels.test", lang))
    shown.index = numbers.index = labels
    translated = pd.MultiIndex.from_tuples([(s, i18n.label(d, lang, section="directions")) for s, d in cols])
    shown.columns = numbers.columns = translated
    if orient == "systems" or (orient == "auto" and len(systems) > MAX_COLUMNS):
        shown, numbers = shown.T.unstack(level=1), numbers.T.unstack(level=1)
        order = pd.MultiIndex.from_tuples([(t, i18n.label(d, lang, section="directions"))
                                           for t in labels for d in directions])
        shown, numbers = shown.reindex(columns=order), numbers.reindex(columns=order)
        shown.index.name = numbers.index.name = i18n.text("labels.system", lang)
    note = repetitions_note(summary["n"], statistic, lang, windows=bool(steady_window.in_window(data).any()))
    return Table(shown, caption=caption or caption_for(metric, metric_unit(metric), lang), notes=[note], data=numbers)


def article_tables(data: pd.DataFrame, *, metrics: Sequence[str] = ("bw_mbps", "iops"), lang: str = "en",
                   **options) -> list[Table]:
    """:func:`article_table` per metric, shown one after another: a note the table before already carries (how
    many repetitions, what ± means) is not repeated under the next one."""
    out, said = [], set()
    for metric in metrics:
        table = article_table(data, metric=metric, lang=lang, **options)
        table.notes = [n for n in table.notes if n not in said]
        said.update(table.notes)
        out.append(table)
    return out


# ---------------------------------------------------------------------------
# provenance
