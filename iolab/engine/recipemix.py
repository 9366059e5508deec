"""``--mix R70`` and CrystalDiskMark's order for recipes (:mod:`iolab.engine.recipes`).

CrystalDiskMark 8 and KDiskMark run every row's read, then every row's write, then (with
a "+Mix" profile) every row's mix at one read share, R10 to R90 in steps of 10, R70 by
default. A recipe with ``order: directions`` runs its steps in that order; ``--mix``
adds each chosen test's mixed counterpart, the recipe's test named ``MIX-<test>``.
"""
from __future__ import annotations

import copy
import re

from iolab.core.errors import IolabError

MIXED_RW = ("rw", "readwrite", "randrw")
#: ``--mix R<n>``: the read share of a mixed test, CrystalDiskMark's and KDiskMark's choices R10..R90.
MIX_RATIOS = tuple(range(10, 100, 10))


def parse_mix(value, *, context: str = "--mix") -> int:
    """``R70`` -> 70: the read percentage of a mixed test, R10..R90 in steps of 10 as CrystalDiskMark offers."""
    text = str(value).strip()
    found = re.fullmatch(r"[Rr](\d{1,3})(?:%?/[Ww]\d{1,3}%?)?", text)
    if not found:
        raise IolabError(f"{value!r} is not a mix ratio: write R<read %>, e.g. R70 (70% reads, 30% writes)",
                         context=context, hint="choices: " + ", ".join(f"R{r}" for r in MIX_RATIOS))
    ratio = int(found.group(1))
    write = re.search(r"/[Ww](\d+)", text)
    if ratio not in MIX_RATIOS or (write and int(write.group(1)) != 100 - ratio):
        raise IolabError(f"{value!r} is not one of CrystalDiskMark's mix ratios (R10 to R90 in steps of 10)",
                         context=context, hint="choices: " + ", ".join(f"R{r}" for r in MIX_RATIOS))
    return ratio


def with_mixes(chosen: list, every: list, ratio: int, context: str) -> list:
    """``chosen`` plus each test's ``MIX-<name>`` counterpart (from ``every``), all mixes at ``ratio``% reads."""
    by_name = {t.name: t for t in every}
    tests = [copy.deepcopy(t) for t in chosen]
    present = {t.name for t in tests}
    for test in list(tests):
        if any(rw in MIXED_RW for rw in test.rw) or f"MIX-{test.name}" in present:
            continue
        counterpart = by_name.get(f"MIX-{test.name}")
        if counterpart is None:
            raise IolabError(f"test {test.name!r} has no mixed counterpart 'MIX-{test.name}'", context=context)
        tests.append(copy.deepcopy(counterpart))
        present.add(counterpart.name)
    for test in tests:
        if any(rw in MIXED_RW for rw in test.rw):
            test.rwmixread = ratio
    return tests


def direction_rank(step) -> int:
    """0 for reads, 1 for writes (and trims), 2 for mixes: CrystalDiskMark's order."""
    if step.rw in MIXED_RW:
        return 2
    return 0 if step.rw in ("read", "randread") else 1
