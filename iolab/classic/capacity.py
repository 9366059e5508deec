"""How much the flash recipes write when nothing is declared: the target's capacity, or what stands for it.

SNIA's PTS preconditions with twice a drive's capacity and a review's sustained write fills the drive;
``steady-state`` and ``sustained-write`` do the same by default (issue 25 items 3 and 4). What a
target's capacity is, :func:`capacity` says and records why (its ``source``):

* ``device``: a block device, its size in bytes (the whole device is written);
* ``emulated``: an emulated device, the size it was made of (``--size``: iolab makes it that big);
* ``file``: a file target, the file's size (an empty file has none: ``file_empty``, the test area);
* ``dir``: a directory on a file system holds iolab's test file of ``--size`` (the test area): a file
  system's capacity is never written, it would fill it.

A declared amount (``--size`` for the sustained write, ``--precondition-size`` for preconditioning)
wins over the capacity; :func:`sustained_amount` says which was used and why. Nothing here runs
anything but reading a size.
"""
from __future__ import annotations

import dataclasses

from iolab.core import files

SOURCES = ("device", "emulated", "file", "file_empty", "dir")


@dataclasses.dataclass(frozen=True)
class Capacity:
    """A target's capacity in bytes and where the figure comes from (one of :data:`SOURCES`)."""

    bytes: int
    source: str


@dataclasses.dataclass(frozen=True)
class Amount:
    """What a write moves on one target: ``bytes``, ``why`` (``declared`` or ``capacity``) and the capacity."""

    bytes: int
    why: str
    capacity: Capacity

    def record(self) -> dict:
        """For the manifest."""
        return {"bytes": self.bytes, "why": self.why, "capacity": self.capacity.bytes,
                "capacity_source": self.capacity.source}


def capacity(target, area: int) -> Capacity:
    """``target``'s capacity (:class:`Capacity`); ``area`` is the test area (``--size``), what a directory,
    an empty file and an emulated device not yet made stand for."""
    if target.kind == "block":
        return Capacity(files.size_of(target.path), "device")
    if target.kind == "emulated":
        device = target.emulated
        if device is not None and getattr(device, "mountpoint", None):  # a file system: its test file
            return Capacity(area, "dir")
        return Capacity(int(getattr(device, "size", None) or area), "emulated")
    if target.kind == "file":
        size = files.size_of(target.path)
        return Capacity(size, "file") if size > 0 else Capacity(area, "file_empty")
    return Capacity(area, "dir")


def sustained_amount(target, recipe) -> Amount:
    """What the sustained write moves on ``target``: ``--size`` when the command line declared it, else
    the target's :func:`capacity`."""
    found = capacity(target, recipe.size)
    if getattr(recipe, "size_declared", False):
        return Amount(recipe.size, "declared", found)
    return Amount(found.bytes, "capacity", found)
