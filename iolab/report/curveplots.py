"""Drawing the curve recipes: position curve, QD sweep, concurrency scaling.

seaborn-style functions: tidy data in (``data, *, x=, y=, hue=, ax=None``),
the primary :class:`matplotlib.axes.Axes` out. The second quantity of each
graph (access time, p99 latency) goes on a twin y axis sharing x, found again
with :func:`twin_of`; calling a function twice on the same ``ax`` overlays
curves on the same pair of axes. The numbers come from :mod:`iolab.analysis.curves`;
nothing is computed here that a table could not show.

Axis and legend texts are English by default; pass ``labels={...}`` (keys
listed in each function's ``LABELS``) for another language.
matplotlib is imported when a function is called, so importing this module
costs nothing where no plot is drawn.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from iolab.analysis import curves
from iolab.core import optional
from iolab.core.errors import IolabError
from iolab.report import palette, plot

#: Default texts of :func:`position_plot`.
POSITION_LABELS = {
    "x": "Position on device (%)",
    "y": "Read/write speed (MB/s)",
    "y2": "Access time (ms)",
    "access": "access time",
}
#: Default texts of :func:`qd_plot`; ``knee`` is formatted with ``name`` and ``x``.
QD_LABELS = {
    "x_qd": "Queue depth",
    "x_oio": "Outstanding I/O (queue depth x jobs)",
    "y": "IOPS",
    "y2": "p99 latency (µs)",
    "knee": "knee ({name} {x:g})",
    "iops": "IOPS",
    "p99": "p99",
}
#: Default texts of :func:`scaling_plot`.
SCALING_LABELS = {
    "x": "Concurrency ({x})",
    "y": "Total {metric}",
    "y2": "p99 latency (µs), worst client",
    "per_client": "per client",
    "total": "total",
    "p99": "p99",
}

_METRIC_NAMES = {"bw_mbps": "throughput (MB/s)", "iops": "IOPS"}


def twin_of(ax):
    """The twin (right-hand) Axes an iolab plot added to ``ax``, or None."""
    for other in ax.figure.axes:
        if other is not ax and getattr(other, "_iolab_twin_of", None) is ax:
            return other
    return None


def _twin(ax):
    twin = twin_of(ax)
    if twin is None:
        twin = ax.twinx()
        twin._iolab_twin_of = ax
        # keep the primary curves above the twin's (twinx draws on top otherwise)
        ax.set_zorder(twin.get_zorder() + 1)
        ax.patch.set_visible(False)
    return twin


def _hue_groups(data: pd.DataFrame, hue: str | None):
    if hue is None:
        yield None, data
        return
    for value, sub in data.groupby(hue, sort=False, dropna=False):
        yield value, sub


def _color(value) -> dict:
    """The line colour of a ``hue`` value: the page's colour of that system (:mod:`iolab.report.palette`), as in
    its bars and latency lines; no ``hue``: matplotlib's own."""
    return {} if value is None else {"color": palette.color(value)}


def _y_axes(ax, twin) -> None:
    """Both y axes' ticks as plain numbers (500,000, not 500000), as every iolab chart's (:func:`plot.y_axis`)."""
    for axes in (ax, twin):
        if axes is not None and axes.get_yscale() == "linear":
            plot.y_axis(axes, log=False)


def _legend(ax, twin) -> None:
    """The legend of both Axes in one box."""
    handles, texts = [], []
    for axes in (ax, twin):
        if axes is None:
            continue
        h, t = axes.get_legend_handles_labels()
        for handle, text in zip(h, t):
            if not text.startswith("_"):
                handles.append(handle)
                texts.append(text)
    if handles:
        ax.legend(handles, texts, loc="best", fontsize="small")


def _geometric_x(ax, values) -> None:
    """Log2 x axis with the measured points as ticks when the sweep is geometric."""
    values = np.unique(np.asarray([v for v in values if np.isfinite(v) and v > 0], dtype=float))
    if len(values) >= 3 and values.max() / values.min() >= 8:
        ax.set_xscale("log", base=2)
        ax.set_xticks(values)
        ax.set_xticklabels([f"{v:g}" for v in values])
        ax.minorticks_off()
    elif len(values):
        ax.set_xticks(values)


