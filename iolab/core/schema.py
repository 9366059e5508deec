"""Declarative schemas of the YAML files people write (recipes, setup plans, inventories, batch files).

Each file's shape is a pydantic model built on :class:`Schema` (strict types, unknown
keys refused); :func:`validate` checks a mapping against one and turns pydantic's
:class:`~pydantic.ValidationError` into one :class:`IolabError` naming the file and the
field path (``recipes/cdm.yaml: tests[2] (RND4K).bs: not a size: '4X'``). The shared
field types (:data:`Size`, :data:`Seconds`, :data:`Text`, :func:`one_or_many`) read
what :mod:`iolab.core.units` reads, and describe it in the JSON Schema that
:mod:`iolab.core.schemas` writes for editors.
"""
from __future__ import annotations

from typing import Annotated, Any, List

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, WithJsonSchema
from pydantic import model_validator
from pydantic_core import PydanticCustomError

from iolab.core.errors import IolabError
from iolab.core.units import parse_seconds, parse_size

SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*[kmgtpKMGTP]?([iI]?[bB])?\s*$"
SECONDS_PATTERN = r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"


class Schema(BaseModel):
    """A mapping of known fields: strict types, an unknown field named with the allowed ones."""
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data):
        if isinstance(data, dict):
            allowed = {f.alias or name for name, f in cls.model_fields.items()}
            unknown = sorted(set(map(str, data)) - allowed)
            if unknown:
                raise PydanticCustomError("unknown_field", "unknown field",
                                          {"field": unknown[0], "allowed": ", ".join(sorted(allowed))})
        return data


def _units(parse):
    def check(value):
        if value is None:
            return value
        try:
            return parse(value)
        except IolabError as exc:
            raise ValueError(str(exc)) from None
    return check


def _text(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _listify(value):
    return value if isinstance(value, list) else [value]


#: Bytes, from ``4096``, ``"4k"`` or ``"1G"`` (fio's suffixes: powers of 1024).
Size = Annotated[int, BeforeValidator(_units(parse_size)), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": SIZE_PATTERN}],
     "description": "bytes, or a number with K, M, G, T (powers of 1024), e.g. 512M"})]
#: Seconds, from ``5``, ``"5s"``, ``"250ms"`` or ``"2m"``.
Seconds = Annotated[float, BeforeValidator(_units(parse_seconds)), WithJsonSchema(
    {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": SECONDS_PATTERN}],
     "description": "seconds, or a number with ms, s, m or h, e.g. 5s"})]
#: Text; a number written where text is expected is read as its text.
Text = Annotated[str, BeforeValidator(_text), WithJsonSchema({"type": ["string", "number"]})]
def _not_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


#: Text that says something.
NonEmptyText = Annotated[Text, AfterValidator(_not_empty), WithJsonSchema({"type": ["string", "number"], "minLength": 1})]
#: A size kept as written (``"512M"``), checked as :data:`Size` reads it.
def _size_text(value: str) -> str:
    _units(parse_size)(value)
    return value


SizeText = Annotated[Text, AfterValidator(_size_text), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": SIZE_PATTERN}]})]
#: A whole number >= 1.
def _count(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a whole number >= 1, got {value!r}")
    return value


Count = Annotated[int, BeforeValidator(_count), WithJsonSchema({"type": "integer", "minimum": 1})]
def _scalar(value):
    if isinstance(value, (dict, list)):
        raise ValueError(f"must be one value (text, a number or true/false), got {value!r}")
    return value


#: fio's (and other tools') option values: one scalar each.
Scalar = Annotated[Any, BeforeValidator(_scalar), WithJsonSchema({"type": ["string", "number", "boolean", "null"]})]


def check(test, message: str) -> AfterValidator:
    """A field rule: a value (not None) that ``test`` refuses is an error, ``message`` naming it as ``{value}``."""
    def run(value):
        if value is not None and not test(value):
            raise ValueError(message.format(value=value))
        return value
    return AfterValidator(run)


def one_or_many(item_type, **list_constraints):
    """A list of ``item_type``; a single value is read as a list of one."""
    item = TypeAdapter(item_type).json_schema()
    constraints = {"min_length": 1, **list_constraints}
    return Annotated[List[item_type], BeforeValidator(_listify), Field(**constraints), WithJsonSchema(
        {"anyOf": [item, {"type": "array", "items": item, "minItems": constraints["min_length"]}]})]


def validate(model: type, data, source: str, *, names: bool = True, key_in_context: bool = False, at: str = ""):
    """``data`` checked against ``model``; the first problem as an :class:`IolabError` naming ``source``
    and the field path. ``names``: an item of a list that has a ``name`` is called ``items[2] (name)``;
    ``key_in_context``: an unknown key is named in the path (``loop_devices[0].sise: unknown key``);
    ``at``: where ``data`` sits in its file (``options`` of a recipe)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(exc.errors(include_url=False)[0], data, source, names=names,
                    key_in_context=key_in_context, at=at) from None


def field_path(loc, data, *, names: bool = True) -> str:
    """``("tests", 2, "bs")`` -> ``tests[2] (RND4K).bs`` (the name read from ``data``)."""
    path, node = "", data
    for index, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            about_name = tuple(loc[index + 1:]) == ("name",)  # a bad name is not repeated as the item's name
            if names and not about_name and isinstance(node, dict) and node.get("name") not in (None, ""):
                path += f" ({node['name']})"
        elif part != "[key]":  # a mapping's key: the path already names it
            path += f".{part}" if path else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return path


_PLAIN = {"int_type": "must be a whole number", "bool_type": "must be true or false",
          "string_type": "must be text", "float_type": "must be a number", "list_type": "must be a list",
          "dict_type": "must be a mapping", "model_type": "must be a mapping", "model_attributes_type":
          "must be a mapping", "too_short": "must be a non-empty list"}


def error(err: dict, data, source: str, *, names: bool = True, key_in_context: bool = False,
          at: str = "") -> IolabError:
    """One pydantic error (a dict of ``ValidationError.errors()``) as an :class:`IolabError`."""
    loc, kind, ctx = tuple(err["loc"]), err["type"], err.get("ctx") or {}
    if at:
        loc, data = (at,) + loc, {at: data}
    if kind == "missing" and key_in_context:
        return IolabError("missing (required)", context=_where(source, loc, data, names))
    if kind == "missing":
        return IolabError(f"missing required field {loc[-1]!r}", context=_where(source, loc[:-1], data, names))
    if kind == "unknown_field":
        if key_in_context:
            return IolabError(f"unknown key (known: {ctx['allowed']})",
                              context=_where(source, loc + (ctx["field"],), data, names))
        return IolabError(f"unknown field {ctx['field']!r} (allowed: {ctx['allowed']})",
                          context=_where(source, loc, data, names))
    value = err.get("input")
    if kind == "value_error":
        message = str(ctx.get("error", err["msg"]))
    elif kind == "literal_error":
        message = f"must be one of {ctx['expected'].replace(' or ', ', ').replace(chr(39), '')}, got {value!r}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(iter(ctx.values()))
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        message = f"must be {sign} {bound}, got {value!r}"
    elif kind in _PLAIN:
        message = f"{_PLAIN[kind]}, got {value!r}" if kind != "too_short" else _PLAIN[kind]
    else:
        message = err["msg"][0].lower() + err["msg"][1:]
    return IolabError(message, context=_where(source, loc, data, names))


def _where(source: str, loc, data, names: bool) -> str:
    path = field_path(loc, data, names=names)
    return f"{source}: {path}" if path else source
