"""Bar charts a reader can read: a log axis's baseline, and value labels that never overlap.

:func:`log_baseline` puts the bottom of a log axis one decade below the
smallest value (1,214 KB/s draws from 100, not from an arbitrary 10^0), so
every bar has a visible length and a 100x ratio looks like two decades.
:func:`fit` makes the value labels of a chart fit after they are placed:
horizontal where they fit, else turned upright, then smaller, then the figure
wider, until no two label boxes intersect and none is wider than its bar's room (measured with the renderer, as the
image will be drawn), and the axis grows upwards so that no label is clipped; :func:`refit` does it again once a
layout has changed the axes' width. :func:`turn_ticks` turns the
category labels under the bars only where, level, they would run together.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import weakref

#: The smallest font size (points) value labels shrink to before the figure is widened.
MIN_FONT = 5.0
#: The widest a figure grows (inches) to fit its labels.
MAX_WIDTH = 40.0

#: Each axes' value labels as :func:`fit` found them (weak references: a label refers to its axes, which would
#: keep the entry and its figure alive), their first font size and the y limits before any headroom: what
#: :func:`refit` starts again from once a layout has changed the axes' width.
_PLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def log_baseline(values) -> float:
    """The power of ten at least one decade below the smallest positive value (1,214 -> 100; 1,000 -> 100)."""
    positive = [float(v) for v in values if v is not None and not math.isnan(float(v)) and float(v) > 0]
    if not positive:
        return 1.0
    return 10.0 ** (math.floor(math.log10(min(positive))) - 1)


def boxes(texts, renderer) -> list:
    """The display-space boxes of the non-empty ``texts`` (matplotlib Text/Annotation)."""
    return [t.get_window_extent(renderer) for t in texts if t.get_text() and t.get_visible()]


def overlapping(texts, renderer) -> bool:
    """True when any two label boxes intersect."""
    found = boxes(texts, renderer)
    return any(a.overlaps(b) for a, b in itertools.combinations(found, 2))


def _headroom(ax, texts, renderer) -> None:
    """Raise the top of the y axis until every label lies inside the axes (linear or log)."""
    for _ in range(4):
        found = boxes(texts, renderer)
        if not found:
            return
        frame = ax.get_window_extent(renderer)
        excess = max(b.y1 for b in found) - frame.y1
        if excess <= 0.5:
            return
        share = (excess + 2.0) / max(frame.height - excess, 1.0)
        bottom, top = ax.get_ylim()
        if ax.get_yscale() == "log":
            low, high = math.log10(bottom), math.log10(top)
            ax.set_ylim(bottom, 10.0 ** (high + (high - low) * share))
        else:
            ax.set_ylim(bottom, top + (top - bottom) * share)


def _crowded(texts, renderer) -> float:
    """0 when the labels fit; else how many times too wide the worst one is.

    A label fits when it is no wider than the distance to the nearest other
    label's centre (it stays within its own bar's half of the way to the next
    labelled bar, so it never reads as a neighbour's) and no two boxes intersect.
    """
    found = boxes(texts, renderer)
    centres = [(b.x0 + b.x1) / 2 for b in found]
    worst = 0.0
    for i, box in enumerate(found):
        near = min((abs(centres[i] - c) for j, c in enumerate(centres) if j != i), default=math.inf)
        worst = max(worst, box.width / near if near > 0 else math.inf)
    if worst > 1.0:
        return worst
    if any(a.overlaps(b) for a, b in itertools.combinations(found, 2)):
        return 1.05
    return 0.0


def fit(ax, texts) -> None:
    """Make the value labels ``texts`` of ``ax`` readable: no two intersect, none is wider than the way
    to the next labelled bar (:func:`_crowded`) and none is clipped at the top.

    Each step measures the labels once: upright if they do not fit, then a font
    size scaled down to fit (not below :data:`MIN_FONT`), then a wider figure.
    """
    texts = [t for t in texts if t.get_text()]
    if texts:
        _PLACED[ax] = ([weakref.ref(t) for t in texts], float(texts[0].get_fontsize()), ax.get_ylim())
        with _measurable(ax.figure):
            _fit(ax, texts)


def refit(ax) -> bool:
    """:func:`fit` the value labels of ``ax`` again from the start (level, their first size, no headroom), at the
    axes' width now: a layout (``tight_layout`` making room for a legend) narrows the axes the labels were fitted
    to. True when ``ax`` has value labels."""
    placed = _PLACED.get(ax)
    if placed is None:
        return False
    refs, size, ylim = placed
    texts = [t for t in (ref() for ref in refs) if t is not None]
    if not texts:
        return False
    ax.set_ylim(ylim)
    for t in texts:
        t.set_rotation(0)
        t.set_fontsize(size)
        t.set_horizontalalignment("center")
        t.set_verticalalignment("bottom")
    with _measurable(ax.figure):
        _fit(ax, texts)
    return True


def turn_ticks(ax, *, gap_pt: float = 4.0) -> bool:
    """Turn the x axis's category labels 30° when, level, two neighbours would come closer than ``gap_pt`` points
    (their widths measured as drawn, against the distance between their ticks once the figure has its final
    width); a lone label, or a few short ones on a wide axis, stay level under their bars. True when turned."""
    shown = [(x, t) for x, t in zip(ax.get_xticks(), ax.get_xticklabels()) if t.get_text()]
    if len(shown) < 2:
        return False
    labels, fig = [t for _, t in shown], ax.figure
    with _measurable(fig):
        renderer = fig.canvas.get_renderer()
        for t in labels:  # measured level, whatever an earlier call decided
            t.set_rotation(0)
        widths = [t.get_window_extent(renderer).width for t in labels]
    at = [ax.transData.transform((x, 0))[0] for x, _ in shown]
    gap = gap_pt * fig.dpi / 72
    crowded = any(b - a < (wa + wb) / 2 + gap for a, b, wa, wb in zip(at, at[1:], widths, widths[1:]))
    set_turned(ax, crowded)
    return crowded


def set_turned(ax, turned: bool) -> None:
    """The x axis's category labels turned 30° (right-aligned under their ticks) or level (centred)."""
    for t in ax.get_xticklabels():
        t.set_rotation(30 if turned else 0)
        t.set_horizontalalignment("right" if turned else "center")


@contextlib.contextmanager
def _measurable(fig):
    """``fig`` with a canvas that can measure text while the block runs: a bare Figure (the explorer's widgets)
    gets Agg's, then its own back."""
    if hasattr(fig.canvas, "get_renderer"):
        yield
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas
    try:
        FigureCanvasAgg(fig)
        yield
    finally:
        fig.set_canvas(canvas)


def _fit(ax, texts) -> None:
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    if _crowded(texts, renderer):
        for t in texts:  # upright: a label is then as wide as one line of text
            t.set_rotation(90)
            t.set_horizontalalignment("center")
            t.set_verticalalignment("bottom")
    for _ in range(6):
        excess = _crowded(texts, renderer)
        if not excess:
            break
        size = float(texts[0].get_fontsize())
        if size > MIN_FONT:
            for t in texts:
                t.set_fontsize(max(MIN_FONT, size / excess * 0.95))
        elif fig.get_figwidth() < MAX_WIDTH:
            fig.set_figwidth(min(MAX_WIDTH, fig.get_figwidth() * max(excess, 1.1) * 1.05))
            renderer = fig.canvas.get_renderer()
        else:
            break
    _headroom(ax, texts, renderer)
