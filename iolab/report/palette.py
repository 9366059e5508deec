"""One colour per system in every chart of a page: bars, latency lines, curves, over-time lines and fleet charts.

The first time a name (a system, or a fleet's host or test) is drawn it takes the next colour of seaborn's
``deep`` palette; from then on every chart kind draws it in that colour, whatever the order of its
legend. A page is rendered in a kernel of its own; :func:`reset` starts over (tests, the explorer).
seaborn is imported when a colour is first asked for.
"""
from __future__ import annotations

#: The seaborn palette the colours come from (ten distinct colours, then round again).
PALETTE = "deep"
_COLORS: dict[str, tuple] = {}


def _palette() -> list[tuple]:
    import seaborn as sns
    return list(sns.color_palette(PALETTE, n_colors=10))


def color(name) -> tuple:
    """The colour of ``name`` (an RGB tuple): the next palette colour the first time, the same ever after."""
    key = str(name)
    if key not in _COLORS:
        colors = _palette()
        _COLORS[key] = colors[len(_COLORS) % len(colors)]
    return _COLORS[key]


def mapping(names) -> dict:
    """``{name: colour}`` for ``names`` in their order, keyed by the names as given (seaborn's ``palette=``)."""
    return {name: color(name) for name in dict.fromkeys(names)}


def reset() -> None:
    """Forget the colours given so far: the next page starts from the palette's first colour."""
    _COLORS.clear()
