"""Recipe-specific report sections: each classic tool's own tables, its curve and findings from the numbers.

The compare notebook shows every recipe in a generic shape (a table per
metric, a bar chart, winners). Some recipes are read differently: a queue-depth
sweep is a curve with a knee, GNOME Disks is a rate along the device, Bonnie++
and tiobench have tables readers know by heart, hdparm is an average of
alternating passes, pgbench is transactions per second against clients, a fleet
is hosts side by side. This module gives each of them its article shape.

Two layers, as everywhere in iolab's reporting:

* computation, tidy DataFrames in and out (rows = systems x points, numbers in
  the units stated by the column names): :func:`qd_points`, :func:`qd_knees`,
  :func:`concurrency_points`, :func:`gnome_summary`, :func:`bonnie_results`,
  :func:`tiobench_results`, :func:`hdparm_results`, :func:`pgbench_results`,
  :func:`fio_write_latency`, :func:`fleet_hosts`, :func:`without_aggregates`;
* presentation: one function per recipe kind returning a :class:`Section`
  (tables as :class:`iolab.report.tables.Table`, matplotlib figures, commentary
  sentences in ``en`` or ``ja``): :func:`qd_sweep_section`,
  :func:`concurrency_section`, :func:`gnome_disks_section`,
  :func:`bonnie_section`, :func:`tiobench_section`, :func:`hdparm_section`,
  :func:`pgbench_section`, :func:`fleet_section`.

:func:`plan` tells which kinds a recipe's rows are (from the rows themselves:
test names, the ``tool``, ``sweep`` and ``fleet_id`` columns, not the recipe's
name, so a renamed recipe keeps its section) and :func:`build` makes the
sections and returns the rows no section covers, for the generic shape. A
fleet's aggregate rows (host ``all``, flag ``fleet_aggregate``) never reach
the generic shape: they are the sum of the hosts, not one more system.

Nothing here prints or draws on screen: :meth:`Section.show` displays a
section in a notebook (figures as PNG images with alt text).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from iolab.report import commentary, i18n, tables, section_caveats
from iolab.analysis import curves
from iolab.core.errors import IolabError
from iolab.analysis.stats import split_flags, valid_rows
from iolab.report.tables import DASH, Table

MiB = 1024 * 1024
GiB = 1024 * MiB

#: Host name of a fleet's aggregate rows (:data:`iolab.fleet.runs.ALL_HOSTS`).
ALL_HOSTS = "all"
#: Flag of a fleet's aggregate rows.
AGGREGATE_FLAG = "fleet_aggregate"

#: Section kinds, in the order a recipe's sections are shown.
KINDS = ("fleet", "pgbench", "bonnie", "tiobench", "hdparm", "gnome-disks", "qd-sweep", "concurrency")

BONNIE_TESTS = ("putc", "put_block", "rewrite", "getc", "get_block", "seeks")
#: bonnie++'s columns: test -> (group, column)
BONNIE_LAYOUT = {"putc": ("seq_output", "per_chr"), "put_block": ("seq_output", "block"),
                 "rewrite": ("seq_output", "rewrite"), "getc": ("seq_input", "per_chr"),
                 "get_block": ("seq_input", "block"), "seeks": ("random", "seeks")}
HDPARM_TESTS = ("cached-reads", "disk-reads")
GNOME_TESTS = ("read-rate", "write-rate", "access-time")
TIOBENCH_TESTS = ("SeqWrite", "RandWrite", "SeqRead", "RandRead")
#: bonnie++'s MinTime: a test that took less prints "+++++".
BONNIE_MIN_TIME = 0.5
PLUS = "+++++"


# =========================================================================== the section object


@dataclass
class Figure:
    """A matplotlib figure of a section, with the alt text its image carries."""
    figure: object
    alt: str
    caption: str = ""

    @property
    def axes(self) -> list:
        return list(self.figure.axes)


@dataclass
class Section:
    """One recipe-specific part of a report: heading, tables, figures, findings."""
    kind: str
    title: str
    lang: str = "en"
    intro: str = ""
    tables: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    sentences: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    caveats: list = field(default_factory=list)  # the flags of the rows shown (iolab.report.section_caveats)

    def __repr__(self) -> str:
        return (f"Section({self.kind!r}, {self.title!r}, {len(self.tables)} tables, {len(self.figures)} figures, "
                f"{len(self.sentences)} sentences)")

    @property
    def findings(self) -> str:
        """The commentary as Markdown (a bullet per sentence, notes after)."""
        text = "\n".join(f"- {s}" for s in self.sentences)
        if self.notes:
            text += ("\n\n" if text else "") + "\n".join(f"*{n}*" for n in self.notes)
        return text

    def markdown(self) -> str:
        """Heading, tables and findings as Markdown (figures left out): for tests and plain-text use."""
        parts = [f"### {self.title}"]
        if self.intro:
            parts.append(self.intro)
        parts += [t.to_markdown() for t in self.tables]
        if self.sentences or self.notes:
            parts.append(f"**{i18n.text('headings.commentary', self.lang)}**\n\n{self.findings}")
        if self.caveats:
            parts.append(self.caveats_markdown())
        return "\n\n".join(parts)

    def caveats_markdown(self) -> str:
        return i18n.text("commentary.caveats", self.lang) + "\n" + "\n".join(f"- {c}" for c in self.caveats)

    def show(self, display: Callable | None = None, *, level: int = 3) -> None:
        """Display in a notebook: heading, tables, figures (closed once shown), findings."""
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        from iolab.report import plot
        display(Markdown(f"{'#' * level} {self.title}" + (f"\n\n{self.intro}" if self.intro else "")))
        for table in self.tables:
            display(table)
        for fig in self.figures:
            display(plot.to_image(fig.figure, alt=fig.alt))
            if fig.caption:
                display(Markdown(fig.caption))
        if self.sentences or self.notes:
            display(Markdown(f"**{i18n.text('headings.commentary', self.lang)}**\n\n{self.findings}"))
        if self.caveats:
            display(Markdown(self.caveats_markdown()))

    def close(self) -> None:
        """Close the figures without showing them."""
        import matplotlib.pyplot as plt
        for fig in self.figures:
            plt.close(fig.figure)


# =========================================================================== helpers


def _t(key: str, lang: str, **fields) -> str:
    return i18n.text(f"sections.{key}", lang, **fields)


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is in the notebook extra
        raise IolabError("matplotlib is needed to draw plots", context="sections",
                         hint="pip install 'iolab[notebook]'") from exc
    return plt


def _labels(group: str, lang: str) -> dict:
    """Axis and legend texts of a plotting function (``sections.plot.<group>``) in ``lang``."""
    return dict(i18n.catalog(lang)["sections"]["plot"][group])


def _num(series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where the frame lacks it."""
    if name not in frame.columns:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return _num(frame[name])


def _usable(data: pd.DataFrame) -> pd.DataFrame:
    return data[valid_rows(data)] if len(data) else data


