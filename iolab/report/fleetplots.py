"""Drawing fleet results: aggregate throughput vs hosts, per-host tail latency.

seaborn-style functions over the tidy tables of :mod:`iolab.fleet.runs`
(:func:`~iolab.fleet.scaling.scaling_table`, :func:`~iolab.fleet.scaling.tail_latency`):
``data, *, x=, y=, hue=, ax=None`` in, the :class:`matplotlib.axes.Axes` out.
Nothing is computed here that the tables do not show. matplotlib is imported
when a function is called. Texts are English by default; pass ``labels={...}``
(keys in each function's ``LABELS``) for another language.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from iolab.core import optional
from iolab.core.errors import IolabError
from iolab.report import palette, plot

SCALING_LABELS = {
    "x": "Hosts running at once",
    "y_bw_mbps": "Aggregate throughput (MB/s)",
    "y_iops": "Aggregate IOPS",
    "y": "Aggregate {metric}",
    "ideal": "linear scaling",
}
TAIL_LABELS = {
    "x": "Host",
    "y": "Latency (µs)",
}


def _groups(data: pd.DataFrame, hue: str | None):
    if hue is None:
        return [(None, data)]
    return [(key, group) for key, group in data.groupby(hue, sort=False, dropna=False)]


def scaling_plot(data: pd.DataFrame, *, x: str = "n_hosts", y: str = "total", hue: str | None = "test",
                 ax=None, ideal: bool = True, labels: dict | None = None):
    """Aggregate ``y`` vs number of hosts, one line per ``hue``; dashed: linear scaling from the first point.

    ``data`` is :func:`iolab.fleet.scaling.scaling_table` output (one row per x per
    hue group; filter to one direction first when the table has several).
    """
    plot.require_columns(data, [x, y, hue], "scaling_plot")
    texts = optional.labels(SCALING_LABELS, labels)
    plt = optional.pyplot()
    if ax is None:
        _, ax = plt.subplots()
    for key, group in _groups(data, hue):
        if group.duplicated(subset=[x]).any():
            raise IolabError(f"several rows per {x} in group {key!r}: filter to one direction (or test) first",
                             context="scaling_plot")
        group = group.sort_values(x)
        xs, ys = group[x].to_numpy(dtype=float), group[y].to_numpy(dtype=float)
        # a test or host keeps the page's colour of its name (iolab.report.palette), as in every chart kind
        line, = ax.plot(xs, ys, marker="o", label=None if key is None else str(key),
                        **({} if key is None else {"color": palette.color(key)}))
        if ideal and len(xs) and xs[0] > 0:
            ax.plot(xs, ys[0] * xs / xs[0], linestyle="--", color=line.get_color(), alpha=0.5,
                    label=f"{texts['ideal']}" + ("" if key is None else f" ({key})"))
    ax.set_xlabel(texts["x"])
    metric = str(data["metric"].iloc[0]) if "metric" in data.columns else y
    ax.set_ylabel(texts.get(f"y_{metric}") or texts["y"].format(metric=metric))
    ticks = np.unique(data[x].to_numpy(dtype=float))
    if len(ticks) and np.allclose(ticks, np.round(ticks)):
        ax.set_xticks(ticks)
    ax.set_ylim(bottom=0)
    if hue is not None or ideal:
        ax.legend()
    return ax


def tail_latency_plot(data: pd.DataFrame, *, x: str = "host", y: str = "latency_us", hue: str | None = "percentile",
                      ax=None, log: bool = True, labels: dict | None = None):
    """Grouped bars: ``y`` per ``x`` (host), one bar per ``hue`` (p50, p99, p99.9, max).

    ``data`` is :func:`iolab.fleet.scaling.tail_latency` output filtered to one test,
    direction and fleet size (one row per ``x`` x ``hue``).
    """
    plot.require_columns(data, [x, y, hue], "tail_latency_plot")
    keys = [x] + ([hue] if hue else [])
    if data.duplicated(subset=keys).any():
        raise IolabError(f"several rows per {' x '.join(keys)}: filter to one test, direction and n_hosts first",
                         context="tail_latency_plot")
    texts = optional.labels(TAIL_LABELS, labels)
    plt = optional.pyplot()
    if ax is None:
        _, ax = plt.subplots()
    categories = list(dict.fromkeys(data[x].astype(str)))
    groups = _groups(data, hue)
    width = 0.8 / max(len(groups), 1)
    positions = np.arange(len(categories))
    for i, (key, group) in enumerate(groups):
        values = group.set_index(group[x].astype(str))[y].reindex(categories).to_numpy(dtype=float)
        bars = ax.bar(positions - 0.4 + width * (i + 0.5), values, width=width,
                      label=None if key is None else str(key),
                      **({} if key is None else {"color": palette.color(key)}))
        ax.bar_label(bars, labels=[plot.bar_label(v) for v in values], fontsize="x-small", padding=1)
    ax.set_xticks(positions)
    ax.set_xticklabels(categories)
    ax.set_xlabel(texts["x"])
    plot.y_axis(ax, log=log, label=texts["y"], bars=data[y])  # as every bar chart's
    if hue is not None:
        ax.legend()
    return ax
