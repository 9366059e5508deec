"""Plots in seaborn's style: tidy data in, Axes out; computation separate from drawing.

* :func:`setup` picks the theme and a font that has the glyphs of the language
  (Japanese: IPAexGothic from the ``matplotlib-fontja`` wheel, no network).
* :func:`bar_positions`, :func:`dot_positions` and :func:`percentile_frame`
  compute; :func:`bars`, :func:`dots` (dozens of systems) and
  :func:`latency_percentiles` draw; :func:`y_axis` is the value-axis rule they
  and :mod:`~iolab.report.fleetplots`/:mod:`~iolab.report.curveplots` share.

Plotting libraries are imported here and nowhere else in iolab.
"""
from __future__ import annotations

import logging
import math
from typing import Sequence

import pandas as pd

from iolab.report import barlabels, i18n, palette
from iolab.core import optional
from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: Font with Japanese glyphs shipped by matplotlib-fontja.
JAPANESE_FONT = "IPAexGothic"
LATIN_FONT = "DejaVu Sans"


def _mpl():
    plt = optional.pyplot()
    import matplotlib
    return matplotlib, plt


def _texts(ax, xlabel, ylabel, title) -> None:
    """Axis labels and title; None keeps what seaborn set, "" clears it."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)


def require_columns(data, columns: Sequence[str], what: str) -> None:
    """An :class:`IolabError` (context ``what``, the plotting function) unless ``data`` is a DataFrame with rows
    and every named column (empty names skipped)."""
    if not isinstance(data, pd.DataFrame):
        raise IolabError(f"expected a pandas DataFrame, got {type(data).__name__}", context=what)
    missing = [c for c in columns if c and c not in data.columns]
    if missing:
        raise IolabError(f"no column {', '.join(map(repr, missing))}", context=what,
                         hint=f"columns are: {', '.join(map(str, data.columns))}")
    if data.empty:
        raise IolabError("no data to plot", context=what)


def japanese_font() -> str:
    """Register IPAexGothic from matplotlib-fontja and return its family name."""
    try:
        import matplotlib_fontja
    except ImportError as exc:
        raise IolabError("matplotlib-fontja is not installed: Japanese plots need it",
                         hint="pip install matplotlib-fontja") from exc
    from matplotlib import font_manager
    path = matplotlib_fontja.get_font_ttf_path()
    if not any(f.fname == path for f in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(path)
    return JAPANESE_FONT


def font_families(lang: str) -> list[str]:
    """The font family list for ``lang`` (matplotlib falls back glyph by glyph)."""
    i18n.check_lang(lang)
    ja = japanese_font()
    return [ja, LATIN_FONT] if lang == "ja" else [LATIN_FONT, ja]


_STATE = {"lang": "en"}  # the report language set by setup(): axis notes such as "log scale"


def setup(lang: str = "en", *, style: str = "whitegrid", context: str = "notebook") -> dict:
    """Seaborn theme plus fonts for ``lang``; returns the rc settings applied.

    Both languages get IPAexGothic as a fallback so that Japanese labels in an
    English report (a system named in Japanese) still render.
    """
    import seaborn as sns
    matplotlib, _ = _mpl()
    _STATE["lang"] = lang
    families = font_families(lang)
    # a list in font.family turns on matplotlib's glyph-by-glyph fallback
    rc = {"font.family": families, "font.sans-serif": families + list(matplotlib.rcParams["font.sans-serif"]),
          "axes.unicode_minus": False, "figure.dpi": 100, "savefig.bbox": "tight"}
    sns.set_theme(style=style, context=context, rc=rc)
    matplotlib.rcParams.update(rc)
    return rc


# ---------------------------------------------------------------------------
# computation


def bar_positions(data: pd.DataFrame, *, x: str, y: str, hue: str | None = None,
                  low: str | None = None, high: str | None = None, width: float = 0.8) -> pd.DataFrame:
    """Where each bar goes: columns ``x, hue, y, pos, width, err_low, err_high``.

    Categories keep the order of first appearance. ``low``/``high`` name
    interval columns (e.g. ``ci_low``/``ci_high``); the errors are distances
    from ``y``, NaN where unknown.
    """
    for column in [x, y] + [c for c in (hue, low, high) if c]:
        if column not in data.columns:
            raise IolabError(f"no column {column!r}", context="plot", hint="columns: " + ", ".join(map(str, data.columns)))
    xs = list(dict.fromkeys(data[x].astype(str)))
    hues = list(dict.fromkeys(data[hue].astype(str))) if hue else [""]
    step = width / len(hues)
    rows = []
    for _, row in data.iterrows():
        xi = xs.index(str(row[x]))
        hi = hues.index(str(row[hue])) if hue else 0
        value = float(row[y]) if not pd.isna(row[y]) else math.nan
        lo = float(row[low]) if low and not pd.isna(row[low]) else math.nan
        up = float(row[high]) if high and not pd.isna(row[high]) else math.nan
        rows.append({"x": str(row[x]), "hue": str(row[hue]) if hue else "", "y": value,
                     "pos": xi - width / 2 + step * (hi + 0.5), "width": step,
                     "err_low": value - lo if not math.isnan(lo) else math.nan,
                     "err_high": up - value if not math.isnan(up) else math.nan})
    return pd.DataFrame(rows, columns=["x", "hue", "y", "pos", "width", "err_low", "err_high"])


def language() -> str:
    """The report language :func:`setup` set (axis notes such as "log scale" are written in it)."""
    return _STATE["lang"]


def wants_log(values: Sequence[float], *, ratio: float = 100.0) -> bool:
    """A log axis when the positive values span more than ``ratio``."""
    positive = [v for v in values if v is not None and not pd.isna(v) and v > 0]
    return bool(positive) and max(positive) / min(positive) > ratio


def percentile_frame(results: pd.DataFrame, *, system: str = "system") -> pd.DataFrame:
    """Latency percentiles, tidy: ``system, test, direction, percentile, latency_ms`` (median over reps)."""
    columns = {"lat_p50_us": "p50", "lat_p99_us": "p99", "lat_p999_us": "p99.9", "lat_max_us": "max"}
    present = [c for c in columns if c in results.columns]
    if not present:
        raise IolabError("no latency percentile columns", context="plot")
    keys = [c for c in (system, "test", "direction") if c in results.columns]
    melted = results.melt(id_vars=keys, value_vars=present, var_name="percentile", value_name="latency_us")
    melted["latency_us"] = pd.to_numeric(melted["latency_us"], errors="coerce")
    frame = melted.groupby(keys + ["percentile"], sort=False, dropna=False)["latency_us"].median().reset_index()
    frame["percentile"] = frame["percentile"].map(columns)
    frame["latency_ms"] = frame.pop("latency_us") / 1000.0
    return frame.rename(columns={system: "system"})


# ---------------------------------------------------------------------------
# drawing


#: Marker drawn where a result could not be measured (Bonnie++'s +++++).
UNMEASURED = "+++++"


def system_color(name, palette_name: str | None = None) -> tuple:
    """The colour of a system in every chart kind (:func:`iolab.report.palette.color`); ``palette_name`` is
    accepted for old callers and ignored: one palette for the page."""
    return palette.color(name)


def tick_label(value: float) -> str:
    """An axis tick as a plain number: ``1,000`` not ``10^3``, ``0.5`` not ``5e-01``."""
    if value == 0 or abs(value) >= 1 and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.6g}" if abs(value) >= 1 else f"{value:g}"


def y_axis(ax, *, log: bool, label: str | None = None, bars: Sequence[float] | None = None) -> None:
    """The value axis of every iolab chart: ticks as plain numbers (:func:`tick_label`: 1,000 not 10^3)
    and, when ``log``, no minor tick labels and "log scale" in ``label``'s brackets in the report's language
    (:func:`iolab.report.i18n.with_note`: "Throughput (MB/s, log scale)").

    ``label`` None keeps the axis' label where linear (what seaborn set), "" clears it. ``bars``: the values
    of bars drawn from the axis' bottom; a log axis then starts at :func:`barlabels.log_baseline` of them
    (a decade below the smallest), so that every bar has a length.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter
    if log:
        ax.set_yscale("log")
        if bars is not None:
            ax.set_ylim(bottom=barlabels.log_baseline(bars))
        ax.yaxis.set_minor_formatter(NullFormatter())
        label = i18n.with_note(label, i18n.text("labels.log_scale", _STATE["lang"]), _STATE["lang"])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: tick_label(v)))
    if label is not None:
        ax.set_ylabel(label)


