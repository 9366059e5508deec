"""Failed tests in the report: each one named with its error, in en and ja (iolab.report.failures).

The run is real: fio refuses the second of three tests (its file is smaller
than its block size, "fio: size too small"), so the run ends failed with the
first and third tests measured. The report is rendered with papermill as
``iolab report`` does, and must name the failed test and fio's error in a
sentence of its own, in both languages. The lab's dm-error run
(tests/lab/test_lab_faults.py) proves the same manifest fields for a real EIO.
"""
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from iolab.engine import runner
from iolab.core.errors import IolabError
from iolab.report import failures, i18n, notebooks as report

from cli_helpers import ROOT, needs_fio

FIXTURES = ROOT / "tests" / "fixtures" / "data"
NO_SPACE = FIXTURES / "ssd-node" / "20261120T223550Z-quick-6c0d"  # SEQ1M-Q8T1-write: ENOSPC
RECIPE = """
name: faulty
description: three short reads; fio refuses the second (a 4 KiB file for 1 MiB blocks)
isolation: none
defaults: {size: 4M, runtime: 1}
fio: {ioengine: psync}
tests:
  - {name: BEFORE, rw: read, bs: 1M}
  - {name: REFUSED, rw: read, bs: 1M, fio: {size: 4k}}
  - {name: AFTER, rw: read, bs: 1M}
"""


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory) -> Path:
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    base = tmp_path_factory.mktemp("failed-run")
    recipe = base / "faulty.yaml"
    recipe.write_text(RECIPE)
    target = base / "target"
    target.mkdir()
    result = runner.run(str(recipe), [str(target)], data_dir=base / "data", label="faulty-disk", progress=False)
    assert result.manifest["status"] == "failed"
    return Path(result.path)


def test_failed_tests_lists_each_failed_test_with_its_error():
    manifests = report.select(runs=[NO_SPACE]).manifests
    found = failures.failed_tests(manifests)
    # the skipped tests never ran: not failures; the step's id kept, the test and direction named apart
    assert found[["test", "direction", "name"]].values.tolist() == [["SEQ1M-Q8T1", "write", "SEQ1M-Q8T1-write"]]
    row = found.iloc[0]
    assert row["status"] == "failed" and row["system"] == manifests["system_name"].iloc[0]
    assert "No space left on device: write offset=61865984" in row["error"]
    table = failures.failures_table(manifests, lang="ja")
    assert table.caption == "失敗したテストとエラー"
    assert table.frame.loc["SEQ1M-Q8T1の書き込み", "状態"] == "失敗"
    assert "No space left on device" in table.frame.loc["SEQ1M-Q8T1の書き込み", "エラー"]


@pytest.mark.parametrize("lang, named", [("en", "**SEQ1M-Q8T1 write** on box failed"),
                                          ("ja", "boxの**SEQ1M-Q8T1の書き込み**：「失敗」で終わった")])
def test_failure_lists_name_the_test_as_the_tables_do_not_its_step_id(lang, named):
    """A step's id (``SEQ1M-Q8T1-write``, an original's ``rnd4k-q32t1``) is the run's file name, not the reader's:
    the sentences, the table and the tests not run say the test and its direction in the page's language."""
    manifest = {"run_id": "r1", "host": "h", "label": "box", "status": "failed", "tests": [
        {"name": "SEQ1M-Q8T1-write", "test": "SEQ1M-Q8T1", "rw": "write", "status": "failed", "error": "fio: boom"},
        {"name": "rnd4k-q32t1", "rw": "read", "status": "failed", "error": "fio: boom"},
        {"name": "RND4K-Q1T1-write", "rw": "write", "status": "skipped"}]}
    said = failures.sentences([manifest], lang=lang)
    assert said[0].startswith(named) if lang == "en" else said[0].startswith(named.split("：")[0])
    known = i18n.test_label("RND4K-Q32T1", "read", lang)  # the locale's name for the lowercase id
    assert f"**{known}**" in said[1] and "rnd4k-q32t1" not in said[1]
    table = failures.failures_table([manifest], lang=lang)
    assert list(table.frame.index) == [i18n.test_label("SEQ1M-Q8T1", "write", lang), known]
    coverage = failures.coverage_markdown([manifest], lang=lang)
    assert i18n.test_label("RND4K-Q1T1", "write", lang) in coverage
    assert not any(i in coverage for i in ("SEQ1M-Q8T1-write", "rnd4k-q32t1", "RND4K-Q1T1-write"))


