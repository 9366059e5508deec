"""report.ipynb leaves a ``--simultaneous`` run's total out of its per-system tables and chart: the sum of the
targets measured at the same time (target ``a+b``, flag ``simultaneous_total``) is no system of its own, as
the compare page and the sections already treat it (issue 23). On a stored run made simultaneous in tmp."""
import json
import re
import shutil

import pandas as pd
import pytest

from iolab.engine import simultaneous
from iolab.report import i18n, notebooks as report, sections
from cli_helpers import FIXTURES

SOURCE = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-quick-312c"
TARGETS = ("hdd", "hdd2")
TOTAL = "+".join(TARGETS)


def _simultaneous_run(dest):
    """The stored quick run as ``iolab run --simultaneous`` on two targets writes it: each target's rows (the
    second at 90% of the first's figures), and per pass and step the engine's own total rows."""
    run = shutil.copytree(SOURCE, dest / SOURCE.name)
    manifest = json.loads((run / "manifest.json").read_text())
    first = manifest["targets"][0]
    manifest["targets"] = [{**first, "name": name, "path": f"/srv/bench/{name}"} for name in TARGETS]
    manifest["simultaneous"] = {"targets": list(TARGETS), "total": TOTAL}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    rows = pd.read_csv(SOURCE / "results.csv")
    second = rows.copy()
    for column in ("bw_mbps", "iops", "io_bytes"):
        second[column] = second[column] * 0.9
    frames = {name: frame.assign(target=name, simultaneous=simultaneous.TARGET_ROW)
              for name, frame in zip(TARGETS, (rows, second))}
    out = []
    for (job, rep), _ in rows.groupby(["job", "rep"], sort=False):
        parts = [f[(f["job"] == job) & (f["rep"] == rep)] for f in frames.values()]
        out += parts + [simultaneous.total_rows(parts, TOTAL)]
    pd.concat(out, ignore_index=True).to_csv(run / "results.csv", index=False)
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _simultaneous_run(tmp_path_factory.mktemp("simultaneous"))


def test_the_built_run_holds_total_rows_as_the_engine_writes_them(run):
    """The test's input is what it claims: total rows named a+b, flagged, summing the two targets."""
    sel = report.select(None, [run])
    totals = sel.results[sel.results["target"] == TOTAL]
    assert len(totals) and totals["flags"].str.contains(simultaneous.TOTAL_FLAG).all()
    assert set(sel.results["system"]) == {f"{sel.manifests['system_name'].iloc[0]} · {t}" for t in (*TARGETS, TOTAL)}
    targets = sel.results[sel.results["target"].isin(TARGETS)].groupby(["job", "rep", "direction"])["bw_mbps"].sum()
    assert totals.set_index(["job", "rep", "direction"])["bw_mbps"].sort_index().to_numpy() == \
        pytest.approx(targets.sort_index().to_numpy())


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_report_page_shows_each_target_and_no_total_column(run, tmp_path, lang):
    md = report.report([run], out=tmp_path / "page", lang=lang).markdown.read_text(encoding="utf-8")
    name = report.select(None, [run], lang=lang).manifests["system_name"].iloc[0]
    results = md.split("## " + i18n.text("headings.results", lang), 1)[1]
    headers = [line for line in results.splitlines() if line.startswith("|") and name in line]
    assert headers, results[:2000]
    for line in headers:  # every per-system table: the two targets, never their sum
        assert re.search(rf"{re.escape(name)} · hdd[ |]", line) and f"{name} · hdd2" in line
        assert TOTAL not in line
    # the total is named once, in the sentence saying why it is left out, and nowhere else
    sel_results = report.select(None, [run], lang=lang).results
    said = sections.totals_left_out(sel_results, lang)
    assert said and f"{name} · {TOTAL}" in said and said in results
    assert TOTAL not in results.replace(said, "")
    # the rule is the sections': the rows report.ipynb tables are the ones no section covers, totals left out
    sel = report.select(None, [run], lang=lang)
    _, rest = sections.build(sel.results, lang=lang)
    assert TOTAL not in set(rest["target"]) and set(rest["target"]) == set(TARGETS)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_compare_page_says_the_total_is_left_out(run, tmp_path, lang):
    md = report.report([run], notebook="compare", out=tmp_path / "compare", lang=lang).markdown.read_text(
        encoding="utf-8")
    said = sections.totals_left_out(report.select(None, [run], lang=lang).results, lang)
    assert said in md and md.count(said) == 1