def bar_label(value, *, published: bool = False) -> str:
    """A bar's value label, by the rule of the table beside it: a measured value as :func:`iolab.report.i18n.number`
    prints it in :func:`iolab.report.tables.pivot` (318.66 -> 319, 12.34 -> 12.3), a published one as the article
    printed it (:func:`iolab.report.i18n.as_published`: 318.66); '' when missing."""
    if value is None or pd.isna(value):
        return ""
    return i18n.as_published(value) if published else i18n.number(value)


def reference_line(ax, value: float, label: str) -> None:
    """A dashed horizontal line at ``value`` (1x: no speed-up; 0%: no overhead), named in the legend right of the
    axes: the systems' legend when there is one, else a legend of its own. Written on the line, its label met a
    short bar's value label (nytro's 3.3 under '1x: no speed-up'); inside the axes, a legend met the bars."""
    line = ax.axhline(value, color="#333333", linestyle="--", linewidth=1, zorder=1, gid="reference", label=label)
    before = ax.get_legend()  # bars()' legend of the systems, again with the line at its end; or the line's own
    named, title = [], None
    if before is not None:
        named = [(h, text) for h, text in zip(*ax.get_legend_handles_labels()) if h is not line]
        title = before.get_title().get_text() or None
    ax.legend(*zip(*named, (line, label)), title=title, fontsize="small", title_fontsize="small", frameon=False,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))


