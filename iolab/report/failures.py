"""Failed tests of the runs in a report: which test, on which system, and the error that stopped it.

A run that met a fault (an I/O error from the device, fio refusing a job, the
watchdog) ends ``failed`` and keeps what it measured; its manifest lists every
test with its own status and error. The run's one-line reason joins them all;
this module gives each failed test its own sentence and table row, in ``en``
or ``ja``, with the error worded as fio (or iolab) wrote it.

Computation (:func:`failed_tests`, a tidy frame) is separate from
presentation (:func:`failures_table`, :func:`sentences`, :func:`markdown`).
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import pandas as pd

from iolab.report import i18n
from iolab.report.tables import DASH, Table

#: A test's status that means it ran and did not finish well (``skipped``/``pending`` never ran).
FAILED_STATUSES = ("failed", "interrupted", "running")

#: A test's status that means it never ran (the run stopped before it: a fault, Ctrl-C, a missing tool).
NOT_RUN_STATUSES = ("pending", "skipped")

#: ``test`` and ``direction``: the recipe's test and its direction (the reader's words, :func:`label`); ``name``: the
#: step's id in the manifest (``SEQ1M-Q8T1-write``), kept for looking the run up.
COLUMNS = ("system", "run_id", "host", "test", "direction", "name", "status", "reps", "error")


def _records(manifests) -> list[dict]:
    if isinstance(manifests, pd.DataFrame):
        return manifests.to_dict("records")
    return list(manifests)


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value).strip() or None


def _names(records: list[dict], names: Sequence[str] | None) -> list[str]:
    if names is not None:
        return [str(n) for n in names]
    return [_text(r.get("system_name")) or _text(r.get("label")) or _text(r.get("host")) or "?" for r in records]


def _test_of(record: dict) -> tuple[str, str]:
    """A manifest's test record as (test, direction): its recipe test (else its id) and ``rw``."""
    name, direction = str(record.get("name") or "?"), str(record.get("rw") or "")
    test = record.get("test") or (name[:-len(direction) - 1] if direction and name.endswith("-" + direction) else name)
    return str(test), direction


#: CrystalDiskMark's way of naming a test (``RND4K-Q32T1``), whatever the case a step's id wrote it in.
_CDM_NAME = re.compile(r"(?i)^(seq|rnd)\d+[km]-q\d+t\d+$")


def label(test: str, direction: str, lang: str) -> str:
    """A test as the tables name it (``SEQ1M-Q8T1 write`` / ``SEQ1M-Q8T1 書き込み``), never a step's raw id: a
    CrystalDiskMark name in another case (``rnd4k-q32t1``) as CrystalDiskMark writes it, a test the locale knows
    under another case by its known name."""
    known = i18n.catalog(lang).get("tests") or {}
    if _CDM_NAME.match(test):
        test = test.upper()
    elif test not in known:
        test = next((k for k in known if str(k).lower() == test.lower()), test)
    return i18n.test_label(test, direction, lang)


