"""pgbench's commits and the disk's cache flushes (issue 23 item 4): where the kernel counted a flush per commit
(``dev_flushes``), the pgbench section says why the commit rate is what it is, in en and ja, naming the count.

The fixture runs (``tests/fixtures/sections``) predate the counter: the rows get the ``dev_flushes`` a run records,
one flush per transaction with synchronous commit (fewer where clients share one) and a few background ones
without, from their own transaction counts.
"""
import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from iolab.report import i18n, notebooks as report, reasons, sections  # noqa: E402
from cli_helpers import ROOT  # noqa: E402

STORE = ROOT / "tests" / "fixtures" / "sections"


@pytest.fixture(scope="module")
def pgbench_rows():
    rows = report.select(STORE, with_results=True).for_recipe("pgbench").results
    transactions = pd.to_numeric(rows["transactions"])
    per_commit = rows["sync_commit"].eq("on") & rows["fsync"].eq("on")
    # synchronous commit: a flush per transaction (group commit shares some above 1 client); else the WAL
    # writer's background flushes, five a second
    flushes = (transactions / rows["clients"].clip(upper=2)).where(per_commit, 5 * pd.to_numeric(rows["runtime_s"]))
    return rows.assign(dev_flushes=flushes.round())


def test_the_rule_finds_the_mode_that_flushes_at_every_commit(pgbench_rows):
    found = reasons.commit_flushes(pgbench_rows)
    assert set(found["test"]) == {"tpcb-sync_on"}
    assert list(found["system"]) == list(dict.fromkeys(pgbench_rows["system"]))
    one = pgbench_rows[(pgbench_rows["test"] == "tpcb-sync_on") & (pgbench_rows["clients"] == 1)]
    for _, row in found.iterrows():
        mine = one[one["system"] == row["system"]]
        assert row["detail"] == 1  # counted at the fewest clients
        assert row["against"] == pytest.approx(mine["dev_flushes"].mean())
        assert row["extra"] == pytest.approx(mine["dev_flushes"].mean() / mine["transactions"].mean())
        assert row["ratio"] == pytest.approx(1000 * 60 / mine["dev_flushes"].mean())


def test_no_counter_no_reason(pgbench_rows):
    assert reasons.commit_flushes(pgbench_rows.drop(columns="dev_flushes")).empty
    # a background flush now and then is not a flush per commit
    assert reasons.commit_flushes(pgbench_rows[pgbench_rows["test"] != "tpcb-sync_on"]).empty


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_section_says_why_where_dev_flushes_shows_it(pgbench_rows, lang):
    with_counter = sections.pgbench_section(pgbench_rows, lang=lang)
    without = sections.pgbench_section(pgbench_rows.drop(columns="dev_flushes"), lang=lang)
    with_counter.close()
    without.close()
    added = [s for s in with_counter.sentences if s not in without.sentences]
    assert len(added) == 1 and "`dev_flushes`" in added[0] and "tpcb-sync_on" in added[0]
    found = reasons.commit_flushes(pgbench_rows)
    for _, row in found.iterrows():
        assert row["system"] in added[0]
        assert i18n.number(row["against"], digits=0) in added[0]
        assert i18n.number(row["extra"], digits=2) in added[0]
    assert ("flushes per transaction" in added[0]) == (lang == "en")
    assert ("トランザクションあたり" in added[0]) == (lang == "ja")
