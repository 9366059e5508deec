"""The parts of a measured pass that name things (iolab.engine.fio.passes): the progress line's label and where
each target's temperatures go. One pass shape serves a run's targets one after another and --simultaneous, so
these names must come out as each had them."""
from __future__ import annotations

import types
from pathlib import Path

from iolab.engine.fio import passes

STEP = types.SimpleNamespace(id="seq-read")


def test_the_label_names_the_pass_and_the_targets_only_when_there_are_several():
    assert passes.pass_label(STEP, 2, 3) == "seq-read 2/3"
    assert passes.pass_label(STEP, 0, 3) == "seq-read warm-up"
    assert passes.pass_label(STEP, 1, 5, "sdb") == "seq-read @sdb 1/5"
    assert passes.pass_label(STEP, 0, 5, "sda+sdb") == "seq-read @sda+sdb warm-up"


def test_one_target_keeps_its_temperatures_beside_the_raw_file_and_several_one_file_each():
    raw = Path("/run/raw/seq-read-1.json")
    one, several = [types.SimpleNamespace(name="sda")], [types.SimpleNamespace(name=n) for n in ("sda", "sdb")]
    assert passes.temperature_files(raw, one) == [raw]
    assert passes.temperature_files(raw, several) == [Path("/run/raw/seq-read-1.sda.json"),
                                                      Path("/run/raw/seq-read-1.sdb.json")]
    assert passes.pass_suffix(0) == "-warmup.json" and passes.pass_suffix(2) == "-2.json"