# --------------------------------------------------------------------------- #
def position_plot(data: pd.DataFrame, *, x: str = "position", y: str = "bw_mbps", hue: str | None = None,
                  access: pd.DataFrame | None = None, access_x: str = "seek_distance",
                  access_y: str = "access_ms", ax=None, labels: dict | None = None):
    """GNOME Disks' benchmark graph: MB/s along the device, access times on a twin axis.

    ``data`` holds the transfer-rate samples (``x`` a fraction 0..1 of the
    device, drawn as 0-100 %; ``y`` in MB/s), one line per ``hue`` value
    (e.g. ``hue="direction"`` for the read and write curves). ``access``, if
    given, holds the access-time samples: their seek distance (``access_x``,
    a fraction of the device, or computed from a ``position`` column) against
    ``access_y`` in ms, drawn as a scatter on the right-hand axis, as GNOME
    Disks does.
    """
    what = "position_plot"
    plot.require_columns(data, [x, y, hue], what)
    texts = optional.labels(POSITION_LABELS, labels)
    ax = ax if ax is not None else optional.pyplot().gca()
    position = pd.to_numeric(data[x], errors="coerce")
    if (position > 1 + 1e-9).any() or (position < -1e-9).any():
        raise IolabError(f"{x!r} must be a fraction of the device (0..1)", context=what)
    for value, sub in _hue_groups(data, hue):
        sub = sub.assign(_p=pd.to_numeric(sub[x], errors="coerce") * 100.0,
                         _r=pd.to_numeric(sub[y], errors="coerce")).dropna(subset=["_p", "_r"])
        sub = sub.sort_values("_p", kind="mergesort")
        ax.plot(sub["_p"], sub["_r"], label="_nolegend_" if value is None else str(value), linewidth=1.5,
                **_color(value))
    ax.set_xlim(0, 100)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(texts["x"])
    ax.set_ylabel(texts["y"])
    twin = None
    if access is not None:
        if access_x not in access.columns:
            plot.require_columns(access, ["position", access_y], what)
            distance = curves.seek_distance(access, position="position")
        else:
            plot.require_columns(access, [access_x, access_y], what)
            distance = pd.to_numeric(access[access_x], errors="coerce")
        times = pd.to_numeric(access[access_y], errors="coerce")
        keep = distance.notna() & times.notna()
        twin = _twin(ax)
        twin.scatter(distance[keep] * 100.0, times[keep], s=6, alpha=0.6, color="tab:gray",
                     label=texts["access"], zorder=1)
        twin.set_ylim(bottom=0)
        twin.set_ylabel(texts["y2"])
    _y_axes(ax, twin)
    _legend(ax, twin)
    return ax