def bars(data: pd.DataFrame, *, x: str, y: str, hue: str | None = None, ax=None,
         low: str | None = None, high: str | None = None, log: bool | str = "auto",
         xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
         palette: str = "deep", legend_title: str | None = None, hatched: Sequence[str] = (),
         value_labels: bool = True, labels: str | None = None, published: bool = False):
    """Grouped bars of ``y`` per ``x`` (and ``hue``), error bars from ``low``/``high``.

    Each bar carries its value; a missing value (``+++++``: too fast to time) is
    marked where its bar would be; each ``hue`` (system) keeps one colour in
    every chart of the process (:func:`system_color`).

    ``data`` is tidy, one row per bar (e.g. :func:`iolab.report.tables.summarize`).
    ``log="auto"`` uses a log axis when values span more than 100x (an HDD
    next to an NVMe drive). ``hatched`` hue values get hatched bars (e.g.
    systems not isolated from the page cache). The value labels follow the
    table's rounding (:func:`bar_label`; ``published``: as the article printed
    them), or are the texts of column ``labels``. The category labels are level: the figure's
    :func:`tight` turns them where they would run together. Returns the Axes.
    """
    import seaborn as sns
    _, plt = _mpl()
    pos = bar_positions(data, x=x, y=y, hue=hue, low=low, high=high)
    if labels is not None:
        pos["text"] = ["" if pd.isna(t) else str(t) for t in data[labels]]
    else:
        pos["text"] = [bar_label(v, published=published) for v in pos["y"]]
    if ax is None:
        width = max(6.0, 0.9 * pos["x"].nunique() * max(1, pos["hue"].nunique()) * 0.45 + 2)
        _, ax = plt.subplots(figsize=(min(width, 14.0), 4.2))
    hues = list(dict.fromkeys(pos["hue"]))
    colors = [system_color(name) for name in hues] if hue else sns.color_palette(palette, n_colors=1)
    use_log = wants_log(pos["y"]) if log == "auto" else bool(log)
    # a log axis starts a decade below the smallest value: every bar is visible and drawn from there
    base = barlabels.log_baseline(pos["y"]) if use_log else 0.0
    texts = []
    for color, name in zip(colors, hues):
        part = pos[pos["hue"] == name]
        drawn = ax.bar(part["pos"], (part["y"] - base).clip(lower=0).fillna(0), bottom=base,
                       width=part["width"] * 0.95, color=color,
                       label=name if hue else None, edgecolor="white", linewidth=0.5,
                       hatch="///" if name in set(map(str, hatched)) else None)
        if value_labels:
            texts += ax.bar_label(drawn, labels=list(part["text"]), fontsize="x-small", padding=1.5)
        for at in part.loc[part["y"].isna(), "pos"]:  # not measured / +++++: say so where the bar would be
            ax.annotate(UNMEASURED, (at, base), xytext=(0, 3), textcoords="offset points", ha="center",
                        va="bottom", rotation=90, fontsize="x-small", color=color)
        has_err = part["err_low"].notna() & part["err_high"].notna()
        if has_err.any():
            sub = part[has_err]
            ax.errorbar(sub["pos"], sub["y"], yerr=[sub["err_low"].clip(lower=0), sub["err_high"].clip(lower=0)],
                        fmt="none", ecolor="#333333", elinewidth=1, capsize=2.5)
    xs = list(dict.fromkeys(pos["x"]))
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([wrapped_tick(x) for x in xs])
    y_axis(ax, log=use_log, label=ylabel, bars=pos["y"])
    _texts(ax, xlabel, None, title)
    if hue and len(hues) > 1:
        ax.legend(title=legend_title, fontsize="small", title_fontsize="small", frameon=False,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="x", visible=False)
    # after the legend and axis labels: measured as the image will be drawn
    barlabels.fit(ax, texts)
    return ax


