"""Sizes and rates: parse user input, format for people.

Sizes follow fio's convention for suffixes (``K``, ``M``, ``G``, ``T`` are
powers of 1024; ``KB``/``MB`` with ``--kb_base`` ignored), since recipe sizes
end up in fio job files. Rates are reported in decimal MB/s like the articles.
"""
from __future__ import annotations

import re

from iolab.core.errors import IolabError

_SUFFIX = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value, *, context: str | None = None) -> int:
    """Return ``value`` (``"1G"``, ``"512M"``, ``"4k"``, ``4096``) in bytes.

    Raises :class:`IolabError` naming ``context`` for anything that is not a
    positive size.
    """
    if isinstance(value, bool):
        raise IolabError(f"not a size: {value!r}", context=context)
    if isinstance(value, int):
        number, unit = value, ""
    elif isinstance(value, float) and value.is_integer():
        number, unit = int(value), ""
    else:
        match = _SIZE_RE.match(str(value))
        if not match:
            raise IolabError(
                f"not a size: {value!r}", context=context,
                hint="use a number of bytes or a suffix K, M, G, T (powers of 1024), e.g. 512M",
            )
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * _SUFFIX[unit])
    if size <= 0:
        raise IolabError(f"size must be positive, got {value!r}", context=context)
    return size


def fio_size(nbytes: int) -> str:
    """Express ``nbytes`` the way a person would write it in a fio job file."""
    for suffix, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return str(nbytes)


def human_size(nbytes: float) -> str:
    """``1073741824`` -> ``'1 GiB'``, ``1610612736`` -> ``'1.5 GiB'``: one decimal, none when it is 0 (an
    editor prints "512 MiB", not "512.0 MiB")."""
    value, units = float(nbytes), ["B", "KiB", "MiB", "GiB", "TiB"]
    while abs(value) >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    shown = f"{value:.0f}" if units[0] == "B" else f"{value:.1f}".removesuffix(".0")
    return f"{shown} {units[0]}"


def parse_seconds(value, *, context: str | None = None) -> float:
    """Return a positive duration in seconds from ``5``, ``"5"``, ``"5s"``, ``"2m"``."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", str(value))
    if isinstance(value, bool) or not match:
        raise IolabError(f"not a duration: {value!r}", context=context, hint="e.g. 5, 5s or 2m")
    factor = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[match.group(2)]
    seconds = float(match.group(1)) * factor
    if seconds <= 0:
        raise IolabError(f"duration must be positive, got {value!r}", context=context)
    return seconds