def qd_plot(data: pd.DataFrame, *, x: str = "iodepth", y: str = "iops", p99: str = "lat_p99_us",
            hue: str | None = None, knee: bool = True, iops_gain: float = 0.05, p99_growth: float = 0.20,
            ax=None, labels: dict | None = None):
    """IOPS (left, solid) and p99 latency (right, dashed) against queue depth.

    The x axis is outstanding I/O, ``iodepth x numjobs`` (see
    :func:`iolab.analysis.curves.sweep_axis`); repetitions are drawn as their median.
    With ``knee=True`` the knee from :func:`iolab.analysis.curves.find_knee` is marked
    with a star on the IOPS curve and a dotted vertical line (both carry the
    gid ``"knee"``). One curve per ``hue`` value; without ``hue`` the data
    must be one curve (one direction, one block size).
    """
    what = "qd_plot"
    plot.require_columns(data, [c for c in (x, y, p99, hue) if c != curves.OIO], what)
    texts = optional.labels(QD_LABELS, labels)
    ax = ax if ax is not None else optional.pyplot().gca()
    twin = _twin(ax)
    all_x = []
    oio = False
    for value, sub in _hue_groups(data, hue):
        table = curves.sweep_table(sub, x=x, iops=y, p99=p99)
        if table.empty:
            continue
        if x in ("iodepth", curves.OIO) and "numjobs" in sub.columns:
            oio = oio or bool((pd.to_numeric(sub["numjobs"], errors="coerce").fillna(1) != 1).any())
        all_x.extend(table["x"])
        name = texts["iops"] if value is None else str(value)
        (line,) = ax.plot(table["x"], table["iops"], marker="o", linewidth=1.5, label=name, **_color(value))
        color = line.get_color()
        twin.plot(table["x"], table["p99"], marker="s", markersize=4, linestyle="--", color=color,
                  label=texts["p99"] if value is None else f"{value} {texts['p99']}")
        if knee:
            found = curves.find_knee(sub, x=x, iops=y, p99=p99, iops_gain=iops_gain, p99_growth=p99_growth)
            if found:
                shown = found.x_name if x not in ("iodepth", curves.OIO) else "OIO" if oio else "QD"
                label = texts["knee"].format(name=shown, x=found.x)
                ax.plot([found.x], [found.row["iops"]], marker="*", markersize=16, linestyle="none",
                        color=color, markeredgecolor="black", zorder=5, label=label, gid="knee")
                ax.axvline(found.x, linestyle=":", color=color, linewidth=1, gid="knee")
    _geometric_x(ax, all_x)
    ax.set_ylim(bottom=0)
    twin.set_ylim(bottom=0)
    ax.set_xlabel(texts["x_oio"] if oio or x == curves.OIO else texts["x_qd"] if x == "iodepth" else x)
    ax.set_ylabel(texts["y"])
    twin.set_ylabel(texts["y2"])
    _y_axes(ax, twin)
    _legend(ax, twin)
    return ax


def scaling_plot(data: pd.DataFrame, *, x: str = "numjobs", y: str = "bw_mbps", p99: str = "lat_p99_us",
                 hue: str | None = None, client: str | None = None, ax=None, labels: dict | None = None):
    """Total throughput (left, solid) and worst-client p99 (right, dashed) against concurrency.

    Numbers from :func:`iolab.analysis.curves.scaling` (``hue`` becomes its ``by``).
    With ``client`` naming the per-client column, every client's own ``y``
    is drawn as a dot too, so an unfair share (a low Jain index) is visible.
    The p99 curve is drawn only when ``data`` has a ``p99`` column.
    """
    what = "scaling_plot"
    plot.require_columns(data, [x, y, hue, client], what)
    texts = optional.labels(SCALING_LABELS, labels)
    ax = ax if ax is not None else optional.pyplot().gca()
    table = curves.scaling(data, x, y=y, p99=p99, client=client, by=[hue] if hue else [])
    twin = _twin(ax) if table["p99"].notna().any() else None
    for value, sub in _hue_groups(table, hue):
        name = texts["total"] if value is None else str(value)
        (line,) = ax.plot(sub[x], sub["total"], marker="o", linewidth=1.5, label=name, **_color(value))
        color = line.get_color()
        if twin is not None and sub["p99"].notna().any():
            twin.plot(sub[x], sub["p99"], marker="s", markersize=4, linestyle="--", color=color,
                      label=texts["p99"] if value is None else f"{value} {texts['p99']}")
        if client:
            raw = data if hue is None else data[data[hue] == value]
            ax.scatter(pd.to_numeric(raw[x], errors="coerce"), pd.to_numeric(raw[y], errors="coerce"),
                       s=12, color=color, alpha=0.5, zorder=3,
                       label=texts["per_client"] if value is None else f"{value} {texts['per_client']}")
    _geometric_x(ax, table[x])
    ax.set_ylim(bottom=0)
    metric = _METRIC_NAMES.get(y, y)
    ax.set_xlabel(texts["x"].format(x=x))
    ax.set_ylabel(texts["y"].format(metric=metric))
    if twin is not None:
        twin.set_ylim(bottom=0)
        twin.set_ylabel(texts["y2"])
    _y_axes(ax, twin)
    _legend(ax, twin)
    return ax