def tight(fig) -> None:
    """``fig.tight_layout()`` for a figure of bar or dot charts, then, at each axes' final width (the layout
    narrows axes for their legends and labels), its category labels turned where, level, they would run
    together (:func:`barlabels.turn_ticks`; measured level, as a turned label would narrow them itself) and its
    bars' value labels fitted again (:func:`barlabels.refit`), and the layout again for what they changed."""
    for ax in fig.axes:
        barlabels.set_turned(ax, False)
    fig.tight_layout()
    turned = [barlabels.turn_ticks(ax) for ax in fig.axes]
    refitted = [barlabels.refit(ax) for ax in fig.axes]
    if any(turned) or any(refitted):
        fig.tight_layout()


def text_width(text: str) -> int:
    """How many Latin characters wide ``text`` is: a full-width (Japanese) character counts two, so that
    a long Japanese label (「-tバッファ付きディスク読み込み（交互に5回実行した平均）」) is broken like a Latin one."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in str(text))


def wrapped_tick(label, width: int = 26) -> str:
    """A category label wider than ``width`` (:func:`text_width`) on two lines, broken before its bracket
    (``-tバッファ付きディスク読み込み`` / ``（交互に5回実行した平均）``) or at the space nearest its middle, so a turned
    label does not take the chart's height; shorter labels unchanged."""
    text = str(label)
    if text_width(text) <= width or "\n" in text:
        return text
    for mark in ("（", " ("):
        at = text.find(mark)
        if at > 0:
            return text[:at].rstrip() + "\n" + text[at:].lstrip()
    spaces = [i for i, c in enumerate(text) if c == " "]
    if not spaces:
        return text
    middle = min(spaces, key=lambda i: abs(text_width(text[:i]) - text_width(text) / 2))
    return text[:middle] + "\n" + text[middle + 1:]


def dot_positions(data: pd.DataFrame, *, x: str, y: str, width: float = 0.6) -> pd.DataFrame:
    """One dot per row, spread evenly across its category by rank.

    Returns ``data``'s columns plus ``dot_y`` (the value), ``dot_rank`` (1 =
    highest in its category) and ``dot_pos`` (where the dot goes on the x axis).
    """
    for column in (x, y):
        if column not in data.columns:
            raise IolabError(f"no column {column!r}", context="plot", hint="columns: " + ", ".join(map(str, data.columns)))
    xs = list(dict.fromkeys(data[x].astype(str)))
    frame = data.assign(_x=data[x].astype(str), dot_y=pd.to_numeric(data[y], errors="coerce"))
    frame["dot_rank"] = frame.groupby("_x")["dot_y"].rank(method="first", ascending=False)
    counts = frame.groupby("_x")["dot_y"].transform("count").clip(lower=1)
    offset = ((frame["dot_rank"] - 1) / (counts - 1).where(counts > 1, 1) - 0.5) * width
    offset = offset.where(counts > 1, 0.0)
    frame["dot_pos"] = frame["_x"].map({name: i for i, name in enumerate(xs)}) + offset
    return frame.drop(columns=["_x"])


