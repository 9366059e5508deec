"""Words of the reports in English and Japanese: headings, labels, units, prose templates.

The strings live in ``iolab/report/locale/<lang>.yaml``; this module looks them up.
Every key exists in every language (a test checks it), and a missing key
raises instead of printing an English word into a Japanese report.

>>> text("headings.results", "ja")       # doctest: +SKIP
'結果'
>>> unit("MB/s", "ja")
'MB/秒'
"""
from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import yaml

from iolab.core import recorded
from iolab.core.errors import IolabError

LANGS = ("en", "ja")
LOCALE_DIR = Path(__file__).resolve().parent / "locale"


def check_lang(lang) -> str:
    """``lang`` if iolab speaks it, else an :class:`IolabError` naming the choices."""
    if lang not in LANGS:
        raise IolabError(f"unknown language {lang!r}", context="lang", hint="choose one of: " + ", ".join(LANGS))
    return lang


@functools.lru_cache(maxsize=None)
def catalog(lang: str) -> dict:
    """The whole string table of ``lang`` (nested dicts, as in the YAML file)."""
    check_lang(lang)
    path = LOCALE_DIR / f"{lang}.yaml"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise IolabError(f"unreadable locale file: {exc}", context=str(path)) from exc


def _lookup(key: str, lang: str):
    node = catalog(lang)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def text(key: str, lang: str, **fields) -> str:
    """The string at dotted ``key`` (``"headings.results"``), formatted with ``fields``."""
    try:
        template = _lookup(key, lang)
    except KeyError:
        raise IolabError(f"no text for {key!r}", context=f"locale {lang}") from None
    template = str(template)
    if fields and "{" in template:
        template = _PLURAL.sub(lambda m: _plural(m, fields), template)
    return template.format(**fields) if fields else template


def scoped(section: str):
    """``text`` for the keys of one section: ``_t = i18n.scoped("narrative")``, then ``_t("key", lang, ...)``."""
    def scoped_text(key: str, lang: str, **fields) -> str:
        return text(f"{section}.{key}", lang, **fields)
    scoped_text.__doc__ = f"The text of ``{section}.KEY`` in ``lang`` (see :func:`iolab.report.i18n.text`)."
    return scoped_text


#: ``{n|repetition|repetitions}`` in a template: the singular when field ``n`` is 1, else the plural.
_PLURAL = re.compile(r"\{(\w+)\|([^|{}]*)\|([^|{}]*)\}")


def _plural(match, fields) -> str:
    value = fields.get(match.group(1))
    try:
        one = float(str(value).replace(",", "")) == 1
    except ValueError:
        one = False
    return match.group(2) if one else match.group(3)


def has(key: str, lang: str) -> bool:
    try:
        _lookup(key, lang)
        return True
    except KeyError:
        return False


def recipe_description(recipe: str, stored: str | None, lang: str) -> str | None:
    """A recipe's one-line description in ``lang``: the locale's (``recipe_descriptions``) where it has one for
    a language other than English, else the description the run stored (the recipe's own, in English)."""
    if lang != "en" and has(f"recipe_descriptions.{recipe}", lang):
        return label(recipe, lang, section="recipe_descriptions")
    return stored


def label(name, lang: str, *, section: str = "labels") -> str:
    """A label for ``name`` from ``section`` (labels, tests, metrics, groups...), else ``name``."""
    name = "" if name is None else str(name)
    table = catalog(lang).get(section, {}) or {}
    return str(table.get(name, name))


def unit(name: str, lang: str) -> str:
    """A unit as the language writes it (``MB/s`` -> ``MB/秒``; unknown units unchanged)."""
    return label(name, lang, section="units")


def test_label(test: str, direction: str | None, lang: str) -> str:
    """``"SEQ1M-Q8T1", "read"`` -> ``SEQ1M-Q8T1 read`` / ``SEQ1M-Q8T1の読み込み`` (``labels.test_direction``:
    Japanese puts no space between a Latin name and kana); known test names are translated, and a name that
    already says its direction (``seq read``, ``ブロック読み込み``) is not followed by it a second time."""
    name = label(test, lang, section="tests")
    said = label(direction, lang, section="directions") if direction else ""
    if not said or said in name:
        return name
    if not name:
        return said
    return text("labels.test_direction", lang, test=name, direction=said)


