"""One colour per system in every chart of a page: bars, latency lines, curves, over-time lines and fleet charts.

The first time a name (a system, or a fleet's host or test) is drawn it takes the next colour of seaborn's
``deep`` palette; from then on every chart kind draws it in that colour, whatever the order of its
legend. A page is rendered in a kernel of its own; :func:`reset` starts over (tests). A system the explorer
renames (another language) keeps its colour: :func:`carry` gives the new name the colour the old one had.
seaborn is imported when a colour is first asked for.
"""
from __future__ import annotations

#: The seaborn palette the colours come from (ten distinct colours, then round again).
PALETTE = "deep"
_COLORS: dict[str, int] = {}  # name -> index in the palette; two names of one system share an index


def _palette() -> list[tuple]:
    import seaborn as sns
    return list(sns.color_palette(PALETTE, n_colors=10))


def color(name) -> tuple:
    """The colour of ``name`` (an RGB tuple): the next palette colour the first time, the same ever after."""
    key = str(name)
    if key not in _COLORS:
        _COLORS[key] = len(set(_COLORS.values()))
    colors = _palette()
    return colors[_COLORS[key] % len(colors)]


def carry(before, after, *, name: str = "system", on=("run_id", "target")) -> None:
    """Give each ``name`` of the rows ``after`` the colour its rows had under their ``name`` in ``before`` (rows
    matched on the columns ``on`` both frames have): the explorer's systems keep their colours when a language
    renames them, whatever order the charts drew them in. Either frame None or empty: nothing to carry."""
    if before is None or after is None or before.empty or after.empty:
        return
    keys = [c for c in on if c in before.columns and c in after.columns]
    if not keys:
        return
    old = before.drop_duplicates(keys).set_index(keys)[name].astype(str)
    new = after.drop_duplicates(keys).set_index(keys)[name].astype(str)
    for key, renamed in new.items():
        was = old.get(key)
        if was is not None and was != renamed and was in _COLORS and renamed not in _COLORS:
            _COLORS[renamed] = _COLORS[was]


def mapping(names) -> dict:
    """``{name: colour}`` for ``names`` in their order, keyed by the names as given (seaborn's ``palette=``)."""
    return {name: color(name) for name in dict.fromkeys(names)}


def reset() -> None:
    """Forget the colours given so far: the next page starts from the palette's first colour."""
    _COLORS.clear()