def dots(data: pd.DataFrame, *, x: str, y: str, label: str | None = None, ax=None, log: bool | str = "auto",
         annotate: int = 1, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
         color: str = "#4C72B0"):
    """Many systems at once: one dot per row and category, the best and worst ``annotate`` labelled.

    For comparisons of dozens of servers, where grouped bars and a legend no
    longer work. Dots are spread across each category in rank order; the category labels are level
    until the figure's :func:`tight`.
    """
    _, plt = _mpl()
    pos = dot_positions(data, x=x, y=y)
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14.0, max(6.0, 1.3 * pos[x].nunique() + 2)), 4.5))
    ax.scatter(pos["dot_pos"], pos["dot_y"], s=14, color=color, alpha=0.75, linewidths=0)
    xs = list(dict.fromkeys(data[x].astype(str)))
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([wrapped_tick(x) for x in xs])
    use_log = log == "auto" and wants_log(pos["dot_y"]) or log is True
    y_axis(ax, log=use_log, label=ylabel)  # plain tick numbers (1,000) on either scale, as every chart
    if label and annotate:
        for _, part in pos.groupby(x, sort=False):
            part = part.dropna(subset=["dot_y"]).sort_values("dot_y", ascending=False)
            picks = pd.concat([part.head(annotate), part.tail(annotate)])
            picks = picks[~picks.index.duplicated()]
            for _, row in picks.iterrows():
                ax.annotate(str(row[label]), (row["dot_pos"], row["dot_y"]), fontsize="x-small",
                            xytext=(3, 0), textcoords="offset points", va="center")
    _texts(ax, xlabel, None, title)
    ax.grid(axis="x", visible=False)
    return ax


#: Markers of the lines of one chart, a system each (its colour is its own in every chart).
LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def latency_percentiles(data: pd.DataFrame, *, x: str = "percentile", y: str = "latency_ms",
                        hue: str | None = "system", ax=None, xlabel: str | None = None,
                        ylabel: str | None = None, title: str | None = None, palette: str = "deep"):
    """Latency by percentile (p50, p99, p99.9, max), one line per ``hue``; a log y axis only when the latencies
    span more than 100x (:func:`wants_log`), then said on the axis; ticks as plain numbers either way."""
    import seaborn as sns
    _, plt = _mpl()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 3.6))
    # each system in its colour of every other chart (palette.color), not in the order of this one's legend
    colors = palette_colors(data[hue]) if hue else None
    if hue:  # and its own marker, each line narrower than the one drawn before: systems with the same
        # latencies (lines on top of each other) still show every colour, and the legend tells them apart
        names = list(dict.fromkeys(data[hue]))
        markers = {n: LINE_MARKERS[i % len(LINE_MARKERS)] for i, n in enumerate(names)}
        sns.lineplot(data=data, x=x, y=y, hue=hue, style=hue, markers=markers, dashes=False, ax=ax,
                     palette=colors, sort=False, errorbar=None)
        for i, line in enumerate(ax.get_lines()[:len(names)]):
            line.set_linewidth(max(1.2, 2.8 - 0.6 * i))
            line.set_markersize(max(4.0, 9.0 - 2.0 * i))
    else:
        sns.lineplot(data=data, x=x, y=y, marker="o", ax=ax, sort=False, errorbar=None)
    y_axis(ax, log=wants_log(data[y]), label=ylabel)
    _texts(ax, xlabel, None, title)
    if ax.get_legend() is not None:
        ax.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def palette_colors(names) -> dict[str, tuple]:
    """``{name: colour}`` of :mod:`iolab.report.palette` for seaborn's ``palette=``."""
    return palette.mapping(names)


def to_image(fig, *, alt: str, dpi: int = 110):
    """``fig`` as an IPython PNG image carrying ``alt`` text (used by the HTML and Markdown exports).

    The figure is closed, so it is not shown a second time by the inline backend.
    """
    import io
    from IPython.display import Image
    _, plt = _mpl()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return Image(data=buffer.getvalue(), format="png", alt=alt)