def join(items, lang: str) -> str:
    """``a, b and c`` / ``a、b、c``."""
    items = [str(i) for i in items]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    if lang == "ja":
        return "、".join(items)
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + f" and {items[-1]}"


def group(items, lang: str) -> str:
    """Names taken together before a sentence goes on after a comma: ``a and b`` / ``a・b`` (a Japanese list in
    「、」 runs into the 「、」 that follows it: 「HDD、SSD、全テスト：」 reads as three names)."""
    return "・".join(str(i) for i in items) if lang == "ja" else join(items, lang)


def comma_list(items, lang: str) -> str:
    """Items as a plain list, ``a, b, c`` / ``a、b、c``: no "and" (a list in brackets or a table cell, not a
    sentence: that is :func:`join`)."""
    return ("、" if lang == "ja" else ", ").join(str(i) for i in items)


def join_sentences(parts, lang: str) -> str:
    """Sentences of one paragraph or bullet (empty ones left out): a space between them in English, none in
    Japanese."""
    return ("" if lang == "ja" else " ").join(p for p in parts if p)


def join_capped(items, lang: str, limit: int = 8) -> str:
    """:func:`join`, but past ``limit`` names the rest as ``N more`` / ``ほか N 件``."""
    items = [str(i) for i in items]
    if len(items) > limit:
        rest = len(items) - (limit - 1)
        items = items[:limit - 1] + [text("labels.more", lang, n=rest)]
    return join(items, lang)


def paren(inner, lang: str) -> str:
    """``inner`` in brackets after a word: `` (MB/s)`` / ``（MB/秒）`` (Japanese text takes full-width brackets, no space)."""
    return f"（{inner}）" if lang == "ja" else f" ({inner})"


#: A half-width bracket in a name, with the spaces around it: ``SATA HDD (mem=512M)``'s `` (mem=512M)``.
_HALF_BRACKET = re.compile(r"\s*\(([^()]*)\)\s*")


def page_name(name, lang: str) -> str:
    """A name (a system, an article's column, a label) as a page in ``lang`` prints it: on a Japanese page its
    half-width brackets full-width with no space beside them (``SATA HDD (mem=512M)`` -> ``SATA HDD（mem=512M）``,
    the typesetting rule of ja.yaml); in English, and without a bracket, as given. The one bracket rule for names:
    data, files and English pages keep the name as stored."""
    name = "" if name is None else str(name)
    if lang != "ja" or "(" not in name:
        return name
    return _HALF_BRACKET.sub(lambda m: f"（{m.group(1)}）", name)


def device_description(description, lang: str) -> str | None:
    """A block device's description as a page in ``lang`` prints it: the kit's own descriptions
    (:data:`iolab.core.recorded.DEVICE_DESCRIPTIONS`, iolab.devices.blockdev.model's words for a device without a
    model of its own) from their key in the locale's ``devices`` section (``loop device`` -> ``ループデバイス``,
    ``device-mapper iolab-hdd`` -> ``device-mapper（iolab-hdd）``), anything else (a drive's model, a user's own
    words) as stored; None stays None."""
    if description is None:
        return None
    known = recorded.read(description, recorded.DEVICE_DESCRIPTIONS, free=("name", "kind"))
    return text(f"devices.{known[0]}", lang, **known[1]) if known else str(description)


def with_note(label: str, note: str, lang: str) -> str:
    """``label`` with ``note`` added inside its closing bracket, never a second bracket after it:
    ``Throughput (MB/s)`` -> ``Throughput (MB/s, log scale)`` / ``スループット（MB/秒、対数目盛）``; ``IOPS`` ->
    ``IOPS (log scale)``; no label: the note alone in brackets. On a Japanese page a label's half-width bracket
    (a user's label, ``db (r2)``) becomes full-width with the note (:func:`page_name`): ``db（r2、規模0.01）``."""
    label = page_name((label or "").rstrip(), lang)
    if label.endswith(")"):
        return f"{label[:-1]}, {note})"
    if label.endswith("）"):
        return f"{label[:-1]}、{note}）"
    return f"{label}{paren(note, lang)}".strip()


def with_unit(number: str, unit: str) -> str:
    """``"712 MB/s"``; no space before a unit written in full-width characters (``"25.3秒"``, ``"4.2ミリ秒"``)."""
    if not unit:
        return str(number)
    return f"{number}{unit}" if _full_width(unit[0]) else f"{number} {unit}"


