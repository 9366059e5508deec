"""fio's rules for job options that iolab applies without running fio, each stated once.

* :func:`is_global`: a section's kind (fio's ``init.c``: a name starting with "global" holds global options).
* :func:`fio_bool`: the integer fio's parser stores for a bool option (``parse.c``: ``handle_option`` splits
  the value, ``check_int`` reads it with C's ``sscanf``, a bool is at most 1), or fio's refusal.
* :func:`is_direct`: whether a job opens its files with O_DIRECT: ``direct`` and ``buffered`` (negated)
  store into one field (``options.c``), the later one wins.

:mod:`iolab.engine.jobfile.reader` reads a job file as fio does (with fio); the job's options it yields, the recipe's
options iolab writes into a job and the classic engines' options are all decided here.
"""
from __future__ import annotations

import re

from iolab.core.errors import IolabError


def is_global(name: str) -> bool:
    """fio's kind of section ``name``: global options when the name starts with "global" (``[globalX]``
    too: fio's init.c compares the first six characters), else a job."""
    return name.startswith("global")


# ------------------------------------------------------------ O_DIRECT, as fio decides it

#: fio's options that set O_DIRECT: both store into one field (``odirect``), ``buffered`` negated
#: (options.c); the one fio applies last wins. Neither set: fio's default, buffered.
DIRECT_OPTIONS = {"direct": False, "buffered": True}  # name: negated
_ULONG = 2 ** 64
_DECIMAL = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_HEX = re.compile(r"[ \t\n\v\f\r]*([+-]?)(?:0[xX](?=[0-9a-fA-F]))?([0-9a-fA-F]+)")


def _scan_int(text: str) -> int | None:
    """fio's ``check_int``: C's ``sscanf("%u")`` (``"%x"`` when "0x" is anywhere in ``text``) into an int,
    as glibc does it (strtoul's wrap-around, then 32 bits, signed); None where sscanf matches nothing."""
    match = (_HEX if "0x" in text or "0X" in text else _DECIMAL).match(text)
    if not match:
        return None
    magnitude = int(match.group(2), 16 if match.re is _HEX else 10)
    number = _ULONG - 1 if magnitude >= _ULONG else (-magnitude) % _ULONG if match.group(1) == "-" else magnitude
    number %= 2 ** 32
    return number - 2 ** 32 if number >= 2 ** 31 else number


def _pieces(text: str) -> list[str]:
    """fio's ``handle_option`` split of a bool value: each piece is the rest of the value from one separator
    on (',' first, a trailing ',' cut off; else ':', else '-'); only the first piece is stored."""
    pieces = []
    while True:
        cut = text.find(",")
        if cut >= 0 and cut == len(text) - 1:
            text = text[:cut]
        if cut < 0:
            cut = text.find(":")
        if cut < 0:
            cut = text.find("-")
        pieces.append(text)
        if cut < 0:
            return pieces
        text = text[cut + 1:]


def fio_bool(value, option: str = "direct", source: str = "job options") -> int | None:
    """The integer fio stores for bool option ``option`` set to ``value`` (before a negation such as
    ``buffered``'s), as fio's parser (parse.c ``handle_option``, ``check_int``) reads it: an integer, at most 1
    (``1``, ``0``, ``0x1``, ``1abc`` are 1, 0, 1, 1; ``-1`` is stored as -1, i.e. set); None where fio accepts
    the value but stores nothing (its first piece is no number, a later one is: ``x,1``).

    ``value`` as iolab writes it into a job: ``True``/``False`` are 1/0 (:func:`iolab.engine.fio.render_job`),
    numbers their text. Raises :class:`IolabError` where fio refuses the value (``true``, ``2``, an empty
    value, or none: fio's bool options take an argument).
    """
    if value is None:
        raise IolabError(f"option {option} without a value: fio's bool options take an integer (0 or 1)",
                         context=source, hint=f"write {option}=1 or {option}=0")
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    text = text.split(";", 1)[0].split("#", 1)[0]  # fio cuts a job line there
    stored, accepted = None, False
    for index, piece in enumerate(_pieces(text)):
        number = _scan_int(piece) if piece else None
        if number is not None and number <= 1:  # fio's bool range: max 1 (its min of 0 is never checked)
            accepted = True
            if index == 0:
                stored = number
    if not accepted:
        raise IolabError(f"{option}={text!r}: fio refuses it: its bool options take an integer, 0 or 1",
                         context=source, hint=f"write {option}=1 or {option}=0")
    return stored


def is_direct(*layers, source: str = "job options") -> bool:
    """Whether a job opens its files with O_DIRECT, as fio decides: ``layers`` are mappings or
    ``(name, value)`` pairs of options by fio's canonical names, in the order fio applies them (the
    [global] options before the job's); ``direct`` and ``buffered`` set one flag and the later one wins.
    A value fio refuses raises :class:`IolabError` (:func:`fio_bool`)."""
    odirect = 0
    for layer in layers:
        for name, value in (layer.items() if hasattr(layer, "items") else layer):
            if name in DIRECT_OPTIONS:
                stored = fio_bool(value, name, source)
                if stored is not None:
                    odirect = int(not stored) if DIRECT_OPTIONS[name] else stored
    return odirect != 0
