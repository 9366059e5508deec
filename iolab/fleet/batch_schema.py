"""The schema of a batch file (``iolab batch FILE``, see :mod:`iolab.fleet.batch`).

:class:`BatchFile` is what the loader checks a batch file against and what
``schemas/batch.schema.json`` is written from. Whether ``recipe`` and ``target``
are given (by the entry or by ``defaults``), entry names are unique and the
recipes, presets and tests exist is checked by the loader after it.
"""
import re
from typing import Annotated, List, Literal, Optional

from pydantic import Field, WithJsonSchema

from iolab.core.schema import Count, NonEmptyText, Schema, Seconds, SizeText, Text, check, one_or_many

ENTRY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


EntryName = Annotated[Text, check(lambda name: re.match(ENTRY_NAME, name), "names become file names: use letters, "
                                  "digits and . _ - only, got {value!r}"),
                      WithJsonSchema({"type": ["string", "number"], "pattern": ENTRY_NAME})]


class EntryFields(Schema):
    """What one execution of the measure notebook is given (``defaults:`` holds the same fields)."""
    recipe: Optional[one_or_many(NonEmptyText, min_length=0)] = Field(
        None, description="built-in recipe names or recipe files (relative to this file)")
    target: Optional[one_or_many(NonEmptyText, min_length=0)] = Field(
        None, description="directories, files, devices or emulated:NAME (relative to this file)")
    label: Optional[NonEmptyText] = Field(None, description="name in reports (default: the entry's name)")
    isolation: Optional[Literal["cgroup", "hugepages", "direct", "none"]] = None
    mem_limit: Optional[SizeText] = None
    size: Optional[SizeText] = None
    runtime: Optional[Seconds] = None
    repeat: Optional[Count] = None
    preset: Optional[NonEmptyText] = None
    tests: Optional[one_or_many(NonEmptyText, min_length=0)] = None
    confirm: Optional[NonEmptyText] = None
    timeout: Optional[float] = Field(None, gt=0, description="seconds the entry may take")
    lang: Optional[Literal["en", "ja"]] = Field(
        None, description="language of the notebook's headings, tables and findings (default: en)")


class BatchEntry(EntryFields):
    name: EntryName = Field(description="unique; letters, digits, . _ -")


class BatchFile(Schema):
    """Entries of the measure notebook, run one after the other by ``iolab batch``."""
    data: Optional[NonEmptyText] = Field(None, description="result store (relative to this file)")
    defaults: Optional[EntryFields] = None
    entries: List[BatchEntry] = Field(min_length=1)