def _full_width(char: str) -> bool:
    import unicodedata
    return unicodedata.east_asian_width(char) in "WF"


def colon(lang: str) -> str:
    """The colon after a label: ``": "`` / ``"："`` (full-width, no space, in Japanese)."""
    return "：" if lang == "ja" else ": "


# ---------------------------------------------------------------------------
# numbers


def as_published(value) -> str:
    """A published figure printed the way the article printed it (``1214`` -> ``1,214``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    value = float(value)
    if value.is_integer():
        return f"{int(value):,}"
    return format(value, ",")


def number(value, *, digits: int | None = None) -> str:
    """A measured value with sensible precision (3 significant digits, at least integers)."""
    if value is None:
        return ""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(value):
        return ""
    if digits is None:
        digits = default_digits(value)
    return f"{value:,.{digits}f}"


def default_digits(value) -> int:
    """Decimals a measured value is written with, in tables, labels and prose alike: 0 from 100 up, 1 from 10,
    2 from 1, 3 below (an unknown value 0)."""
    magnitude = abs(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else 0
    return 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3


def factor(value: float) -> str:
    """A ratio for prose: ``2.54`` -> ``2.5``, ``32.6`` -> ``33``, ``8027.6`` -> ``8,028``."""
    if value is None or math.isnan(value):
        return ""
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def factor_range(low: float, high: float) -> str:
    """Two ratios for prose, ``2.5–3.0``; one when they round alike (``2.5``)."""
    lo, hi = factor(low), factor(high)
    return lo if lo == hi else f"{lo}–{hi}"


#: From this factor up, prose says a factor as orders of magnitude with the number in brackets, the one rule for
#: every sentence (issue 23 item 5): ``8,028x`` reads ``more than three orders of magnitude (8,028x)`` /
#: ``3桁以上（8,028倍）``. Tables and chart labels keep the number (:func:`factor`).
MAGNITUDE_FROM = 100


def magnitude(value) -> int | None:
    """The whole orders of magnitude prose says for a factor (``8027.6`` -> 3), None below :data:`MAGNITUDE_FROM`
    (or for no value)."""
    if value is None or math.isnan(value) or value < MAGNITUDE_FROM:
        return None
    return int(math.floor(math.log10(value) + 1e-9))


def times(value: float, lang: str, *, fraction: bool = False) -> str:
    """A factor for prose with its mark: ``2.5x`` / ``2.5倍``; from :data:`MAGNITUDE_FROM` up, ``more than three
    orders of magnitude (8,028x)`` / ``3桁以上（8,028倍）``. ``fraction``: the factor of a lower value (``lower
    {times}``): ``by a factor of 2.5`` / ``2.5分の1``, ``by more than two orders of magnitude (241x)`` /
    ``2桁以上（241分の1）``."""
    return times_range(value, value, lang, fraction=fraction)


def magnitude_key(key: str, value) -> str:
    """``key`` of a sentence whose factor may be said as orders of magnitude: ``KEY_magnitude`` when
    :func:`magnitude` says so for ``value`` (``8,028x as fast`` becomes ``... orders of magnitude (8,028x)
    faster``), else ``key``."""
    return f"{key}_magnitude" if magnitude(value) is not None else key


def times_range(low: float, high: float, lang: str, *, fraction: bool = False) -> str:
    """:func:`times` for a range of factors (``2.5–3.0x``): said as orders of magnitude when its low end is."""
    number = factor_range(low, high)
    if not number:
        return ""
    orders = magnitude(low)
    kind = "by" if fraction else "times"
    if orders is None:
        return text(f"factors.{kind}", lang, factor=number)
    more = low > 10 ** orders * (1 + 1e-9)
    words = catalog(lang)["factors"]["orders"]
    return text(f"factors.magnitude_{kind}", lang, factor=number, orders=words.get(f"o{orders}", str(orders)),
                more=text("factors.more", lang) if more else "")


def percent(value: float) -> str:
    """A fraction as a percentage for prose: ``0.019`` -> ``1.9``, ``0.12`` -> ``12``."""
    pct = round(abs(value) * 100, 6)  # 1 - 0.9 is 0.0999...: "10", not "10.0"
    return f"{pct:.1f}" if pct < 9.95 else f"{pct:.0f}"
