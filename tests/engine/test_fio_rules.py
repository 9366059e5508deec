"""fio's rules that iolab applies without running fio (issue 22, item 3: one rule per decision).

* Whether a job opens its files with O_DIRECT (:func:`iolab.engine.jobfile.rules.is_direct`): fio's bool
  options take an integer (parse.c ``check_int``: ``sscanf("%u")``, ``"%x"`` when "0x" is in the value),
  at most 1; ``direct`` and ``buffered`` store into one field, ``buffered`` negated, the later one wins.
* A section's kind (:func:`iolab.engine.jobfile.rules.is_global`): global when its name starts with "global".

Each table is checked against the fio installed here with ``fio --parse-only --debug=parse`` (fio parses the
job and runs nothing): whether fio accepts the value, and the value its parser stored, read from fio's own
parse trace.
"""
from __future__ import annotations

import re
import subprocess

import pytest

from cli_helpers import needs_fio
from iolab.core.errors import IolabError
from iolab.engine import fio, ioengines
from iolab.engine.jobfile import reader as jobreader
from iolab.engine.jobfile import rules as jobrules

REFUSED = "refused"

#: value of direct= -> what fio stores (None: fio accepts it and stores nothing), or REFUSED
SPELLINGS = {
    "1": 1, "0": 0, "01": 1, "00": 0, "+1": 1, " 1": 1, "1abc": 1, "1 0": 1,
    "0x1": 1, "0X1": 1, "0x0": 0, "0x": 0,
    "-1": -1, "-0": 0, "4294967295": -1, "4294967296": 0,  # glibc's %u wraps around: -1 is set, 2^32 is 0
    "0,1": 0, "1,0": 1, "1,": 1, "1:0": 1,  # fio splits at ',' (else ':', else '-'): the first piece is stored
    ",1": None, "x,1": None, "x:1": None, "x-1": None,  # a later piece parses: accepted, nothing stored
    "true": REFUSED, "false": REFUSED, "none": REFUSED, "yes": REFUSED, "": REFUSED,
    "2": REFUSED, "10x": REFUSED, "99999999999": REFUSED,  # above 1 ("10x" is hex 0x10)
}


def decided(value, option="direct"):
    try:
        return jobrules.fio_bool(value, option)
    except IolabError:
        return REFUSED


@pytest.mark.parametrize("value, stored", SPELLINGS.items())
def test_a_bool_value_is_read_as_fios_parser_reads_it(value, stored):
    assert decided(value) == stored


@pytest.mark.parametrize("value, stored", [(True, 1), (False, 0), (1, 1), (0, 0), (2, REFUSED), (None, REFUSED)])
def test_python_values_are_read_as_iolab_writes_them_into_a_job(value, stored):
    assert decided(value) == stored


def test_a_refused_value_names_the_option_the_value_and_the_source():
    with pytest.raises(IolabError) as caught:
        jobrules.is_direct({"direct": "true"}, source="recipes/x.yaml: SEQ1M")
    assert "direct='true'" in str(caught.value) and "recipes/x.yaml: SEQ1M" in str(caught.value)
    with pytest.raises(IolabError, match="without a value"):
        jobrules.is_direct([("buffered", None)])


@needs_fio
def test_a_bare_direct_is_refused_as_fio_refuses_it(tmp_path):
    returncode, _ = _fio_parse("[j]\nfilename=/dev/null\nsize=1m\ndirect\n", tmp_path)
    (option,) = jobreader.written_sections("[j]\ndirect\n")[0].options
    assert returncode != 0 and option.value is None and decided(option.value) == REFUSED


#: ([global] options, job options) -> O_DIRECT
LAYERS = [
    ({}, {}, False),                                        # fio's default: buffered
    ({}, {"direct": "1"}, True),
    ({}, {"buffered": "0"}, True),
    ({}, {"buffered": "1"}, False),
    ({}, [("direct", "1"), ("buffered", "1")], False),      # one field: the later option wins
    ({}, [("buffered", "1"), ("direct", "1")], True),
    ({"direct": "1"}, {}, True),                             # the [global] section applies first
    ({"direct": "1"}, {"buffered": "1"}, False),
    ({"buffered": "0"}, {"direct": "0"}, False),
    ({"direct": "1"}, {"direct": "x,1"}, True),              # stores nothing: the global's value stays
    ({}, {"direct": "-1"}, True),
    ({}, {"buffered": "-1"}, False),                         # stored -1, negated: buffered
    ({"ioengine": "libaio", "direct": 1}, {"bs": "4k", "direct": True}, True),  # a recipe's values
]