def test_a_completed_run_has_no_failure_section():
    manifests = report.select(FIXTURES, host="hdd-node", recipe="crystaldiskmark").manifests
    assert (manifests["status"] == "completed").all()
    assert failures.failed_tests(manifests).empty
    assert failures.markdown(manifests, lang="en") == "" and failures.sentences(manifests, lang="ja") == []
    assert failures.failures_table(manifests, lang="en").notes == ["No test failed."]


def test_the_sentence_quotes_the_error_as_code_and_survives_markdown_characters():
    manifest = {"run_id": "r1", "host": "h", "label": "box", "tests": [
        {"name": "RND4K_Q1", "status": "failed", "reps": 1, "error": "fio: io_u error on `/dev/dm-0`: Input/output error"},
        {"name": "AFTER", "status": "completed", "reps": 1}, {"name": "LATER", "status": "skipped", "reps": 0}]}
    assert failures.sentences([manifest], lang="en") == [
        "**RND4K_Q1** on box failed: `fio: io_u error on '/dev/dm-0': Input/output error`."]
    assert failures.sentences([manifest], lang="ja") == [
        "boxの**RND4K_Q1**：「失敗」で終わった（`fio: io_u error on '/dev/dm-0': Input/output error`）。"]
    with pytest.raises(IolabError, match="unknown language 'fr'"):
        failures.sentences([manifest], lang="fr")


@needs_fio
@pytest.mark.parametrize("lang, sentence", [
    ("en", r"<strong>REFUSED read</strong> on faulty-disk failed: <code>[^<]*fio: size too small[^<]*</code>\."),
    ("ja", r"faulty-diskの<strong>REFUSEDの読み込み</strong>：「失敗」で終わった（<code>[^<]*fio: size too small[^<]*</code>）。"),
])
def test_the_report_of_a_failed_run_names_the_failed_test_and_its_error(failed_run, tmp_path, lang, sentence):
    manifest = json.loads((failed_run / "manifest.json").read_text())
    assert [t["status"] for t in manifest["tests"]] == ["completed", "failed", "completed"]
    measured = pd.read_csv(failed_run / "results.csv").set_index("test")
    assert measured.loc["BEFORE", "valid"] and measured.loc["AFTER", "valid"]  # kept, valid
    files = report.report([str(failed_run)], lang=lang, out=str(tmp_path))
    html = Path(files.html).read_text(encoding="utf-8")
    assert re.search(sentence, html), re.findall(r"<li>.*REFUSED.*</li>", html)
    heading = {"en": "Failed tests", "ja": "失敗したテスト"}[lang]
    assert f">{heading}<" in html
    markdown = Path(files.markdown).read_text(encoding="utf-8")
    assert f"### {heading}" in markdown and re.search(r"^- .*\*\*REFUSED( read|の読み込み)\*\*.*`[^`]*fio: size too small[^`]*`", markdown, re.M)


@needs_fio
def test_compare_and_measure_notebooks_name_the_failed_test_with_fios_reason(failed_run, tmp_path):
    """The failure fio really reported, in the two other notebooks that show runs: compare (the demo's and
    the articles'), and measure (what iolab batch runs on each server), beside the tests that did run."""
    files = report.report([str(failed_run)], notebook="compare", lang="en", out=str(tmp_path / "compare"))
    md = Path(files.markdown).read_text(encoding="utf-8")
    assert "### Failed tests and tests not run" in md
    assert re.search(r"^- \*\*REFUSED read\*\* on faulty-disk failed: `[^`]*fio: size too small[^`]*`", md, re.M)
    assert "): 3 tests;" in md  # the tests it set out to run, the refused one too

    recipe = tmp_path / "faulty.yaml"
    recipe.write_text(RECIPE)
    target = tmp_path / "target"
    target.mkdir()
    out = report.execute(ROOT / "notebooks" / "measure.ipynb", tmp_path / "measure.ipynb", parameters={
        "recipe": str(recipe), "target": [str(target)], "tests": [], "label": "faulty-disk", "size": None,
        "runtime": 1, "data_dir": str(tmp_path / "data"), "progress": False})
    import nbformat
    shown = "\n".join(o.get("data", {}).get("text/markdown", "")
                      for c in nbformat.read(str(out), as_version=4).cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "## Failed tests and tests not run" in shown
    assert re.search(r"\*\*REFUSED read\*\* on faulty-disk failed: `[^`]*fio: size too small", shown), shown[-2000:]