def failed_tests(manifests: pd.DataFrame | Sequence[dict], *, names: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per test of the runs in ``manifests`` that ran and failed (columns :data:`COLUMNS`).

    ``names`` names the runs' systems (default the manifest's ``system_name``,
    else its label or host). A run that failed before any test (its tests all
    pending) has no row here: its reason is the run's own.
    """
    rows = []
    records = _records(manifests)
    for name, record in zip(_names(records, names), records):
        tests = record.get("tests")
        if not isinstance(tests, list):
            continue
        for test in tests:
            status = test.get("status")
            if status not in FAILED_STATUSES:
                continue
            recipe_test, direction = _test_of(test)
            rows.append({"system": name, "run_id": record.get("run_id"), "host": record.get("host"),
                         "test": recipe_test, "direction": direction, "name": test.get("name"), "status": status,
                         "reps": test.get("reps"), "error": _text(test.get("error"))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def failures_table(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
                   names: Sequence[str] | None = None) -> Table:
    """Failed tests as a table: test, system, status, error (empty frame when none failed)."""
    i18n.check_lang(lang)
    found = failed_tests(manifests, names=names)
    caption = i18n.text("failures.caption", lang)
    if found.empty:
        return Table(pd.DataFrame(), caption=caption, notes=[i18n.text("failures.none", lang)])
    frame = pd.DataFrame({
        i18n.text("failures.test", lang): [label(t, d, lang) for t, d in zip(found["test"], found["direction"])],
        i18n.text("failures.system", lang): found["system"],
        i18n.text("failures.status", lang): [i18n.label(s, lang, section="status") for s in found["status"]],
        i18n.text("failures.error", lang): [e or i18n.text("failures.no_error", lang) for e in found["error"]],
    }).set_index(i18n.text("failures.test", lang))
    return Table(frame.fillna(DASH), caption=caption, notes=[i18n.text("failures.kept", lang)], data=found)


def _code(text: str) -> str:
    """``text`` as a Markdown code span (an error may hold ``*`` or ``_``; backticks cannot nest)."""
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def sentences(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
              names: Sequence[str] | None = None) -> list[str]:
    """One sentence per failed test, named as the tables name it: "**SEQ1M-Q8T1 write** on lab failed: `fio: ...
    Input/output error ...`"."""
    i18n.check_lang(lang)
    found = failed_tests(manifests, names=names)
    out = []
    for row in found.itertuples(index=False):
        error = _code(row.error) if row.error else i18n.text("failures.no_error", lang)
        out.append(i18n.text("failures.sentence", lang, test=label(row.test, row.direction, lang), system=row.system,
                             status=i18n.label(row.status, lang, section="status"), error=error))
    return out


def markdown(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
             names: Sequence[str] | None = None) -> str:
    """A report section ("### Failed tests", one bullet per failed test), or "" when none failed."""
    found = sentences(manifests, lang=lang, names=names)
    if not found:
        return ""
    return "\n".join(["### " + i18n.text("failures.heading", lang), "",
                      *(f"- {s}" for s in found), "", i18n.text("failures.kept", lang)])


def not_run_tests(manifests: pd.DataFrame | Sequence[dict], *, names: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per test of an unfinished run that never ran (``pending``/``skipped``: the run stopped first),
    with the columns ``system, run_id, test, direction, name`` (``name``: the manifest's test id)."""
    rows = []
    records = _records(manifests)
    for name, record in zip(_names(records, names), records):
        tests = record.get("tests")
        if str(record.get("status")) == "completed" or not isinstance(tests, list):
            continue
        for test in tests:
            if test.get("status") in NOT_RUN_STATUSES:
                recipe_test, direction = _test_of(test)
                rows.append({"system": name, "run_id": record.get("run_id"), "test": recipe_test,
                             "direction": direction, "name": test.get("name")})
    return pd.DataFrame(rows, columns=["system", "run_id", "test", "direction", "name"])


def planned_tests(manifests: pd.DataFrame | Sequence[dict]) -> list[str]:
    """The tests the runs set out to run (their manifests' test list, in order; not only those that measured)."""
    found: dict[str, None] = {}
    for record in _records(manifests):
        tests = record.get("tests")
        if isinstance(tests, list):
            found.update((str(t.get("test") or t.get("name")), None) for t in tests)
    return list(found)


def coverage_sentences(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
                       names: Sequence[str] | None = None) -> list[str]:
    """What the unfinished runs among ``manifests`` lack, one sentence each: every failed test with fio's
    (or iolab's) error, the tests the run never reached, and a run that measured nothing with its reason."""
    return [sentence for _kind, sentence in _coverage(manifests, lang=lang, names=names)]


def _coverage(manifests, *, lang: str, names) -> list[tuple[str, str]]:
    """:func:`coverage_sentences` as (kind, sentence): kind ``failed``, ``not_run`` or ``nothing``."""
    i18n.check_lang(lang)
    records = _records(manifests)
    names = _names(records, names)
    out = []
    for name, record in zip(names, records):
        if str(record.get("status")) == "completed":
            continue
        one = [record]
        failed = sentences(one, lang=lang, names=[name])
        skipped = not_run_tests(one, names=[name])
        measured_nothing = record.get("has_results") is False or (
            isinstance(record.get("tests"), list) and all(t.get("status") in NOT_RUN_STATUSES for t in record["tests"]))
        if measured_nothing and not failed:
            reason = _text(record.get("reason"))
            out.append(("nothing", i18n.text(
                "failures.measured_nothing", lang, system=name, run=record.get("run_id"), host=record.get("host"),
                status=i18n.label(str(record.get("status")), lang, section="status"),
                reason=_code(reason) if reason else i18n.text("failures.no_error", lang))))
            continue
        out.extend(("failed", s) for s in failed)
        if not skipped.empty and not measured_nothing:
            labels = [label(t, d, lang) for t, d in zip(skipped["test"], skipped["direction"])]
            out.append(("not_run", i18n.text("failures.not_run", lang, system=name, n=len(labels),
                                             tests=i18n.join_capped(labels, lang))))
    return out


def coverage_markdown(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
                      names: Sequence[str] | None = None, level: int = 3) -> str:
    """A section ("### Failed tests and tests not run"), one bullet per :func:`coverage_sentences`; "" when
    every run completed. Shown beside the tables whose dashes it explains. Runs that measured nothing only
    (no test failed, none was measured): headed as such, without the note on the results a fault leaves."""
    found = _coverage(manifests, lang=lang, names=names)
    if not found:
        return ""
    nothing = all(kind == "nothing" for kind, _ in found)
    heading = i18n.text("failures.nothing_heading" if nothing else "failures.coverage_heading", lang)
    return "\n".join(["#" * level + " " + heading, "", *(f"- {s}" for _, s in found),
                      *([] if nothing else ["", i18n.text("failures.kept", lang)])])