@pytest.mark.parametrize("global_options, job_options, direct", LAYERS)
def test_direct_and_buffered_set_one_flag_the_later_one_wins(global_options, job_options, direct):
    assert jobrules.is_direct(global_options, job_options) is direct


def _job(global_options, job_options) -> str:
    """The job as iolab writes it (each table row names an option once per section)."""
    return fio.render_job("j", dict(job_options), {**global_options, "filename": "/dev/null", "size": "1m"})


def _fio_parse(text: str, tmp_path) -> tuple[int, list]:
    """fio's exit status and, from its parse trace, each direct/buffered option it handled with the value its
    parser stored (None: none stored): ``[(option, stored)]`` in fio's order."""
    job = tmp_path / "j.fio"
    job.write_text(text)
    proc = subprocess.run(["fio", "--parse-only", "--debug=parse", str(job)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    handled, current = [], None
    for line in (proc.stdout + proc.stderr).splitlines():
        start = re.search(r" handle_option=(\w+), ptr=", line)
        if start:
            current = start.group(1) if start.group(1) in jobrules.DIRECT_OPTIONS else None
            if current:
                handled.append([current, "pending"])
            continue
        result = re.search(r"  ret=(\d+), out=(-?\d+)", line)
        if current and result and handled[-1][1] == "pending":  # the first piece is the one stored
            ret, out = int(result.group(1)), int(result.group(2))
            handled[-1][1] = out if ret == 0 and out <= 1 else None  # bool options: max 1
    return proc.returncode, [tuple(h) for h in handled]


def _fios_decision(handled: list) -> bool:
    odirect = 0  # options.c: direct and buffered both store into odirect, buffered negated
    for option, stored in handled:
        if stored is not None:
            odirect = int(not stored) if option == "buffered" else stored
    return odirect != 0


@needs_fio
@pytest.mark.parametrize("value, stored", SPELLINGS.items())
def test_the_spellings_table_is_what_fio_does(value, stored, tmp_path):
    returncode, handled = _fio_parse(f"[j]\nfilename=/dev/null\nsize=1m\ndirect={value}\n", tmp_path)
    if stored == REFUSED:
        assert returncode != 0
    else:
        assert returncode == 0 and handled == [("direct", stored)]


@needs_fio
@pytest.mark.parametrize("global_options, job_options, direct", LAYERS)
def test_the_layers_table_is_what_fio_does_and_what_the_engine_record_reads(global_options, job_options, direct,
                                                                            tmp_path):
    text = _job(global_options, job_options)
    returncode, handled = _fio_parse(text, tmp_path)
    assert returncode == 0 and _fios_decision(handled) is direct
    assert ioengines.of_job_text(text)["j"].direct is direct  # fio's view of the file, read by jobreader


#: section name -> global (fio's init.c: strncmp(name, "global", 6))
SECTION_KINDS = {"global": True, "globalX": True, "global2": True, "global-more": True,
                 "Global": False, "xglobal": False, "glob": False, "job": False}


@pytest.mark.parametrize("name, kind", SECTION_KINDS.items())
def test_a_section_is_global_when_its_name_starts_with_global(name, kind):
    assert jobrules.is_global(name) is kind


@needs_fio
@pytest.mark.parametrize("name, kind", SECTION_KINDS.items())
def test_the_section_kinds_are_fios(name, kind):
    """fio's command-line view names each job (``--name=``) and no global section."""
    shown = subprocess.run(["fio", "--showcmd", "-"], input=f"[{name}]\nbs=8k\n[j]\nrw=read\n",
                           capture_output=True, text=True, timeout=60).stdout
    assert (f"--name={name} " not in shown) is kind
    assert [s.is_global for s in jobreader.sections(f"[{name}]\nbs=8k\n[j]\nrw=read\n")] == [kind, False]


@needs_fio
def test_a_job_read_without_fio_takes_the_section_kind_and_direct_from_jobreader():
    """A job loading an external engine is read from its lines (fio would load the engine to read it):
    ``[global2]`` is global there too, and its direct reaches the job after it."""
    text = "[global2]\ndirect=1\niodepth=4\n[a]\nioengine=/opt/x.so\n[b]\nioengine=libaio\nbuffered=1\n"
    sections = jobreader.written_sections(text)
    assert [(s.name, s.is_global) for s in sections] == [("global2", True), ("a", False), ("b", False)]
    assert ioengines.of_job_text(text) == {"a": ioengines.JobEngine("/opt/x.so", True, 4),
                                           "b": ioengines.JobEngine("libaio", False, 4)}