def _system(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with a ``system`` column (the label where :func:`iolab.report.notebooks.select` did not name one)."""
    if "system" in data.columns:
        return data
    if "label" not in data.columns:
        raise IolabError("no column 'system' or 'label' naming the systems", context="sections",
                         hint="use iolab.report.notebooks.select()")
    return data.assign(system=data["label"].astype(str))


def _systems(data: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(data["system"].astype(str)))


def _order(values) -> list:
    return list(dict.fromkeys(values))


def _about(value: float) -> str:
    """A rounded figure for prose: three significant digits (``39,412`` -> ``39,400``)."""
    if value is None or not np.isfinite(value) or value == 0:
        return i18n.number(value)
    digits = 2 - int(math.floor(math.log10(abs(value))))
    return i18n.number(round(value, digits), digits=max(0, digits))


def _pct(fraction: float) -> str:
    """A relative change as a signed percentage: ``0.018`` -> ``+1.8%``, ``-0.62`` -> ``-62%``."""
    pct = fraction * 100
    text = f"{abs(pct):.1f}" if abs(pct) < 10 else f"{abs(pct):.0f}"
    return ("-" if pct < 0 and text.strip("0.") else "+") + text + "%"


def _small_pct(value: float) -> str:
    """A small share in percent for prose: ``0.31``, ``0.012``, ``0.0008``, ``12.5``."""
    if value >= 1:
        return i18n.number(value, digits=1)
    return f"{value:.2g}"


def _ms(us: float) -> str:
    return i18n.number(us / 1000.0) if us is not None and np.isfinite(us) else DASH


def _fmt(value, digits: int | None = None) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return DASH
    return i18n.number(value, digits=digits)


def _join(items: Sequence[str], lang: str) -> str:
    return i18n.join(list(items), lang)


def _bullets_join(parts: Sequence[str], lang: str) -> str:
    """Sentences of one bullet: a space between them in English, none in Japanese."""
    return ("" if lang == "ja" else " ").join(p for p in parts if p)


def _winner_lines(summary: pd.DataFrame, lang: str) -> list[str]:
    """iolab.report.commentary's winner sentences for a summary (system, test, direction, metric, unit, value...)."""
    if summary.empty:
        return []
    win = commentary.winners(summary)
    if win.empty:
        return []
    return commentary.winner_sentences(win, lang=lang)


def without_aggregates(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` without a fleet's aggregate rows (host ``all`` or flag ``fleet_aggregate``).

    The aggregate is the sum of the hosts that ran together, not one more
    system: generic tables and charts must not set it beside the hosts.
    """
    if data.empty:
        return data
    mask = pd.Series(False, index=data.index)
    if "flags" in data.columns:
        mask |= data["flags"].map(lambda v: AGGREGATE_FLAG in split_flags(v))
    if "host" in data.columns:
        mask |= data["host"].astype(str) == ALL_HOSTS
    return data[~mask]


def measured_systems(results: pd.DataFrame) -> list[str]:
    """The systems a selection measured: fleet aggregates left out, a fleet host counted once (by its label)
    however many fleet runs it took part in (``web1`` in the 1-, 2- and 3-host runs is one system)."""
    data = without_aggregates(_system(results)) if len(results) else results
    if data.empty:
        return []
    names = data["system"].astype(str)
    if "fleet_id" in data.columns and "label" in data.columns:
        names = names.where(data["fleet_id"].isna(), data["label"].astype(str))
    return list(dict.fromkeys(names))


def without_aggregate_runs(manifests: pd.DataFrame) -> pd.DataFrame:
    """Run manifests without a fleet's own runs (host ``all``, ``data/_fleet/``): they measured no system."""
    if manifests.empty or "host" not in manifests.columns:
        return manifests
    return manifests[manifests["host"].astype(str) != ALL_HOSTS].reset_index(drop=True)


def _is_aggregate(data: pd.DataFrame) -> pd.Series:
    return ~data.index.isin(without_aggregates(data).index)


# =========================================================================== which sections


def _tests(data: pd.DataFrame) -> set:
    return set(data["test"].dropna().astype(str)) if "test" in data.columns else set()


def _swept(data: pd.DataFrame, column: str, within: Sequence[str]) -> bool:
    """Whether ``column`` varies inside a sweep (rows with a ``sweep`` name), other ``within`` columns fixed."""
    if "sweep" not in data.columns or column not in data.columns:
        return False
    rows = data[data["sweep"].notna()]
    if rows.empty:
        return False
    keys = ["sweep"] + [c for c in within if c in rows.columns]
    return bool((rows.groupby(keys, dropna=False)[column].nunique() > 1).any())


def _kind_rows(data: pd.DataFrame) -> dict[str, pd.Index]:
    """Which rows each kind covers (a row can belong to several kinds: qd-sweep and concurrency)."""
    found: dict[str, pd.Index] = {}
    if data.empty:
        return found
    if "fleet_id" in data.columns and data["fleet_id"].notna().any():
        found["fleet"] = data.index[data["fleet_id"].notna()]
        data = data[data["fleet_id"].isna()]
    test = data["test"].astype(str) if "test" in data.columns else pd.Series("", index=data.index)
    tool = data["tool"].astype(str) if "tool" in data.columns else pd.Series("", index=data.index)
    pg = (tool == "pgbench") | (_col(data, "tps").notna())
    if pg.any():
        found["pgbench"] = data.index[pg]
    checks = {
        "bonnie": test.isin(BONNIE_TESTS),
        "hdparm": test.isin(HDPARM_TESTS),
        "gnome-disks": test.isin(GNOME_TESTS) & ("position" in data.columns or "access_ms" in data.columns),
        "tiobench": test.isin(TIOBENCH_TESTS) | _col(data, "over_2s_pct").notna(),
    }
    for kind, mask in checks.items():
        mask = mask & ~pg
        if mask.any():
            found[kind] = data.index[mask]
    if "sweep" in data.columns:
        swept = data[data["sweep"].notna() & ~pg]
        if _swept(swept, "iodepth", ("direction", "bs", "system")):
            found["qd-sweep"] = swept.index
        if _swept(swept, "numjobs", ("direction", "bs", "iodepth", "system")):
            found["concurrency"] = swept.index
    return {k: found[k] for k in KINDS if k in found}


def plan(data: pd.DataFrame) -> list[str]:
    """The section kinds that apply to ``data`` (one recipe's rows), in :data:`KINDS` order."""
    return list(_kind_rows(data))


def build(data: pd.DataFrame, *, lang: str = "en", context: pd.DataFrame | None = None
          ) -> tuple[list[Section], pd.DataFrame]:
    """The sections of one recipe's rows, and the rows none of them covers (fleet aggregates excluded).

    ``context`` is every selected result (all recipes): the pgbench section
    looks there for the same systems' fio latency.
    """
    i18n.check_lang(lang)
    data = _system(data)
    rows = _kind_rows(data)
    sections = []
    covered = pd.Index([])
    for kind, index in rows.items():
        part = data.loc[index]
        if kind == "pgbench":
            section = pgbench_section(part, lang=lang, fio=context)
        else:
            section = SECTIONS[kind](part, lang=lang)
        if section is not None:
            section.caveats = section_caveats.caveat_lines(part, lang=lang, kind=kind)
            sections.append(section)
            covered = covered.union(index)
    rest = without_aggregates(data.drop(index=covered))
    return sections, rest


# =========================================================================== qd-sweep


def _curve_keys(data: pd.DataFrame) -> list[str]:
    return [c for c in ("sweep", "direction", "bs") if c in data.columns]


def _curve_name(key: dict, lang: str) -> str:
    parts = [str(key.get("sweep") or key.get("test") or "")]
    if key.get("direction"):
        parts.append(i18n.label(key["direction"], lang, section="directions"))
    return " ".join(p for p in parts if p)


def qd_points(data: pd.DataFrame) -> pd.DataFrame:
    """One row per system x curve (sweep, direction, block size) x outstanding I/O.

    Columns: ``system``, the curve keys, ``oio`` (iodepth x numjobs), ``n``,
    ``iops``, ``p50_us``, ``p99_us`` (medians of the repetitions and of the
    configurations with the same OIO, as :func:`iolab.analysis.curves.sweep_table`),
    ``iodepth``/``numjobs`` (NaN where several share the OIO), ``knee`` (the
    point :func:`iolab.analysis.curves.find_knee` chose).
    """
    data = _system(data)
    data = data[data["sweep"].notna()] if "sweep" in data.columns else data
    keys = _curve_keys(data)
    out = []
    for key, sub in data.groupby(keys + ["system"], sort=False, dropna=False):
        key = dict(zip(keys + ["system"], key if isinstance(key, tuple) else (key,)))
        table = curves.sweep_table(sub)
        if table.empty:
            continue
        p50 = curves.sweep_table(sub, p99="lat_p50_us")["p99"] if "lat_p50_us" in sub.columns else math.nan
        knee = curves.find_knee(sub) if len(table) >= 2 else None
        frame = pd.DataFrame({**key, "oio": table["x"], "n": table["n"], "iops": table["iops"], "p50_us": p50,
                              "p99_us": table["p99"],
                              "iodepth": table.get("iodepth", math.nan), "numjobs": table.get("numjobs", math.nan)})
        frame["knee"] = (frame["oio"] == knee.x) if knee else False
        out.append(frame)
    columns = ["system"] + keys + ["oio", "n", "iops", "p50_us", "p99_us", "iodepth", "numjobs", "knee"]
    if not out:
        return pd.DataFrame(columns=columns)
    return pd.concat(out, ignore_index=True)[columns]


def qd_knees(data: pd.DataFrame, *, iops_gain: float = 0.05, p99_growth: float = 0.20) -> pd.DataFrame:
    """Per system and curve: the knee of the sweep (:func:`iolab.analysis.curves.find_knee`) and what lies beyond it.

    Columns: ``system``, the curve keys, ``found``, ``oio``/``iops``/``p99_us``
    at the knee, ``next_oio``, ``iops_gain`` and ``p99_growth`` of the step
    after it (fractions), ``last_oio``/``last_iops`` (the sweep's end),
    ``peak_oio``/``peak_iops`` (its highest IOPS), ``reason``.
    """
    data = _system(data)
    data = data[data["sweep"].notna()] if "sweep" in data.columns else data
    keys = _curve_keys(data)
    rows = []
    for key, sub in data.groupby(keys + ["system"], sort=False, dropna=False):
        key = dict(zip(keys + ["system"], key if isinstance(key, tuple) else (key,)))
        knee = curves.find_knee(sub, iops_gain=iops_gain, p99_growth=p99_growth)
        table = knee.table
        if table.empty:
            continue
        peak = table.loc[table["iops"].idxmax()]
        row = {**key, "found": knee.found, "oio": math.nan, "iops": math.nan, "p99_us": math.nan,
               "next_oio": math.nan, "iops_gain": math.nan, "p99_growth": math.nan,
               "last_oio": float(table["x"].iloc[-1]), "last_iops": float(table["iops"].iloc[-1]),
               "peak_oio": float(peak["x"]), "peak_iops": float(peak["iops"]), "reason": knee.reason}
        if knee.found:
            position = int(np.flatnonzero(table["x"].to_numpy() == knee.x)[0])
            nxt = table.iloc[position + 1]
            row.update(oio=knee.x, iops=float(knee.row["iops"]), p99_us=float(knee.row["p99"]),
                       next_oio=float(nxt["x"]), iops_gain=float(nxt["iops_gain"]), p99_growth=float(nxt["p99_growth"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=["system"] + keys + [
        "found", "oio", "iops", "p99_us", "next_oio", "iops_gain", "p99_growth", "last_oio", "last_iops",
        "peak_oio", "peak_iops", "reason"])


def qd_sweep_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """IOPS and p50/p99 latency against outstanding I/O per system, the knee marked and stated.

    Per curve (sweep, direction, block size): a table (rows = outstanding I/O,
    columns = IOPS, p50 and p99 per system), :func:`iolab.report.curveplots.qd_plot`
    with the knee starred and the p50 curves dotted, and a sentence per system:
    "IOPS saturate at about N at OIO k; beyond it p99 latency grows x%".
    """
    from iolab.report import curveplots
    i18n.check_lang(lang)
    data = _usable(_system(data))
    data = data[data["sweep"].notna()] if "sweep" in data.columns else data
    if data.empty:
        return None
    points = qd_points(data)
    knees = qd_knees(data)
    keys = _curve_keys(data)
    section = Section("qd-sweep", _t("qd.heading", lang), lang, intro=_t("qd.intro", lang))
    plt = _pyplot()
    for key, sub in data.groupby(keys, sort=False, dropna=False):
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        name = _curve_name(key, lang)
        mask = np.logical_and.reduce([points[k] == v for k, v in key.items()]) if key else slice(None)
        pts = points[mask]
        systems = _order(pts["system"])
        oios = sorted(pts["oio"].unique())
        blocks = {"iops": _t("qd.col_iops", lang), "p50_us": _t("qd.col_p50", lang), "p99_us": _t("qd.col_p99", lang)}
        shown, numbers = {}, {}
        for column, head in blocks.items():
            for system in systems:
                series = pts[pts["system"] == system].set_index("oio")[column].reindex(oios)
                values = series / 1000.0 if column != "iops" else series
                numbers[(head, system)] = values.to_numpy()
                shown[(head, system)] = [_fmt(v) for v in values]
        index = pd.Index([int(x) if float(x).is_integer() else x for x in oios], name=_t("qd.index", lang))
        table = Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                      caption=_t("qd.caption", lang, curve=name), notes=[_t("qd.note", lang)])
        section.tables.append(table)
        fig, ax = plt.subplots(figsize=(9.0, 4.6))
        curveplots.qd_plot(sub, hue="system", ax=ax, labels=_labels("qd", lang))
        twin = curveplots.twin_of(ax)
        colors = {line.get_label(): line.get_color() for line in ax.get_lines()}
        for system in systems:
            part = pts[pts["system"] == system]
            if twin is not None and part["p50_us"].notna().any():
                twin.plot(part["oio"], part["p50_us"], linestyle=":", marker=".", color=colors.get(system),
                          label=f"{system} p50", gid="p50")
        _merge_legends(ax, twin)
        ax.set_title(name)
        section.figures.append(Figure(fig, alt=_t("qd.alt", lang, curve=name)))
        for system in systems:
            found = knees[(knees["system"] == system) & np.logical_and.reduce(
                [knees[k] == v for k, v in key.items()])] if key else knees[knees["system"] == system]
            if found.empty:
                continue
            k = found.iloc[0]
            if k["found"]:
                section.sentences.append(_t(
                    "qd.knee", lang, system=system, iops=_about(k["iops"]), oio=f"{k['oio']:g}",
                    growth=i18n.percent(k["p99_growth"]), next=f"{k['next_oio']:g}", gain=_pct(k["iops_gain"])))
            else:
                section.sentences.append(_t("qd.no_knee", lang, system=system, oio=f"{k['last_oio']:g}",
                                            iops=_about(k["last_iops"])))
        if len(systems) >= 2:
            curve_knees = knees[np.logical_and.reduce([knees[k] == v for k, v in key.items()])] if key else knees
            summary = pd.DataFrame({"system": curve_knees["system"], "test": _t("qd.peak_test", lang, curve=name),
                                    "direction": "", "metric": "iops", "unit": "IOPS",
                                    "value": curve_knees["peak_iops"], "n": 1})
            section.sentences += _winner_lines(summary, lang)
    return section


def _merge_legends(ax, twin, *, below: bool = False) -> None:
    """One legend for an Axes and its twin: right of the plot, or ``below`` it (figures with several panels)."""
    handles, texts = [], []
    for axes in (ax, twin):
        if axes is None:
            continue
        legend = axes.get_legend()
        if legend is not None:
            legend.remove()
        for handle, text in zip(*axes.get_legend_handles_labels()):
            if not text.startswith("_") and text not in texts:
                handles.append(handle)
                texts.append(text)
    if handles and below:
        ax.legend(handles, texts, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize="small",
                  frameon=False)
    elif handles:
        ax.legend(handles, texts, loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize="small", frameon=False)


# =========================================================================== concurrency


def _scaling_metric(data: pd.DataFrame) -> str:
    """IOPS for small blocks, MB/s for large ones (transactions per second for pgbench)."""
    if "tps" in data.columns and _col(data, "tps").notna().any():
        return "tps"
    bs = _col(data, "bs").dropna()
    return "iops" if len(bs) and bs.max() < 64 * 1024 else "bw_mbps"


def concurrency_points(data: pd.DataFrame, *, metric: str | None = None) -> pd.DataFrame:
    """Throughput, p99 and fairness against the number of jobs, per system and curve.

    One row per system x curve (sweep, direction, block size, queue depth) x
    numjobs with :func:`iolab.analysis.curves.scaling`'s ``total`` (the ``metric``,
    mean over repetitions), ``p99`` (µs), ``speedup`` and ``efficiency``, and
    ``jain`` (mean of the ``jain_index`` column the engine writes for
    numjobs > 1; NaN without it). ``metric`` defaults to IOPS for blocks under
    64 KiB, MB/s above, tps for pgbench.
    """
    data = _usable(_system(data))
    if "sweep" in data.columns and data["sweep"].notna().any():
        data = data[data["sweep"].notna()]
    metric = metric or _scaling_metric(data)
    keys = [c for c in ("sweep", "test", "direction", "bs", "iodepth") if c in data.columns]
    if "sweep" in keys:
        keys.remove("test")
    by = ["system"] + keys
    table = curves.scaling(data, "numjobs", y=metric, by=by)
    if "jain_index" in data.columns:
        jain = data.assign(_j=_num(data["jain_index"])).groupby(by + ["numjobs"], dropna=False)["_j"].mean()
        table["jain"] = [jain.get(tuple(r[c] for c in by + ["numjobs"]), math.nan)
                         for _, r in table.iterrows()]
    table["metric"] = metric
    return table


def concurrency_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Throughput and p99 latency against the number of jobs (:func:`iolab.report.curveplots.scaling_plot`).

    For tests swept over ``numjobs`` (named ``<base>-Q<d>T<j>`` with a ``sweep``
    column): a table (rows = queue depth x jobs, columns = total, p99 and
    Jain's fairness index per system), a chart per charted queue depth (the
    lowest and the highest), and per system how the total grew with the jobs
    and how evenly they shared the device.
    """
    from iolab.report import curveplots
    i18n.check_lang(lang)
    data = _usable(_system(data))
    if data.empty:
        return None
    points = concurrency_points(data)
    metric = str(points["metric"].iloc[0]) if len(points) else "iops"
    metric_name = _t(f"scaling.metric_{metric}", lang)
    section = Section("concurrency", _t("scaling.heading", lang), lang, intro=_t("scaling.intro", lang))
    plt = _pyplot()
    keys = [c for c in ("sweep", "direction", "bs") if c in points.columns]
    for key, sub in points.groupby(keys, sort=False, dropna=False) if keys else [((), points)]:
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        name = _curve_name(key, lang)
        systems = _order(sub["system"])
        depths = sorted(_num(sub["iodepth"]).dropna().unique()) if "iodepth" in sub.columns else [math.nan]
        levels = sub[["iodepth", "numjobs"]].drop_duplicates().sort_values(["iodepth", "numjobs"]) \
            if "iodepth" in sub.columns else sub[["numjobs"]].drop_duplicates().sort_values("numjobs")
        index = pd.MultiIndex.from_tuples([(f"QD{int(r['iodepth'])}", int(r["numjobs"])) for _, r in levels.iterrows()],
                                          names=[_t("scaling.depth", lang), _t("scaling.jobs", lang)]) \
            if "iodepth" in levels.columns else pd.Index(levels["numjobs"].astype(int), name=_t("scaling.jobs", lang))
        has_jain = "jain" in sub.columns and sub["jain"].notna().any()
        blocks = {"total": metric_name, "p99": _t("scaling.col_p99", lang)}
        if has_jain:
            blocks["jain"] = _t("scaling.col_jain", lang)
        shown, numbers = {}, {}
        for column, head in blocks.items():
            for system in systems:
                values = []
                for _, level in levels.iterrows():
                    match = sub[(sub["system"] == system) & (sub["numjobs"] == level["numjobs"])]
                    if "iodepth" in levels.columns:
                        match = match[match["iodepth"] == level["iodepth"]]
                    value = float(match[column].iloc[0]) if len(match) else math.nan
                    values.append(value / 1000.0 if column == "p99" else value)
                numbers[(head, system)] = values
                shown[(head, system)] = [_fmt(v, 3) if column == "jain" else _fmt(v) for v in values]
        section.tables.append(Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                                    caption=_t("scaling.caption", lang, curve=name, metric=metric_name)))
        charted = [depths[0], depths[-1]] if len(depths) > 1 else depths
        fig, axes = plt.subplots(1, len(charted), figsize=(6.2 * len(charted), 4.2), squeeze=False)
        raw = data
        for k, v in key.items():
            raw = raw[raw[k] == v]
        labels = _labels("scaling", lang)
        labels["x"] = _t("scaling.x_jobs", lang)
        labels["y"] = metric_name
        for ax, depth in zip(axes[0], charted):
            part = raw if not np.isfinite(depth) else raw[_num(raw["iodepth"]) == depth]
            curveplots.scaling_plot(part, x="numjobs", y=metric, hue="system", ax=ax, labels=labels)
            ax.set_title(f"{name}, QD{int(depth)}" if np.isfinite(depth) else name)
            _merge_legends(ax, curveplots.twin_of(ax), below=True)
        fig.tight_layout()
        section.figures.append(Figure(fig, alt=_t("scaling.alt", lang, curve=name, metric=metric_name)))
        for depth in charted:
            for system in systems:
                curve = sub[sub["system"] == system]
                if np.isfinite(depth):
                    curve = curve[curve["iodepth"] == depth]
                curve = curve.sort_values("numjobs")
                if len(curve) < 2:
                    continue
                first, last = curve.iloc[0], curve.iloc[-1]
                parts = [_t("scaling.grows", lang, system=system, depth=f"QD{int(depth)}" if np.isfinite(depth) else "",
                            j0=int(first["numjobs"]), j1=int(last["numjobs"]), metric=metric_name,
                            a=_about(first["total"]), b=_about(last["total"]), speedup=i18n.factor(last["speedup"]),
                            eff=f"{last['efficiency'] * 100:.0f}", p0=_ms(first["p99"]), p1=_ms(last["p99"]))]
                if has_jain and np.isfinite(last.get("jain", math.nan)):
                    key_ = "scaling.jain_even" if last["jain"] >= 0.95 else "scaling.jain_uneven"
                    parts.append(i18n.text(f"sections.{key_}", lang, jobs=int(last["numjobs"]),
                                           jain=f"{last['jain']:.3f}"))
                section.sentences.append(_bullets_join(parts, lang))
    return section


# =========================================================================== gnome-disks


def gnome_summary(data: pd.DataFrame) -> pd.DataFrame:
    """GNOME Disks' summary per system: the rate curve (read and write) and the access time.

    One row per system with ``read_n, read_avg, read_min, read_max,
    read_first, read_last`` (first/last tenth of the positions), ``read_decline``
    (first / last), ``read_flat``, ``read_max_dev`` (largest deviation of a
    tenth from the average, a fraction), ``read_overall`` (all bytes / all
    seconds), the same with ``write_`` when the rewrite ran, ``sample_bytes``,
    and ``access_n, access_ms`` (mean, GNOME Disks' "Average Access Time",
    first sample dropped), ``access_median_ms, access_p95_ms, access_corr``
    (Spearman correlation of seek distance and time). MB/s and ms.
    """
    data = _system(data)
    out = {s: {"system": s} for s in _systems(data)}
    rates = data[data["test"].isin(["read-rate", "write-rate"])] if "test" in data.columns else data.iloc[0:0]
    if len(rates) and "position" in rates.columns:
        profile = curves.position_profile(rates, by=["system", "test"])
        usable = _usable(rates)
        totals = usable.groupby(["system", "test"])[["io_bytes", "runtime_s"]].sum()
        for _, row in profile.iterrows():
            prefix = "read" if row["test"] == "read-rate" else "write"
            record = out[row["system"]]
            record.update({f"{prefix}_n": int(row["n"]), f"{prefix}_avg": row["avg"], f"{prefix}_min": row["min"],
                           f"{prefix}_max": row["max"], f"{prefix}_first": row["first_decile"],
                           f"{prefix}_last": row["last_decile"], f"{prefix}_decline": row["decline"],
                           f"{prefix}_flat": bool(row["is_flat"]), f"{prefix}_max_dev": row["max_dev"]})
            key = (row["system"], row["test"])
            if key in totals.index and totals.loc[key, "runtime_s"] > 0:
                record[f"{prefix}_overall"] = totals.loc[key, "io_bytes"] / totals.loc[key, "runtime_s"] / 1e6
            sizes = _col(usable[(usable["system"] == row["system"]) & (usable["test"] == row["test"])], "bs").dropna()
            if len(sizes):
                record["sample_bytes"] = float(sizes.iloc[0])
    access = data[data["test"] == "access-time"] if "test" in data.columns else data.iloc[0:0]
    if len(access) and "access_ms" in access.columns:
        times = curves.access_time_summary(access, by=["system"])
        for _, row in times.iterrows():
            out[row["system"]].update(access_n=int(row["n"]), access_ms=row["mean_ms"],
                                      access_median_ms=row["median_ms"], access_p95_ms=row["p95_ms"],
                                      access_corr=row["corr_rank"])
    return pd.DataFrame(list(out.values()))


_GNOME_ROWS = (  # (summary column, locale key, digits or None)
    ("sample_bytes", "gnome.row_sample", "size"),
    ("read_avg", "gnome.row_read_avg", None), ("read_min", "gnome.row_read_min", None),
    ("read_max", "gnome.row_read_max", None), ("read_first", "gnome.row_read_first", None),
    ("read_last", "gnome.row_read_last", None),
    ("write_avg", "gnome.row_write_avg", None), ("write_min", "gnome.row_write_min", None),
    ("write_max", "gnome.row_write_max", None),
    ("access_ms", "gnome.row_access", None), ("access_median_ms", "gnome.row_access_median", None),
    ("read_n", "gnome.row_read_n", 0), ("write_n", "gnome.row_write_n", 0), ("access_n", "gnome.row_access_n", 0),
)


def gnome_disks_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """MB/s along the device with the access-time scatter (:func:`iolab.report.curveplots.position_plot`), the summary.

    Table: GNOME Disks' summary rows (average / minimum / maximum read rate,
    the outer and inner tenth, average access time, sample counts), columns =
    systems. Findings per system: "falls from X to Y MB/s from the outer to the
    inner edge (x-fold)" or "flat within ±n%", the access time and whether it
    grows with the seek distance; and the fastest average read rate.
    """
    from iolab.report import curveplots
    from iolab.core.units import human_size
    i18n.check_lang(lang)
    data = _system(data)
    if data.empty:
        return None
    summary = gnome_summary(data)
    systems = list(summary["system"])
    section = Section("gnome-disks", _t("gnome.heading", lang), lang, intro=_t("gnome.intro", lang))
    shown, numbers, labels = [], [], []
    for column, key, digits in _GNOME_ROWS:
        if column not in summary.columns or summary[column].isna().all():
            continue
        values = summary[column].to_numpy(dtype=float)
        numbers.append(values)
        labels.append(_t(key, lang))
        if digits == "size":
            shown.append([human_size(v) if np.isfinite(v) else DASH for v in values])
        else:
            shown.append([_fmt(v, digits) for v in values])
    index = pd.Index(labels, name=_t("gnome.index", lang))
    section.tables.append(Table(pd.DataFrame(shown, index=index, columns=systems),
                                data=pd.DataFrame(numbers, index=index, columns=systems),
                                caption=_t("gnome.caption", lang)))
    plt = _pyplot()
    ncols = min(len(systems), 2)
    nrows = math.ceil(len(systems) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.2 * nrows), squeeze=False)
    for ax, system in zip(axes.flat, systems):
        rows = data[data["system"] == system]
        rates = _usable(rows[rows["test"].isin(["read-rate", "write-rate"])])
        access = _usable(rows[rows["test"] == "access-time"])
        if rates.empty:
            ax.set_visible(False)
            continue
        hue = "direction" if rates["test"].nunique() > 1 else None
        if hue:
            rates = rates.assign(direction=[i18n.label(d, lang, section="directions") for d in rates["direction"]])
        curveplots.position_plot(rates, hue=hue, access=access if len(access) else None, ax=ax,
                                 labels=_labels("position", lang))
        ax.set_title(system)
    for ax in list(axes.flat)[len(systems):]:
        ax.set_visible(False)
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("gnome.alt", lang, systems=_join(systems, lang))))
    for _, row in summary.iterrows():
        parts = []
        if np.isfinite(row.get("read_avg", math.nan)):
            if row.get("read_flat"):
                parts.append(_t("gnome.flat", lang, system=row["system"], pct=i18n.percent(row["read_max_dev"]),
                                avg=_about(row["read_avg"])))
            elif row["read_decline"] >= 1:
                parts.append(_t("gnome.falls", lang, system=row["system"], first=_about(row["read_first"]),
                                last=_about(row["read_last"]), fold=i18n.factor(row["read_decline"]),
                                avg=_about(row["read_avg"])))
            else:
                parts.append(_t("gnome.rises", lang, system=row["system"], first=_about(row["read_first"]),
                                last=_about(row["read_last"]), fold=i18n.factor(1 / row["read_decline"]),
                                avg=_about(row["read_avg"])))
        if np.isfinite(row.get("access_ms", math.nan)):
            corr = row.get("access_corr", math.nan)
            key = "gnome.access_seek" if np.isfinite(corr) and corr >= 0.3 else "gnome.access_flat"
            parts.append(_t(key, lang, system=row["system"], ms=_fmt(row["access_ms"]),
                            median=_fmt(row["access_median_ms"]), r=f"{corr:.2f}" if np.isfinite(corr) else DASH))
        if parts:
            section.sentences.append(_bullets_join(parts, lang))
    if len(systems) >= 2 and "read_avg" in summary.columns:
        section.sentences += _winner_lines(pd.DataFrame({
            "system": summary["system"], "test": _t("gnome.test_avg", lang), "direction": "", "metric": "rate",
            "unit": "MB/s", "value": summary["read_avg"], "n": 1}), lang)
    return section


# =========================================================================== bonnie


def _bonnie_tool(tool: str) -> str:
    return "bonnie++" if str(tool) == "bonnie++" else "iolab"


def bonnie_results(data: pd.DataFrame) -> pd.DataFrame:
    """Bonnie++'s figures per system, tool (``iolab`` = the fio/Python equivalent, ``bonnie++``) and test.

    Columns: ``system, tool, test, n``, ``rate`` (K/sec = KiB/s, or seeks/s
    for ``seeks``: the mean of the repetitions bonnie++ could time), ``cpu``
    (%CP), ``plus`` (True when every repetition took under 0.5 s: bonnie++
    prints "+++++"), ``mbps`` (decimal MB/s measured, also where bonnie++
    could not time it), ``lat_us`` (bonnie++'s latency: the worst single
    operation, the maximum over repetitions), ``file_size`` (bytes),
    ``version``.
    """
    data = _usable(_system(data))
    data = data[data["test"].isin(BONNIE_TESTS)]
    rows = []
    tools = data["tool"].map(_bonnie_tool) if "tool" in data.columns else pd.Series("iolab", index=data.index)
    for (system, tool, test), sub in data.groupby([data["system"], tools, data["test"]], sort=False):
        runtime = _col(sub, "runtime_s")
        if "plus" in sub.columns:
            plus = sub["plus"].astype(str).str.startswith("+") & sub["plus"].notna()
        else:
            plus = runtime < BONNIE_MIN_TIME
        if test == "seeks":
            rate = _col(sub, "iops")
        else:
            rate = _col(sub, "kps")
            derived = _col(sub, "io_bytes") / 1024 / runtime
            rate = rate.where(rate.notna() | plus, derived)
        cpu = _col(sub, "cpu_pct")
        cpu = cpu.where(cpu.notna(), _col(sub, "cpu_usr_pct") + _col(sub, "cpu_sys_pct"))
        timed = ~plus
        sizes = _col(sub, "file_size").dropna()
        version = (sub["bonnie_version"].dropna().astype(str) if "bonnie_version" in sub.columns
                   else pd.Series([], dtype=str))
        rows.append({"system": system, "tool": tool, "test": test, "n": len(sub),
                     "rate": float(rate[timed].mean()) if timed.any() else math.nan,
                     "cpu": float(cpu[timed].mean()) if timed.any() else math.nan,
                     "plus": bool(plus.all()),
                     "mbps": float(_col(sub, "bw_mbps").mean()),
                     "lat_us": float(_col(sub, "lat_max_us").max()),
                     "file_size": float(sizes.iloc[0]) if len(sizes) else math.nan,
                     "version": version.iloc[0] if len(version) else None})
    frame = pd.DataFrame(rows, columns=["system", "tool", "test", "n", "rate", "cpu", "plus", "mbps", "lat_us",
                                        "file_size", "version"])
    order = {t: i for i, t in enumerate(BONNIE_TESTS)}
    systems = {s: i for i, s in enumerate(_order(data["system"]))}
    return frame.sort_values(["system", "tool", "test"], key=lambda s: s.map(systems) if s.name == "system" else
                             s.map({"iolab": 0, "bonnie++": 1}) if s.name == "tool" else s.map(order),
                             kind="stable").reset_index(drop=True)


def bonnie_latency(us: float) -> str:
    """A latency as bonnie++ prints it: ``28622us``, ``101ms``, ``12s``."""
    if us is None or not np.isfinite(us):
        return ""
    if us < 100000:
        return f"{int(round(us))}us"
    if us < 1e8:
        return f"{int(us // 1000)}ms"
    return f"{int(us // 1e6)}s"


def _bonnie_size(size: float) -> str:
    if not np.isfinite(size):
        return DASH
    size = int(size)
    return f"{size // GiB}G" if size % GiB == 0 else f"{size // MiB}M"


def bonnie_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Bonnie++'s own tables: K/sec and %CP per test, "+++++", the latency line; the original beside.

    Rows = system x tool (iolab's fio/Python equivalent, and bonnie++ itself
    where ``tool`` = bonnie++ rows exist), columns as bonnie++ prints them:
    Sequential Output (Per Chr, Block, Rewrite), Sequential Input (Per Chr,
    Block), Random Seeks, each K/sec (seeks: /sec) and %CP. A bar chart of the
    K/sec figures; findings: the winner per test, tests bonnie++ could not
    time, CPU-bound per-char tests, and the equivalent against the original.
    """
    from iolab.report import plot
    i18n.check_lang(lang)
    results = bonnie_results(data)
    if results.empty:
        return None
    section = Section("bonnie", _t("bonnie.heading", lang), lang, intro=_t("bonnie.intro", lang))
    present = [t for t in BONNIE_TESTS if t in set(results["test"])]
    keys = list(dict.fromkeys(zip(results["system"], results["tool"])))

    def tool_name(tool, version):
        return _t("bonnie.tool_iolab", lang) if tool == "iolab" else f"bonnie++ {version}" if version else "bonnie++"

    versions = results.dropna(subset=["version"]).groupby(["system", "tool"])["version"].first()
    index = pd.MultiIndex.from_tuples([(s, tool_name(t, versions.get((s, t)))) for s, t in keys],
                                      names=[_t("bonnie.name", lang), _t("bonnie.tool", lang)])
    size_col = ("", "", _t("bonnie.size", lang))
    columns, lat_columns = [size_col], []
    for test in present:
        group, col = BONNIE_LAYOUT[test]
        unit = "/sec" if test == "seeks" else "K/sec"
        columns += [(_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang), unit),
                    (_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang), "%CP")]
        lat_columns.append((_t(f"bonnie.{group}", lang), _t(f"bonnie.{col}", lang)))
    shown, numbers, lat_shown, lat_numbers = [], [], [], []
    for system, tool in keys:
        part = results[(results["system"] == system) & (results["tool"] == tool)].set_index("test")
        sizes = part["file_size"].dropna()
        size = float(sizes.iloc[0]) if len(sizes) else math.nan
        row_s, row_n = [_bonnie_size(size)], [size]
        lat_s, lat_n = [], []
        for test in present:
            if test not in part.index:
                row_s += [DASH, DASH]
                row_n += [math.nan, math.nan]
                lat_s.append(DASH)
                lat_n.append(math.nan)
                continue
            r = part.loc[test]
            if r["plus"]:
                row_s += [PLUS, "+++"]
                row_n += [math.nan, math.nan]
            else:
                rate = f"{r['rate']:.1f}" if test == "seeks" else f"{int(r['rate'])}"
                row_s += [rate, f"{int(round(r['cpu']))}" if np.isfinite(r["cpu"]) else DASH]
                row_n += [r["rate"], r["cpu"]]
            lat_s.append(bonnie_latency(r["lat_us"]) or DASH)
            lat_n.append(r["lat_us"])
        shown.append(row_s)
        numbers.append(row_n)
        lat_shown.append(lat_s)
        lat_numbers.append(lat_n)
    mcols = pd.MultiIndex.from_tuples(columns)
    section.tables.append(Table(pd.DataFrame(shown, index=index, columns=mcols),
                                data=pd.DataFrame(numbers, index=index, columns=mcols),
                                caption=_t("bonnie.caption", lang), notes=[_t("bonnie.note", lang)]))
    lcols = pd.MultiIndex.from_tuples(lat_columns)
    section.tables.append(Table(pd.DataFrame(lat_shown, index=index, columns=lcols),
                                data=pd.DataFrame(lat_numbers, index=index, columns=lcols),
                                caption=_t("bonnie.latency_caption", lang)))
    # chart: K/sec per test (seeks are per second, another unit: left out)
    plt = _pyplot()
    bars = results[(results["test"] != "seeks")].copy()
    bars["x"] = [_t(f"bonnie.short_{t}", lang) for t in bars["test"]]
    bars["hue"] = [s if t == "iolab" else f"{s} · bonnie++" for s, t in zip(bars["system"], bars["tool"])]
    bars["value"] = bars["rate"]
    if bars["value"].notna().any():
        fig, ax = plt.subplots(figsize=(10.0, 4.2))
        originals = [h for h in bars["hue"] if h.endswith(" · bonnie++")]
        plot.bars(bars, x="x", y="value", hue="hue", ax=ax, xlabel="", ylabel=_t("bonnie.chart_y", lang),
                  legend_title=i18n.text("labels.system", lang), hatched=originals)
        # a test bonnie++ could not time has no bar: say why where the bar would be
        where = plot.bar_positions(bars, x="x", y="value", hue="hue")
        low = ax.get_ylim()[0]
        for (_, spot), plus in zip(where.iterrows(), bars["plus"]):
            if plus:
                ax.text(spot["pos"], low, PLUS, rotation=90, ha="center", va="bottom", fontsize="small", gid="plus")
        section.figures.append(Figure(fig, alt=_t("bonnie.alt", lang)))
    # findings
    equivalent = results[results["tool"] == "iolab"]
    # a test some system finished too fast to time has no fair winner: it gets its own sentence
    untimed = set(equivalent[equivalent["plus"]]["test"])
    summary = equivalent[~equivalent["test"].isin(untimed)]
    summary = pd.DataFrame({"system": summary["system"],
                            "test": [_t(f"bonnie.short_{t}", lang) for t in summary["test"]],
                            "direction": "", "metric": "rate",
                            "unit": ["seeks/s" if t == "seeks" else "K/sec" for t in summary["test"]],
                            "value": summary["rate"], "n": summary["n"]})
    section.sentences += _winner_lines(summary, lang)
    plus = results[results["plus"]]
    for (system, test), rows in plus.groupby(["system", "test"], sort=False):
        tools = _join([tool_name(t, v) for t, v in zip(rows["tool"], rows["version"])], lang)
        measured = rows[rows["tool"] == "iolab"]["mbps"].dropna()
        name = _t(f"bonnie.short_{test}", lang)
        if len(measured):
            section.sentences.append(_t("bonnie.plus", lang, system=system, tool=tools, test=name,
                                        mbps=_about(float(measured.iloc[0]))))
        else:
            section.sentences.append(_t("bonnie.plus_only", lang, system=system, tool=tools, test=name))
        others = equivalent[(equivalent["test"] == test) & ~equivalent["plus"]]
        for _, other in others.iterrows():
            section.sentences[-1] += _t("bonnie.plus_other", lang, system=other["system"], rate=_fmt(other["rate"]),
                                        unit=i18n.unit("seeks/s" if test == "seeks" else "K/sec", lang))
    per_char = equivalent[equivalent["test"].isin(["putc", "getc"]) & (equivalent["cpu"] >= 90)]
    if len(per_char):
        section.sentences.append(_t("bonnie.cpu_bound", lang, systems=_join(_order(per_char["system"]), lang),
                                    cpu=f"{per_char['cpu'].min():.0f}"))
    for system in _order(results["system"]):
        mine = results[(results["system"] == system)]
        eq = mine[mine["tool"] == "iolab"].set_index("test")
        orig = mine[mine["tool"] == "bonnie++"].set_index("test")
        if orig.empty or eq.empty:
            continue
        items = []
        for test in present:
            if test in eq.index and test in orig.index:
                a, b = eq.loc[test], orig.loc[test]
                name = _t(f"bonnie.short_{test}", lang)
                if a["plus"] and b["plus"]:
                    items.append(_t("bonnie.both_plus", lang, test=name))
                elif np.isfinite(a["rate"]) and np.isfinite(b["rate"]) and b["rate"] > 0:
                    items.append(f"{name} {_pct(a['rate'] / b['rate'] - 1)}")
        if items:
            section.sentences.append(_t("bonnie.versus", lang, system=system,
                                        items=", ".join(items) if lang == "en" else "、".join(items)))
    return section


# =========================================================================== tiobench


def tiobench_results(data: pd.DataFrame) -> pd.DataFrame:
    """tiobench.pl's figures per system and test.

    Columns: ``system, test, n, threads``, ``rate`` (MB/s, decimal; mean of the
    repetitions), ``cpu`` (usr + sys %), ``lat_avg_ms`` (mean), ``lat_max_ms``
    (maximum over the repetitions), ``over_2s`` and ``over_10s`` (% of
    operations slower than 2 s and 10 s, means), ``cpu_eff`` (rate / CPU
    share, tiobench's "CPU Eff").
    """
    data = _usable(_system(data))
    rows = []
    for (system, test), sub in data.groupby(["system", "test"], sort=False):
        rate = float(_col(sub, "bw_mbps").mean())
        cpu = float((_col(sub, "cpu_usr_pct") + _col(sub, "cpu_sys_pct")).mean())
        rows.append({"system": system, "test": test, "n": len(sub),
                     "threads": int(_col(sub, "numjobs").max()) if _col(sub, "numjobs").notna().any() else math.nan,
                     "rate": rate, "cpu": cpu, "lat_avg_ms": float(_col(sub, "lat_mean_us").mean()) / 1000,
                     "lat_max_ms": float(_col(sub, "lat_max_us").max()) / 1000,
                     "over_2s": float(_col(sub, "over_2s_pct").mean()),
                     "over_10s": float(_col(sub, "over_10s_pct").mean()),
                     "cpu_eff": rate / (cpu / 100) if cpu and np.isfinite(cpu) and cpu > 0 else math.nan})
    frame = pd.DataFrame(rows, columns=["system", "test", "n", "threads", "rate", "cpu", "lat_avg_ms", "lat_max_ms",
                                        "over_2s", "over_10s", "cpu_eff"])
    known = {t: i for i, t in enumerate(TIOBENCH_TESTS)}
    tests = {t: known.get(t, len(known) + i) for i, t in enumerate(_order(frame["test"]))}
    return frame.sort_values("test", key=lambda s: s.map(tests), kind="stable").reset_index(drop=True)


def _tio_pct(value: float) -> str:
    return f"{value:.5f}" if np.isfinite(value) else DASH


def tiobench_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """tiobench.pl's tables: Sequential Writes, Random Writes, Sequential Reads, Random Reads.

    One table per test, rows = systems, columns as tiobench.pl prints them:
    threads, Rate (MB/s), CPU %, average and maximum latency (ms), % of
    operations over 2 s and over 10 s, CPU efficiency. A bar chart of the rates;
    findings: the winner per test and the slow operations.
    """
    from iolab.report import plot
    i18n.check_lang(lang)
    results = tiobench_results(data)
    if results.empty:
        return None
    section = Section("tiobench", _t("tio.heading", lang), lang, intro=_t("tio.intro", lang))
    heads = [("threads", "tio.col_threads", 0), ("rate", "tio.col_rate", None), ("cpu", "tio.col_cpu", 1),
             ("lat_avg_ms", "tio.col_avg", None), ("lat_max_ms", "tio.col_max", None),
             ("over_2s", "tio.col_2s", "pct"), ("over_10s", "tio.col_10s", "pct"), ("cpu_eff", "tio.col_eff", 0)]

    def test_name(test):
        key = f"sections.tio.test_{test}"
        return i18n.text(key, lang) if i18n.has(key, lang) else test

    for test in _order(results["test"]):
        part = results[results["test"] == test].set_index("system")
        shown, numbers = {}, {}
        for column, key, digits in heads:
            values = part[column].astype(float)
            numbers[_t(key, lang)] = values.to_numpy()
            shown[_t(key, lang)] = [_tio_pct(v) if digits == "pct" else _fmt(v, digits) for v in values]
        index = pd.Index(part.index, name=i18n.text("labels.system", lang))
        section.tables.append(Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                                    caption=test_name(test)))
    plt = _pyplot()
    bars = results.assign(x=[test_name(t) for t in results["test"]])
    fig, ax = plt.subplots(figsize=(9.0, 4.0))
    plot.bars(bars, x="x", y="rate", hue="system", ax=ax, xlabel="", ylabel=_t("tio.col_rate", lang),
              legend_title=i18n.text("labels.system", lang))
    section.figures.append(Figure(fig, alt=_t("tio.alt", lang)))
    summary = pd.DataFrame({"system": results["system"], "test": [test_name(t) for t in results["test"]],
                            "direction": "", "metric": "rate", "unit": "MB/s", "value": results["rate"],
                            "n": results["n"]})
    section.sentences += _winner_lines(summary, lang)
    slow = results[results["over_2s"].fillna(0) > 0]
    for _, row in slow.iterrows():
        key = "tio.slow_10s" if row["over_10s"] > 0 else "tio.slow_2s"
        section.sentences.append(_t(key, lang, system=row["system"], test=test_name(row["test"]),
                                    pct2=_small_pct(row["over_2s"]), pct10=_small_pct(row["over_10s"]),
                                    worst=i18n.number(row["lat_max_ms"] / 1000, digits=1)))
    if slow.empty and results["over_2s"].notna().any():
        worst = results.loc[results["lat_max_ms"].idxmax()]
        section.sentences.append(_t("tio.none_slow", lang, ms=_fmt(worst["lat_max_ms"]), system=worst["system"],
                                    test=test_name(worst["test"])))
    return section


# =========================================================================== hdparm


def hdparm_results(data: pd.DataFrame) -> pd.DataFrame:
    """hdparm's two timings per system (target), tool and test, over the alternating passes.

    Columns: ``system, test, tool`` (``iolab`` for iolab's Python/fio
    equivalent, ``hdparm`` for hdparm itself), ``direct``, ``n``, ``mbps`` and
    ``mbps_sd`` (decimal MB/s: mean and standard deviation), ``mibps`` and
    ``mibps_sd`` (hdparm's "MB/sec", which is MiB/s), ``cov``.
    """
    data = _usable(_system(data))
    data = data[data["test"].isin(HDPARM_TESTS)]
    tools = data["tool"].map(lambda t: "hdparm" if str(t) == "hdparm" else "iolab") if "tool" in data.columns \
        else pd.Series("iolab", index=data.index)
    rows = []
    for (system, test, tool), sub in data.groupby([data["system"], data["test"], tools], sort=False):
        mbps = _col(sub, "bw_mbps")
        mibps = _col(sub, "hdparm_mb_sec")
        mibps = mibps.where(mibps.notna(), mbps * 1e6 / MiB)
        direct = _col(sub, "direct")
        rows.append({"system": system, "test": test, "tool": tool,
                     "direct": bool(direct.fillna(0).max() > 0), "n": int(mbps.notna().sum()),
                     "mbps": float(mbps.mean()), "mbps_sd": float(mbps.std()) if mbps.notna().sum() > 1 else math.nan,
                     "mibps": float(mibps.mean()),
                     "mibps_sd": float(mibps.std()) if mibps.notna().sum() > 1 else math.nan})
    frame = pd.DataFrame(rows, columns=["system", "test", "tool", "direct", "n", "mbps", "mbps_sd", "mibps",
                                        "mibps_sd"])
    frame["cov"] = frame["mbps_sd"] / frame["mbps"]
    order = {t: i for i, t in enumerate(HDPARM_TESTS)}
    systems = {s: i for i, s in enumerate(_order(data["system"]))}
    return frame.sort_values(["test", "tool", "system"], key=lambda s: s.map(order) if s.name == "test" else
                             s.map({"iolab": 0, "hdparm": 1}) if s.name == "tool" else s.map(systems),
                             kind="stable").reset_index(drop=True)


def hdparm_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Cached (-T) and buffered disk (-t) reads per target: mean ± SD over the alternating passes.

    Table: rows = timing x tool (iolab's equivalent, hdparm itself when its
    rows exist), columns = per system the decimal MB/s (mean ± SD) beside
    hdparm's "MB/sec" (MiB/s). Bar charts with SD error bars; findings: each
    target's disk reads, the fastest, the cached reads as memory speed, and
    hdparm against the equivalent.
    """
    from iolab.report import plot
    i18n.check_lang(lang)
    results = hdparm_results(data)
    if results.empty:
        return None
    section = Section("hdparm", _t("hdparm.heading", lang), lang, intro=_t("hdparm.intro", lang))
    systems = _order(results["system"])

    def timing(test, direct):
        return _t(f"hdparm.test_{test.replace('-', '_')}{'_direct' if direct else ''}", lang)

    def tool_name(tool):
        return _t("hdparm.tool_iolab", lang) if tool == "iolab" else "hdparm"

    keys = list(dict.fromkeys(zip(results["test"], results["tool"], results["direct"])))
    index = pd.MultiIndex.from_tuples([(timing(t, d), tool_name(tool)) for t, tool, d in keys],
                                      names=[_t("hdparm.timing", lang), _t("hdparm.tool", lang)])
    mb_head, mib_head = _t("hdparm.col_mbps", lang), _t("hdparm.col_mibps", lang)
    columns = pd.MultiIndex.from_tuples([(s, h) for s in systems for h in (mb_head, mib_head)])
    shown, numbers = [], []
    for test, tool, direct in keys:
        row_s, row_n = [], []
        for system in systems:
            match = results[(results["system"] == system) & (results["test"] == test) & (results["tool"] == tool)]
            if match.empty:
                row_s += [DASH, DASH]
                row_n += [math.nan, math.nan]
                continue
            r = match.iloc[0]
            sd = (f" ± {i18n.number(r['mbps_sd'], digits=tables._digits(r['mbps']))}"
                  if np.isfinite(r["mbps_sd"]) else "")
            row_s += [_fmt(r["mbps"]) + sd, _fmt(r["mibps"], 2)]
            row_n += [r["mbps"], r["mibps"]]
        shown.append(row_s)
        numbers.append(row_n)
    n = int(results["n"].max())
    section.tables.append(Table(pd.DataFrame(shown, index=index, columns=columns),
                                data=pd.DataFrame(numbers, index=index, columns=columns),
                                caption=_t("hdparm.caption", lang, n=n), notes=[_t("hdparm.note", lang)]))
    plt = _pyplot()
    tests = _order(results["test"])
    fig, axes = plt.subplots(1, len(tests), figsize=(5.2 * len(tests), 3.8), squeeze=False)
    for ax, test in zip(axes[0], tests):
        part = results[results["test"] == test].assign(
            hue=lambda f: [tool_name(t) for t in f["tool"]],
            low=lambda f: f["mbps"] - f["mbps_sd"].fillna(0), high=lambda f: f["mbps"] + f["mbps_sd"].fillna(0))
        plot.bars(part, x="system", y="mbps", hue="hue", low="low", high="high", ax=ax, log=False, xlabel="",
                  ylabel=mb_head, title=timing(test, bool(part["direct"].any())),
                  legend_title=_t("hdparm.tool", lang), hatched=["hdparm"])
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("hdparm.alt", lang)))
    ours = results[results["tool"] == "iolab"]
    for system in systems:
        mine = ours[ours["system"] == system].set_index("test")
        parts = []
        if "disk-reads" in mine.index:
            r = mine.loc["disk-reads"]
            parts.append(_t("hdparm.disk", lang, system=system, mbps=_about(r["mbps"]), mibps=_about(r["mibps"]),
                            sd=i18n.percent(r["cov"]) if np.isfinite(r["cov"]) else DASH, n=int(r["n"])))
        if "cached-reads" in mine.index:
            r = mine.loc["cached-reads"]
            parts.append(_t("hdparm.cached", lang, mbps=_about(r["mbps"]), mibps=_about(r["mibps"])))
        if parts:
            section.sentences.append(_bullets_join(parts, lang))
    disk = ours[ours["test"] == "disk-reads"]
    if len(disk) >= 2:
        section.sentences += _winner_lines(pd.DataFrame({
            "system": disk["system"], "test": timing("disk-reads", bool(disk["direct"].any())), "direction": "",
            "metric": "bw_mbps", "unit": "MB/s", "value": disk["mbps"], "n": disk["n"],
            "ci_low": disk["mbps"] - disk["mbps_sd"], "ci_high": disk["mbps"] + disk["mbps_sd"]}).assign(n=1), lang)
    if "cached-reads" in set(ours["test"]):
        section.notes.append(_t("hdparm.cached_note", lang))
    originals = results[results["tool"] == "hdparm"]
    for system in _order(originals["system"]):
        items = []
        for _, o in originals[originals["system"] == system].iterrows():
            e = ours[(ours["system"] == system) & (ours["test"] == o["test"])]
            if e.empty or not (o["mibps"] > 0):
                continue
            e = e.iloc[0]
            items.append(_t("hdparm.versus_item", lang, test=timing(o["test"], bool(o["direct"])),
                            orig=_about(o["mibps"]), ours=_about(e["mibps"]), diff=_pct(e["mibps"] / o["mibps"] - 1)))
        if items:
            section.sentences.append(_t("hdparm.versus", lang, system=system,
                                        items="; ".join(items) if lang == "en" else "、".join(items)))
    return section


# =========================================================================== pgbench


def pgbench_results(data: pd.DataFrame) -> pd.DataFrame:
    """pgbench per system, mode (test) and client count: ``n, tps`` (mean), ``lat_avg_ms``, ``p99_ms``,
    ``sync_commit``, ``fsync``, and ``host``/``label`` (to find the same system's fio runs)."""
    data = _usable(_system(data))
    rows = []
    clients = _col(data, "clients").where(_col(data, "clients").notna(), _col(data, "numjobs"))
    for (system, test, n), sub in data.groupby([data["system"], data["test"], clients], sort=False):
        lat = _col(sub, "lat_avg_ms")
        lat = lat.where(lat.notna(), _col(sub, "lat_mean_us") / 1000)
        rows.append({"system": system, "test": test, "clients": int(n), "n": len(sub),
                     "tps": float(_col(sub, "tps").mean()), "lat_avg_ms": float(lat.mean()),
                     "p99_ms": float(_col(sub, "lat_p99_us").mean()) / 1000,
                     "sync_commit": str(sub["sync_commit"].iloc[0]) if "sync_commit" in sub.columns else None,
                     "fsync": str(sub["fsync"].iloc[0]) if "fsync" in sub.columns else None,
                     "host": str(sub["host"].iloc[0]) if "host" in sub.columns else None,
                     "label": str(sub["label"].iloc[0]) if "label" in sub.columns else None})
    frame = pd.DataFrame(rows, columns=["system", "test", "clients", "n", "tps", "lat_avg_ms", "p99_ms",
                                        "sync_commit", "fsync", "host", "label"])
    tests = {t: i for i, t in enumerate(_order(frame["test"]))}
    systems = {s: i for i, s in enumerate(_order(frame["system"]))}
    return frame.sort_values(["test", "clients", "system"], key=lambda s: s.map(tests) if s.name == "test" else
                             s.map(systems) if s.name == "system" else s, kind="stable").reset_index(drop=True)


def _is_random_4k_qd1_write(data: pd.DataFrame) -> pd.Series:
    test = data["test"].astype(str) if "test" in data.columns else pd.Series("", index=data.index)
    sequential = test.str.match(r"(?i)^(seq|mix)")
    return ((data.get("direction", pd.Series("", index=data.index)).astype(str) == "write")
            & (_col(data, "bs") == 4096) & (_col(data, "iodepth") == 1) & (_col(data, "numjobs").fillna(1) == 1)
            & ~sequential)


def fio_write_latency(data: pd.DataFrame) -> pd.DataFrame:
    """Random 4 KiB QD1 write latency per system, from fio runs (CrystalDiskMark's RND4K-Q1T1, CDM 3's 4K...).

    Columns: ``host, label, system, recipe, test, n, lat_ms`` (mean of the
    repetitions' mean latency). Runs not isolated from the page cache
    (isolation ``none``) are left out.
    """
    columns = ["host", "label", "system", "recipe", "test", "n", "lat_ms"]
    if data is None or data.empty:
        return pd.DataFrame(columns=columns)
    data = _usable(_system(without_aggregates(data)))
    if "tool" in data.columns:
        data = data[data["tool"].isna() | (data["tool"].astype(str) == "fio")]
    if "isolation" in data.columns:
        data = data[data["isolation"].astype(str) != "none"]
    data = data[_is_random_4k_qd1_write(data)]
    rows = []
    for key, sub in data.groupby(["host", "label", "system", "recipe", "test"], sort=False):
        lat = _col(sub, "lat_mean_us").dropna()
        if len(lat):
            rows.append(dict(zip(["host", "label", "system", "recipe", "test"], key), n=len(lat),
                             lat_ms=float(lat.mean()) / 1000))
    return pd.DataFrame(rows, columns=columns)


def _clients(n: int, lang: str) -> str:
    return _t("pg.clients_1", lang) if n == 1 else _t("pg.clients_n", lang, n=n)


def _sync_on(results: pd.DataFrame) -> pd.Series:
    by_settings = (results["sync_commit"] == "on") & (results["fsync"] == "on")
    return by_settings | results["test"].astype(str).str.contains("sync_on")


def pgbench_section(data: pd.DataFrame, *, lang: str = "en", fio: pd.DataFrame | None = None) -> Section | None:
    """The database section: tps against clients per system and mode, a table, and the tie to fio.

    Table: rows = mode x clients, columns = tps and p99 latency per system.
    Chart: one :func:`iolab.report.curveplots.scaling_plot` per mode (tps, p99 dashed).
    Findings: the fastest system per mode at the most clients; what skipping
    the flush buys; and, where ``fio`` (every selected result) holds a random
    4 KiB QD1 write latency of the same system (same host and label), whether
    the commit rate at 1 client is what that latency allows.
    """
    from iolab.report import curveplots
    i18n.check_lang(lang)
    data = _usable(_system(data))
    results = pgbench_results(data)
    if results.empty:
        return None
    section = Section("pgbench", _t("pg.heading", lang), lang, intro=_t("pg.intro", lang))
    systems = _order(results["system"])
    levels = results[["test", "clients"]].drop_duplicates()
    index = pd.MultiIndex.from_frame(levels.rename(columns={"test": _t("pg.mode", lang),
                                                            "clients": _t("pg.clients", lang)}))
    shown, numbers = {}, {}
    for column, head in (("tps", _t("pg.col_tps", lang)), ("p99_ms", _t("pg.col_p99", lang))):
        for system in systems:
            mine = results[results["system"] == system].set_index(["test", "clients"])[column]
            values = [float(mine.get((t, c), math.nan)) for t, c in levels.itertuples(index=False)]
            numbers[(head, system)] = values
            shown[(head, system)] = [_fmt(v) for v in values]
    section.tables.append(Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                                caption=_t("pg.caption", lang), notes=[_t("pg.note", lang)]))
    plt = _pyplot()
    modes = _order(results["test"])
    fig, axes = plt.subplots(1, len(modes), figsize=(5.4 * len(modes), 4.0), squeeze=False)
    labels = _labels("scaling", lang)
    labels.update(x=_t("pg.clients", lang), y=_t("pg.col_tps", lang))
    # numjobs is the client count (curves.scaling names its own count of rows "clients")
    chart = data.assign(numjobs=_col(data, "clients").where(_col(data, "clients").notna(), _col(data, "numjobs")))
    for ax, mode in zip(axes[0], modes):
        curveplots.scaling_plot(chart[chart["test"] == mode], x="numjobs", y="tps", hue="system", ax=ax,
                                labels=labels)
        ax.set_title(mode)
        _merge_legends(ax, curveplots.twin_of(ax), below=True)
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("pg.alt", lang)))
    if len(systems) >= 2:
        top = results.groupby("test")["clients"].transform("max") == results["clients"]
        best = results[top]
        section.sentences += _winner_lines(pd.DataFrame({
            "system": best["system"],
            "test": [_t("pg.test_at", lang, mode=m, clients=c) for m, c in zip(best["test"], best["clients"])],
            "direction": "", "metric": "tps", "unit": "tps", "value": best["tps"], "n": 1}), lang)
    one = results[results["clients"] == results["clients"].min()]
    for system in systems:
        mine = one[one["system"] == system]
        on = mine[_sync_on(mine)]
        off = mine[(mine["sync_commit"] == "off") & (mine["fsync"] == "on")]
        if len(on) and len(off) and on["tps"].iloc[0] > 0:
            ratio = off["tps"].iloc[0] / on["tps"].iloc[0]
            key = "pg.flush_bound" if ratio >= 2 else "pg.flush_free"
            section.sentences.append(_t(key, lang, system=system, mode=off["test"].iloc[0], factor=i18n.factor(ratio),
                                        pct=f"{(ratio - 1) * 100:.0f}",
                                        clients=_clients(int(mine["clients"].iloc[0]), lang)))
    latency = fio_write_latency(fio if fio is not None else data.iloc[0:0])
    for system in systems:
        mine = one[(one["system"] == system) & _sync_on(one)]
        if mine.empty or mine["clients"].iloc[0] != 1:
            continue
        row = mine.iloc[0]
        match = latency[(latency["host"] == row["host"]) & (latency["label"] == row["label"])]
        if match.empty:
            continue
        lat = float(match["lat_ms"].mean())
        ceiling = 1000.0 / lat
        writes = ceiling / row["tps"]
        key = "pg.fio_consistent" if 0.8 <= writes <= 4 else "pg.fio_below" if writes > 4 else "pg.fio_above"
        section.sentences.append(_t(key, lang, system=system, tps=_about(row["tps"]), lat=_fmt(lat),
                                    ceiling=_about(ceiling), writes=i18n.factor(writes),
                                    source=f"{match['recipe'].iloc[0]}, {match['test'].iloc[0]}"))
    return section


# =========================================================================== fleet


def fleet_hosts(data: pd.DataFrame) -> pd.DataFrame:
    """A fleet's per-host rows (aggregates left out) with ``fleet_base`` (the id without ``-n<N>``)."""
    rows = data[data["fleet_id"].notna()] if "fleet_id" in data.columns else data.iloc[0:0]
    rows = without_aggregates(rows)
    return rows.assign(fleet_base=rows["fleet_id"].astype(str).str.replace(r"-n\d+$", "", regex=True))


def fleet_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Hosts side by side, aggregate throughput against the number of hosts, per-host tail latency.

    Uses :func:`iolab.fleet.runs.scaling_table` and :func:`iolab.fleet.runs.tail_latency`
    on the per-host rows (the aggregate rows, host ``all``, become the
    "all hosts" column, never one more system), and
    :func:`iolab.report.fleetplots.scaling_plot` / :func:`iolab.report.fleetplots.tail_latency_plot`.
    """
    from iolab.fleet import runs as fleet
    from iolab.report import fleetplots
    i18n.check_lang(lang)
    data = _system(data)
    hosts = _usable(fleet_hosts(data))
    if hosts.empty:
        return None
    aggregates = _usable(data[(data["fleet_id"].notna()) & _is_aggregate(data)])
    section = Section("fleet", _t("fleet.heading", lang), lang, intro=_t("fleet.intro", lang))
    plt = _pyplot()
    for base, rows in hosts.groupby("fleet_base", sort=False):
        largest = int(_num(rows["n_hosts"]).max())
        at_max = rows[_num(rows["n_hosts"]) == largest]
        fleet_ids = set(at_max["fleet_id"])
        agg = aggregates[aggregates["fleet_id"].isin(fleet_ids)] if len(aggregates) else aggregates
        hosts_label = _t("fleet.all_hosts", lang, n=largest)
        for metric in ("bw_mbps", "iops"):
            per_host = tables.summarize(at_max.assign(system=at_max["label"].astype(str)), value=metric)
            if len(agg):
                # (the aggregate has no target: pandas 3 keeps NaN through astype(str), which summarize joins)
                total = tables.summarize(agg.assign(system=hosts_label, target=ALL_HOSTS), value=metric)
            else:
                total = per_host.groupby(["test", "direction"], sort=False, as_index=False)["value"].sum().assign(
                    system=hosts_label, metric=metric, unit=tables.metric_unit(metric), n=1)
            summary = pd.concat([per_host, total], ignore_index=True)
            section.tables.append(tables.pivot(summary, lang=lang, caption=_t(
                "fleet.side_caption", lang, n=largest, metric=tables.caption_for(metric, tables.metric_unit(metric),
                                                                                 lang))))
        scaling = fleet.scaling_table(rows, metric="bw_mbps")
        if scaling["n_hosts"].nunique() > 1:
            shown, numbers = [], []
            for _, r in scaling.iterrows():
                numbers.append([r["total"], r["per_host"], r["speedup"], r["efficiency"] * 100])
                shown.append([_fmt(r["total"]), _fmt(r["per_host"]), i18n.factor(r["speedup"]),
                              f"{r['efficiency'] * 100:.0f}"])
            index = pd.MultiIndex.from_arrays(
                [[i18n.label(t, lang, section="tests") for t in scaling["test"]],
                 [i18n.label(d, lang, section="directions") for d in scaling["direction"]],
                 scaling["n_hosts"].astype(int)],
                names=[i18n.text("labels.test", lang), i18n.text("labels.direction", lang), _t("fleet.hosts", lang)])
            heads = [_t("fleet.col_total", lang), _t("fleet.col_per_host", lang), _t("fleet.col_speedup", lang),
                     _t("fleet.col_eff", lang)]
            section.tables.append(Table(pd.DataFrame(shown, index=index, columns=heads),
                                        data=pd.DataFrame(numbers, index=index, columns=heads),
                                        caption=_t("fleet.scaling_caption", lang)))
            directions = _order(scaling["direction"])
            fig, axes = plt.subplots(1, len(directions), figsize=(5.6 * len(directions), 4.0), squeeze=False)
            for ax, direction in zip(axes[0], directions):
                fleetplots.scaling_plot(scaling[scaling["direction"] == direction], hue="test", ax=ax,
                                        labels=_labels("fleet_scaling", lang))
                ax.set_title(i18n.label(direction, lang, section="directions"))
            fig.tight_layout()
            section.figures.append(Figure(fig, alt=_t("fleet.scaling_alt", lang)))
            for (test, direction), sub in scaling.groupby(["test", "direction"], sort=False):
                sub = sub.sort_values("n_hosts")
                last = sub.iloc[-1]
                section.sentences.append(_t(
                    "fleet.scales", lang, test=i18n.test_label(test, direction, lang), n=int(last["n_hosts"]),
                    total=_about(last["total"]), speedup=i18n.factor(last["speedup"]),
                    n0=int(sub.iloc[0]["n_hosts"]), eff=f"{last['efficiency'] * 100:.0f}"))
        tails = fleet.tail_latency(rows)
        p99 = tails[tails["percentile"] == "p99"]
        if len(p99):
            # the chart: every host's tail at the largest fleet, for the test with the worst p99
            worst = p99[p99["n_hosts"] == largest].sort_values("latency_us").iloc[-1]
            one = tails[(tails["n_hosts"] == largest) & (tails["test"] == worst["test"])
                        & (tails["direction"] == worst["direction"])]
            one = one.assign(latency_ms=one["latency_us"] / 1000.0)
            fig, ax = plt.subplots(figsize=(7.0, 3.8))
            labels = _labels("fleet_tail", lang)
            fleetplots.tail_latency_plot(one, y="latency_ms", ax=ax, labels=labels)
            what = i18n.test_label(worst["test"], worst["direction"], lang)
            ax.set_title(_t("fleet.tail_title", lang, test=what, n=largest))
            section.figures.append(Figure(fig, alt=_t("fleet.tail_alt", lang, test=what, n=largest)))
            for (test, direction), sub in p99.groupby(["test", "direction"], sort=False):
                now = sub[sub["n_hosts"] == largest].sort_values("latency_us")
                if now.empty:
                    continue
                alone = sub[sub["n_hosts"] == sub["n_hosts"].min()]
                lo, hi = now.iloc[0], now.iloc[-1]
                section.sentences.append(_t(
                    "fleet.tail", lang, test=i18n.test_label(test, direction, lang), n=largest,
                    lo=_ms(lo["latency_us"]), lo_host=lo["host"], hi=_ms(hi["latency_us"]), hi_host=hi["host"],
                    n0=int(alone["n_hosts"].min()) if len(alone) else largest,
                    alone=_ms(float(alone["latency_us"].median())) if len(alone) else DASH))
    return section


#: Section function per kind (pgbench takes the wider ``fio=`` context too).
SECTIONS: dict[str, Callable] = {
    "fleet": fleet_section,
    "pgbench": pgbench_section,
    "bonnie": bonnie_section,
    "tiobench": tiobench_section,
    "hdparm": hdparm_section,
    "gnome-disks": gnome_disks_section,
    "qd-sweep": qd_sweep_section,
    "concurrency": concurrency_section,
}
