"""Recipe-specific report sections (iolab.report.sections): the numbers in the tables, the findings, the plots' artists,
the Japanese strings, and the compare notebook rendering each section from the fixture runs.

Synthetic frames carry numbers whose answers are known by construction; the fixture store
``tests/fixtures/sections`` (``make_data.py --sections``) holds one realistic run set per recipe kind.
"""
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from iolab.report import i18n, notebooks as report, sections, tables  # noqa: E402
from iolab.core.errors import IolabError  # noqa: E402
from cli_helpers import ROOT

STORE = ROOT / "tests" / "fixtures" / "sections"
DATA = ROOT / "tests" / "fixtures" / "data"


@pytest.fixture(scope="module")
def store():
    return report.select(STORE, with_results=True)


def recipe_rows(store, name):
    return store.for_recipe(name).results


def texts(section):
    return "\n".join(section.sentences)


# =========================================================================== which sections


def test_plan_tells_the_kinds_from_the_rows(store):
    expected = {"qd-sweep": ["qd-sweep", "concurrency"], "gnome-disks": ["gnome-disks"], "bonnie": ["bonnie"],
                "tiobench": ["tiobench"], "hdparm": ["hdparm"], "pgbench": ["pgbench"], "quick": [],
                "crystaldiskmark": ["fleet"], "sqlbench": ["sqlbench"]}
    assert {name: sections.plan(recipe_rows(store, name)) for name in store.recipes} == expected
    # from the rows, not the recipe's name: a renamed bonnie recipe keeps its section
    renamed = recipe_rows(store, "bonnie").assign(recipe="my-bonnie")
    assert sections.plan(renamed) == ["bonnie"]
    # the CrystalDiskMark fixture runs have no section: the generic shape, every row left for it
    cdm = report.select(DATA, with_results=True).for_recipe("crystaldiskmark").results
    found, rest = sections.build(cdm)
    assert found == [] and len(rest) == len(cdm)


def test_fleet_aggregate_is_never_one_more_system(store):
    part = recipe_rows(store, "crystaldiskmark")
    assert "all" in set(part["host"])  # the fixture has the aggregate rows ...
    generic = sections.without_aggregates(part)
    assert "all" not in set(generic["host"]) and len(generic) == (part["host"] != "all").sum()
    table = tables.article_table(generic)
    assert not {"1 hosts", "2 hosts", "3 hosts"} & {c[0] for c in table.frame.columns}
    found, rest = sections.build(part)
    assert [s.kind for s in found] == ["fleet"] and rest.empty
    # a flag alone marks an aggregate too
    flagged = pd.DataFrame({"system": ["a", "b"], "host": ["h1", "h2"], "flags": [None, "fleet_aggregate;partial_fleet"]})
    assert list(sections.without_aggregates(flagged)["system"]) == ["a"]
    # the report's system count: web1 is one system in the 1-, 2- and 3-host runs; no "N hosts"
    systems = sections.measured_systems(store.results)
    assert len(systems) == 10 and {"web1", "web2", "web3"} <= set(systems) and "3 hosts" not in systems
    manifests = sections.without_aggregate_runs(store.manifests)
    assert "all" not in set(manifests["host"]) and len(manifests) == len(store.manifests) - 3


# =========================================================================== qd-sweep


#: IOPS by outstanding I/O: "fast" saturates at OIO 8 (40,000 -> 40,400 while p99 doubles); "slow" never does
QD = {"fast": {1: 9000, 2: 17000, 4: 30000, 8: 40000, 16: 40400, 32: 40600},
      "slow": {1: 150, 2: 290, 4: 560, 8: 1080, 16: 2050, 32: 3900}}


def qd_rows(jobs=(1,)):
    rows = []
    for system, curve in QD.items():
        for j in jobs:
            for oio, iops in curve.items():
                if oio % j:
                    continue
                depth = oio // j
                mean = oio / iops * 1e6
                rows.append({"system": system, "run_id": system, "host": system, "label": system,
                             "test": f"RND4K-Q{depth}T{j}", "sweep": "RND4K", "rep": 1, "direction": "read",
                             "bs": 4096, "iodepth": depth, "numjobs": j, "iops": iops, "bw_mbps": iops * 4096 / 1e6,
                             "lat_mean_us": mean, "lat_p50_us": mean * 0.9, "lat_p99_us": mean * 2.0,
                             "jain_index": 0.999 if j > 1 else None, "valid": True, "error": None})
    return pd.DataFrame(rows)


def test_qd_sweep_knee_table_sentences_and_plot(japanese):
    data = qd_rows()
    knees = sections.qd_knees(data).set_index("system")
    assert knees.loc["fast", "found"] and knees.loc["fast", "oio"] == 8 and knees.loc["fast", "iops"] == 40000
    assert knees.loc["fast", "next_oio"] == 16 and knees.loc["fast", "iops_gain"] == pytest.approx(0.01)
    # p99 = 2 x OIO / IOPS: from OIO 8 to 16 it grows 16/40400 / (8/40000) - 1 = 98%
    assert knees.loc["fast", "p99_growth"] == pytest.approx(16 / 40400 / (8 / 40000) - 1)
    assert not knees.loc["slow", "found"] and knees.loc["slow", "last_oio"] == 32

    section = sections.qd_sweep_section(data, lang="en")
    table = section.tables[0]
    assert table.data.loc[8, ("IOPS", "fast")] == 40000
    assert table.data.loc[8, ("p99 latency (ms)", "fast")] == pytest.approx(2 * 8 / 40000 * 1e3)
    assert table.data.loc[8, ("p50 latency (ms)", "fast")] == pytest.approx(0.9 * 8 / 40000 * 1e3)
    assert table.frame.loc[32, ("IOPS", "slow")] == "3,900"
    sentences = texts(section)
    assert "**fast**: IOPS saturate at about 40,000 at OIO 8; beyond it p99 latency grows 98% (OIO 16: +1.0% IOPS)." \
        in sentences
    assert "**slow**: IOPS keep growing up to OIO 32 (3,900): no knee within the sweep." in sentences
    assert "**RND4K read, highest IOPS**: fast leads with 40,600 IOPS, 10x that of slow." in sentences

    ax = section.figures[0].axes[0]
    knee = [a for a in ax.get_children() if a.get_gid() == "knee"]
    assert len(knee) == 2  # one system has a knee: its star and its vertical line
    star = [a for a in knee if hasattr(a, "get_marker") and a.get_marker() == "*"][0]
    assert tuple(star.get_xdata()) == (8,) and tuple(star.get_ydata()) == (40000,)
    twin = section.figures[0].axes[1]
    p50 = [line for line in twin.get_lines() if line.get_gid() == "p50"]
    assert len(p50) == 2 and p50[0].get_linestyle() == ":"
    assert ax.get_xlabel() == "Queue depth" and ax.get_xscale() == "log"

    ja = sections.qd_sweep_section(data, lang="ja")
    assert "**fast**：IOPSはOIO 8で約40,000に飽和する。" in texts(ja)
    assert ja.title == i18n.text("sections.qd.heading", "ja")
    assert ja.figures[0].axes[0].get_xlabel() == "キュー深度"


# =========================================================================== concurrency


def test_concurrency_totals_efficiency_and_fairness():
    rows = []
    for j, iops, jain in ((1, 10000, None), (2, 19000, 0.998), (4, 30000, 0.82)):
        for depth in (1, 32):
            rows.append({"system": "ssd", "run_id": "r", "host": "h", "test": f"RND4K-Q{depth}T{j}", "sweep": "RND4K",
                         "rep": 1, "direction": "read", "bs": 4096, "iodepth": depth, "numjobs": j,
                         "iops": iops * (3 if depth == 32 else 1), "lat_p99_us": 100.0 * j,
                         "jain_index": jain, "valid": True, "error": None})
    data = pd.DataFrame(rows)
    assert sections.plan(data) == ["qd-sweep", "concurrency"]  # two depths: a (short) QD sweep too
    assert sections.plan(data[data["iodepth"] == 1]) == ["concurrency"]
    points = sections.concurrency_points(data)
    qd1 = points[points["iodepth"] == 1].set_index("numjobs")
    assert list(qd1["total"]) == [10000, 19000, 30000]
    assert qd1.loc[4, "speedup"] == 3.0 and qd1.loc[4, "efficiency"] == 0.75 and qd1.loc[4, "jain"] == 0.82
    section = sections.concurrency_section(data)
    table = section.tables[0]
    assert table.data.loc[("QD32", 2), ("IOPS", "ssd")] == 57000
    assert table.frame.loc[("QD1", 4), ("Jain's fairness index", "ssd")] == "0.820"
    assert table.frame.loc[("QD1", 1), ("Jain's fairness index", "ssd")] == tables.DASH
    assert ("**ssd**, QD1: from 1 to 4 jobs, IOPS go from 10,000 to 30,000 (3.0x, 75% of linear scaling); "
            "p99 latency from 0.100 to 0.400 ms. At 4 jobs Jain's index is 0.820: the jobs did not get equal shares."
            ) in section.sentences
    fig = section.figures[0]
    assert len([a for a in fig.axes if a.get_title()]) == 2  # QD1 and QD32 panels (plus their twins)
    assert [a.get_title() for a in fig.axes if a.get_title()] == ["RND4K read, QD1", "RND4K read, QD32"]
    first = fig.axes[0]
    assert tuple(first.get_lines()[0].get_ydata()) == (10000, 19000, 30000)


# =========================================================================== gnome-disks


def gnome_rows():
    rng = np.random.default_rng(7)
    rows = []
    # disk: 200 - 100 p MB/s; flash: 500 MB/s +-2% sample by sample (every tenth averages 500)
    for system, rate in (("disk", lambda n: 200 - n), ("flash", lambda n: 500 * (1.02 if n % 2 else 0.98))):
        for n in range(100):
            rows.append({"system": system, "test": "read-rate", "direction": "read", "sample": n, "position": n / 100,
                         "bw_mbps": rate(n), "io_bytes": 10 * 2**20, "runtime_s": 10 * 2**20 / (rate(n) * 1e6),
                         "bs": 10 * 2**20, "valid": True})
        previous = 0.5
        for n in range(200):
            p = float(rng.uniform())
            ms = 4 + 10 * abs(p - previous) if system == "disk" else 0.1 + 0.01 * rng.uniform()
            previous = p
            rows.append({"system": system, "test": "access-time", "direction": "read", "sample": n, "position": p,
                         "access_ms": ms, "valid": n > 0})
    return pd.DataFrame(rows)


def test_gnome_disks_summary_decline_flatness_and_plot(japanese):
    data = gnome_rows()
    summary = sections.gnome_summary(data).set_index("system")
    # first and last tenth of 200 - 100 p at p = 0.00..0.09 and 0.90..0.99
    assert summary.loc["disk", "read_first"] == pytest.approx(195.5)
    assert summary.loc["disk", "read_last"] == pytest.approx(105.5)
    assert summary.loc["disk", "read_max"] == 200 and summary.loc["disk", "read_min"] == 101
    assert summary.loc["flash", "read_flat"] and summary.loc["flash", "read_max_dev"] == pytest.approx(0.0, abs=1e-9)
    assert summary.loc["disk", "access_n"] == 199  # the first sample is dropped, as GNOME Disks does
    assert summary.loc["disk", "access_corr"] > 0.9 and abs(summary.loc["flash", "access_corr"]) < 0.3

    section = sections.gnome_disks_section(data)
    table = section.tables[0]
    assert table.data.loc["Average read rate (MB/s)", "disk"] == pytest.approx(150.5)
    assert table.frame.loc["Read samples", "flash"] == "100" and table.frame.loc["Sample size", "disk"] == "10 MiB"
    sentences = texts(section)
    assert "**disk**: the read rate falls from 196 to 106 MB/s from the outer to the inner edge (1.9-fold; " \
           "150 MB/s on average)." in sentences  # 150.5, rounded as the table rounds it
    assert "**flash**: flat within ±0.0% along the device (500 MB/s on average)." in sentences
    assert "growing with the seek distance" in sentences and "independent of the seek distance" in sentences
    assert "**Average read rate**: flash leads with 500 MB/s, 3.3x that of disk." in sentences
    # a 10% dip in the middle is not flat, though the ends are equal
    dip = data.copy()
    middle = (dip["system"] == "flash") & (dip["test"] == "read-rate") & dip["position"].between(0.4, 0.49)
    dip.loc[middle, "bw_mbps"] = 400
    assert not sections.gnome_summary(dip).set_index("system").loc["flash", "read_flat"]

    fig = section.figures[0]
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["disk", "flash"]
    assert len(panels[0].get_lines()) == 1 and len(panels[0].get_lines()[0].get_xdata()) == 100
    twins = [a for a in fig.axes if not a.get_title() and a.collections]
    assert len(twins) == 2 and len(twins[0].collections[0].get_offsets()) == 198  # distances of 199 valid reads

    ja = sections.gnome_disks_section(data, lang="ja")
    assert "**disk**：読み込み速度は外周から内周へ196 MB/秒から106 MB/秒に落ちる" in texts(ja)
    assert "平均読み込み速度（MB/秒）" in ja.tables[0].frame.index


def test_gnome_disks_fixture_hdd_declines_and_raid_is_flat(store):
    section = sections.gnome_disks_section(recipe_rows(store, "gnome-disks"))
    summary = sections.gnome_summary(recipe_rows(store, "gnome-disks")).set_index("system")
    assert 1.7 < summary.loc["HDD (WD40EFRX)", "read_decline"] < 1.9
    assert summary.loc["SSD RAID0", "read_flat"]
    assert 10 < summary.loc["HDD (WD40EFRX)", "access_ms"] < 14 and summary.loc["SSD RAID0", "access_ms"] < 0.2
    assert "**HDD (WD40EFRX)**: the read rate falls from" in texts(section)
    assert "**SSD RAID0**: flat within" in texts(section)


# =========================================================================== bonnie


def test_bonnie_tables_in_bonnies_shape_with_the_original_beside(store, japanese):
    section = sections.bonnie_section(recipe_rows(store, "bonnie"))
    table = section.tables[0].frame
    eq, orig = ("HDD (emulated)", "iolab (fio + Python)"), ("HDD (emulated)", "bonnie++ 2.00a")
    assert list(table.index) == [eq, orig, ("NVMe", "iolab (fio + Python)"), ("NVMe", "bonnie++ 2.00a")]
    assert table.loc[eq, ("", "", "Size")] == "1G"
    assert table.loc[eq, ("Sequential Output", "Block", "K/sec")] == "95120"
    assert table.loc[eq, ("Sequential Output", "Block", "%CP")] == "11"
    assert table.loc[orig, ("Sequential Output", "Per Chr", "K/sec")] == "1190"
    assert table.loc[eq, ("Random", "Seeks", "/sec")] == "148.6"
    nvme = ("NVMe", "bonnie++ 2.00a")
    assert table.loc[nvme, ("Sequential Input", "Block", "K/sec")] == "+++++"
    assert table.loc[nvme, ("Sequential Input", "Block", "%CP")] == "+++"
    assert np.isnan(section.tables[0].data.loc[nvme, ("Sequential Input", "Block", "K/sec")])
    latency = section.tables[1].frame
    assert latency.loc[eq, ("Sequential Output", "Block")] == "1480ms"
    assert latency.loc[eq, ("Sequential Output", "Per Chr")] == "28600us"
    assert "| HDD (emulated) | bonnie++ 2.00a | 1G | 1190 | 98 |" in section.tables[0].to_markdown()

    sentences = texts(section)
    assert "**Block output**: NVMe leads with 1,912,000 K/sec, 20x that of HDD (emulated)." in sentences
    assert ("**Block input**: NVMe finished in under 0.5 s (iolab (fio + Python) and bonnie++ 2.00a): +++++, "
            "too fast for bonnie++ to time (iolab measured 3,460 MB/s). HDD (emulated): 98,760 K/sec.") in sentences
    assert "Block input: HDD" not in sentences and "no other system to compare with" not in sentences
    # equivalent against bonnie++: 95120 / 96870 - 1 = -1.8 %, 455 / 1190 - 1 = -62 %
    assert ("**HDD (emulated)**, iolab's equivalent against bonnie++ itself: Per-char output -62%, "
            "Block output -1.8%, Rewrite -4.3%") in sentences
    assert "Block input +++++ in both" in sentences
    # why the per-char tests are close: CPU-bound, their %CP the evidence (iolab.report.reasons)
    assert "because these tests are CPU-bound" in sentences and "CPU use of 99% or more" in sentences

    ax = section.figures[0].axes[0]
    assert len(ax.patches) == 4 * 5  # (2 systems x 2 tools) x 5 K/sec tests
    assert sum(1 for p in ax.patches if p.get_hatch()) == 2 * 5  # bonnie++ itself hatched
    assert [t.get_text() for t in ax.texts if t.get_gid() == "plus"] == ["+++++", "+++++"]
    assert ax.get_yscale() == "log"

    ja = sections.bonnie_section(recipe_rows(store, "bonnie"), lang="ja")
    assert ("シーケンシャル出力", "ブロック", "K/sec") in ja.tables[0].frame.columns
    assert "**ブロック出力**：NVMeが1,912,000 K/秒で最速。" in texts(ja)


def test_bonnie_results_without_bonnie_columns_and_latency_format():
    # rows as an older engine wrote them: no kps/plus columns; K/sec and +++++ from bytes and seconds
    data = pd.DataFrame([
        {"system": "a", "test": "put_block", "tool": "fio", "io_bytes": 1024 * 1024 * 100, "runtime_s": 1.0,
         "cpu_usr_pct": 5, "cpu_sys_pct": 7, "lat_max_us": 2e6, "bw_mbps": 104.8576},
        {"system": "a", "test": "get_block", "tool": "fio", "io_bytes": 1024 * 1024 * 100, "runtime_s": 0.2,
         "cpu_usr_pct": 5, "cpu_sys_pct": 7, "lat_max_us": 900, "bw_mbps": 524.288}])
    results = sections.bonnie_results(data).set_index("test")
    assert results.loc["put_block", "rate"] == 102400 and results.loc["put_block", "cpu"] == 12
    assert results.loc["get_block", "plus"] and np.isnan(results.loc["get_block", "rate"])
    assert [sections.bonnie_latency(v) for v in (28622, 101000, 2.5e8, np.nan)] == ["28622us", "101ms", "250s", ""]


# =========================================================================== tiobench


def test_tiobench_tables_and_slow_operations(store, japanese):
    section = sections.tiobench_section(recipe_rows(store, "tiobench"))
    assert [t.caption for t in section.tables] == ["Sequential Writes", "Random Writes", "Sequential Reads",
                                                   "Random Reads"]
    random_writes = section.tables[1]
    assert list(random_writes.frame.columns) == ["Threads", "Rate (MB/s)", "CPU (%)", "Avg latency (ms)",
                                                 "Max latency (ms)", "Lat% > 2 s", "Lat% > 10 s", "CPU eff"]
    hdd = random_writes.frame.loc["HDD (emulated)"]
    assert hdd["Threads"] == "8" and hdd["Rate (MB/s)"] == "1.95" and hdd["Max latency (ms)"] == "14,200"
    assert hdd["Lat% > 2 s"] == "0.31000" and hdd["Lat% > 10 s"] == "0.01200"
    # tiobench's average latency: 8 threads x 4 KiB / 1.95 MB/s
    assert random_writes.data.loc["HDD (emulated)", "Avg latency (ms)"] == pytest.approx(8 * 4096 / 1.95e6 * 1e3,
                                                                                         rel=1e-3)
    sentences = texts(section)
    assert "**Random Writes**: SATA SSD (emulated) leads with 118 MB/s, 61x that of HDD (emulated)." in sentences
    assert ("**HDD (emulated)**, Random Writes: 0.31% of the operations took longer than 2 s and 0.012% longer "
            "than 10 s (worst 14.2 s).") in sentences
    assert "SATA SSD (emulated)**, " not in sentences  # no slow operations there
    ax = section.figures[0].axes[0]
    assert len(ax.patches) == 8 and ax.get_yscale() == "log"  # 0.58 to 512 MB/s
    ja = sections.tiobench_section(recipe_rows(store, "tiobench"), lang="ja")
    assert [t.caption for t in ja.tables][1] == "ランダム書き込み"
    assert "操作の0.31%が2秒を超え、0.012%が10秒を超えた（最悪14.2秒）" in texts(ja)


def test_tiobench_says_when_nothing_was_slow():
    data = pd.DataFrame([{"system": s, "test": "SeqRead", "numjobs": 8, "bw_mbps": v, "lat_mean_us": 300.0,
                          "lat_max_us": m, "over_2s_pct": 0.0, "over_10s_pct": 0.0, "cpu_usr_pct": 2, "cpu_sys_pct": 8}
                         for s, v, m in (("a", 100.0, 640e3), ("b", 300.0, 45e3))])
    section = sections.tiobench_section(data)
    assert "No operation took longer than 2 s on any system (worst: 640 ms, a, Sequential Reads)." in section.sentences
    assert section.tables[0].data.loc["a", "CPU eff"] == pytest.approx(1000)


# =========================================================================== sqlbench


def test_sqlbench_section_is_the_articles_table_10(store, japanese):
    """Tests x systems in elapsed seconds (the 2013 article's Table 10), lower is better, a total per system."""
    rows = recipe_rows(store, "sqlbench")
    found, rest = sections.build(rows)
    assert [s.kind for s in found] == ["sqlbench"] and rest.empty  # no generic MB/s shape for a database
    section = found[0]
    table = section.tables[0]
    assert list(table.frame.index) == ["ATIS", "alter-table", "big-tables", "connect", "create", "insert", "select",
                                       "wisconsin", "Total"]
    assert list(table.frame.columns) == ["HDD (emulated)", "SATA SSD (emulated)"]
    assert table.frame.loc["create"].tolist() == ["51.0", "25.3"]
    # the mean of the two repetitions, and the total of the eight means
    create = rows[(rows["test"] == "create") & (rows["label"] == "HDD (emulated)")]["runtime_s"]
    assert len(create) == 2 and table.data.loc["create", "HDD (emulated)"] == pytest.approx(create.mean())
    assert table.data.loc["Total", "SATA SSD (emulated)"] == pytest.approx(
        table.data.loc[table.data.index[:-1], "SATA SSD (emulated)"].sum())
    sentences = texts(section)
    assert "**create**: SATA SSD (emulated) is quickest at 25.3 s; HDD (emulated) takes 2.0x as long (51.0 s)." in sentences
    assert "**connect**: SATA SSD (emulated) and HDD (emulated) are within 1.6% of each other" in sentences
    assert "**big-tables** tells the systems apart most" in sentences and "(4.9x as long)" in sentences
    assert any("scale 0.01" in n for n in section.notes) and "Storage engine: InnoDB." in section.notes
    assert len(section.figures[0].axes[0].patches) == 16  # 8 tests x 2 systems
    ja = sections.sqlbench_section(rows, lang="ja")
    assert ja.title == "データベース：MySQL sql-bench" and list(ja.tables[0].frame.index)[-1] == "合計"
    assert "**create**：SATA SSD (emulated)が25.3秒で最も短い。" in texts(ja)


def test_sqlbench_total_only_where_every_test_ran():
    data = pd.DataFrame([{"system": s, "test": t, "runtime_s": v, "tool": "sql-bench"}
                         for s, t, v in (("a", "create", 10.0), ("a", "select", 2.0), ("b", "create", 5.0))])
    table = sections.sqlbench_section(data).tables[0]
    assert table.frame.loc["Total"].tolist() == ["12.0", "—"] and table.frame.loc["select", "b"] == "—"
    assert sections.sqlbench_section(data.assign(tool="fio")) is None
    # "select" only a ran: a coverage note after the findings, once, not a finding of its own
    section = sections.sqlbench_section(data)
    assert not [line for line in section.findings.splitlines() if line.startswith("- ") and "select" in line]
    assert section.findings.count("*Coverage note, not a finding: only a has results for select") == 1


# =========================================================================== hdparm


def hdparm_rows():
    rows = []
    disk = {"sda": [100.0, 102.0, 98.0, 101.0, 99.0], "sdb": [500.0, 505.0, 495.0, 510.0, 490.0]}
    for rep in range(5):
        for target, values in disk.items():  # alternating
            rows.append({"system": f"box · {target}", "test": "disk-reads", "tool": "fio", "rep": rep + 1,
                         "bw_mbps": values[rep], "hdparm_mb_sec": values[rep] * 1e6 / 2**20, "direct": 0})
            rows.append({"system": f"box · {target}", "test": "cached-reads", "tool": "python", "rep": rep + 1,
                         "bw_mbps": 10000.0, "hdparm_mb_sec": 10000.0 * 1e6 / 2**20, "direct": 0})
            rows.append({"system": f"box · {target}", "test": "disk-reads", "tool": "hdparm", "rep": rep + 1,
                         "bw_mbps": values[rep] * 1.02, "hdparm_mb_sec": values[rep] * 1.02 * 1e6 / 2**20,
                         "direct": 0})
    return pd.DataFrame(rows)


def test_hdparm_mean_sd_mib_and_the_original(japanese):
    data = hdparm_rows()
    results = sections.hdparm_results(data).set_index(["system", "test", "tool"])
    sda = results.loc[("box · sda", "disk-reads", "iolab")]
    assert sda["n"] == 5 and sda["mbps"] == 100.0 and sda["mbps_sd"] == pytest.approx(np.std([100, 102, 98, 101, 99],
                                                                                               ddof=1))
    assert sda["mibps"] == pytest.approx(100.0 * 1e6 / 2**20)  # hdparm's "MB/sec" = 95.37 MiB/s
    section = sections.hdparm_section(data)
    table = section.tables[0]
    assert list(table.frame.index) == [("Timing cached reads (-T)", "iolab"),
                                       ("Timing buffered disk reads (-t)", "iolab"),
                                       ("Timing buffered disk reads (-t)", "hdparm")]
    assert table.frame.loc[("Timing buffered disk reads (-t)", "iolab"), ("box · sda", "MB/s (mean ± SD)")] \
        == "100 ± 2"
    assert table.frame.loc[("Timing buffered disk reads (-t)", "iolab"), ("box · sdb", "hdparm MB/sec (MiB/s)")] \
        == "476.84"
    assert table.caption == "hdparm: mean ± standard deviation of 5 alternating passes"
    sentences = texts(section)
    assert ('**box · sda**: buffered disk reads 100 MB/s = 95.4 MiB/s (hdparm prints "95.4 MB/sec"), SD 1.6% over '
            '5 passes. Cached reads 10,000 MB/s (9,540 MiB/s).') in sentences
    assert "**Timing buffered disk reads (-t)**: box · sdb leads with 500 MB/s, 5.0x that of box · sda." \
        in sentences
    assert ("**box · sda**, hdparm itself against iolab's equivalent: Timing buffered disk reads (-t): hdparm "
            "97.3 MiB/s, iolab 95.4 (-2.0%).") in sentences
    assert "measure memory and CPU, not the disk" in section.findings
    axes = [a for a in section.figures[0].axes if a.get_title()]
    assert [a.get_title() for a in axes] == ["Timing cached reads (-T)", "Timing buffered disk reads (-t)"]
    assert len(axes[1].patches) == 4 and len(axes[1].lines) > 0  # 2 targets x 2 tools, SD error bars
    ja = sections.hdparm_section(data, lang="ja")
    assert ja.tables[0].frame.index[0] == ("キャッシュ読み込み（-T）", "iolab")
    assert "バッファ付きディスク読み込みは100 MB/秒＝95.4 MiB/秒" in texts(ja)


def test_hdparm_fixture_alternating_targets(store):
    results = sections.hdparm_results(recipe_rows(store, "hdparm"))
    assert set(results["system"]) == {"bench box · hdd", "bench box · ssd"}
    assert set(results["n"]) == {5} and set(results["tool"]) == {"iolab", "hdparm"}
    disk = results[(results["test"] == "disk-reads") & (results["tool"] == "iolab")].set_index("system")
    assert 100 < disk.loc["bench box · hdd", "mbps"] < 110 and 510 < disk.loc["bench box · ssd", "mbps"] < 540


# =========================================================================== pgbench


def pgbench_rows():
    rows = []
    tps = {"hdd": {"tpcb-sync_on": (74.0, 140.0), "tpcb-sync_off": (420.0, 700.0)},
           "ssd": {"tpcb-sync_on": (1200.0, 2300.0), "tpcb-sync_off": (2500.0, 4600.0)},
           "cached": {"tpcb-sync_on": (900.0, 1500.0), "tpcb-sync_off": (1000.0, 1700.0)}}
    for system, modes in tps.items():
        for mode, values in modes.items():
            for clients, value in zip((1, 4), values):
                rows.append({"system": system, "host": f"{system}-node", "label": system, "test": mode,
                             "tool": "pgbench", "numjobs": clients, "clients": clients, "tps": value,
                             "lat_avg_ms": clients / value * 1e3, "lat_p99_us": clients / value * 3e6,
                             "sync_commit": "on" if mode.endswith("sync_on") else "off", "fsync": "on",
                             "direction": "randrw", "rep": 1})
    return pd.DataFrame(rows)


def fio_rows():
    rows = []
    for host, label, lat in (("hdd-node", "hdd", 6667.0), ("ssd-node", "ssd", 50.0), ("cached-node", "cached", 8000.0)):
        for rep in (1, 2):
            rows.append({"system": label, "host": host, "label": label, "recipe": "quick", "test": "RND4K-Q1T1",
                         "direction": "write", "bs": 4096, "iodepth": 1, "numjobs": 1, "lat_mean_us": lat,
                         "tool": "fio", "isolation": "direct", "rep": rep})
            # a sequential and a deep-queue write of the same systems: not the latency a commit waits for
            rows.append({**rows[-1], "test": "SEQ1M-Q1T1", "bs": 2**20, "lat_mean_us": 9000.0})
            rows.append({**rows[-2], "test": "RND4K-Q32T1", "iodepth": 32, "lat_mean_us": 99999.0})
    return pd.DataFrame(rows)


def test_pgbench_tps_table_plot_and_the_fio_latency(japanese):
    latency = sections.fio_write_latency(fio_rows()).set_index("label")
    assert latency.loc["hdd", "lat_ms"] == pytest.approx(6.667) and latency.loc["hdd", "n"] == 2
    section = sections.pgbench_section(pgbench_rows(), fio=fio_rows())
    table = section.tables[0]
    assert table.data.loc[("tpcb-sync_on", 1), ("tps", "hdd")] == 74.0
    assert table.data.loc[("tpcb-sync_off", 4), ("p99 latency (ms)", "ssd")] == pytest.approx(4 / 4600 * 3e3)
    sentences = texts(section)
    # 1 / 6.667 ms = 150 writes a second; 74 tps = about 2.0 writes per commit
    assert ("**hdd** commits 74.0 tps at 1 client, consistent with its 6.67 ms random 4K write latency "
            "(quick, RND4K-Q1T1): at most 150 such writes a second, about 2.0 per commit.") in sentences
    assert ("**ssd** commits 1,200 tps at 1 client, far below the 20,000 a second its 0.050 ms random 4K write "
            "latency (quick, RND4K-Q1T1) would allow") in sentences
    assert "**cached** commits 900 tps at 1 client, more than its 8.00 ms random 4K write latency" in sentences
    assert ("**hdd**: without waiting for the flush (tpcb-sync_off) it commits 5.7x as many transactions with "
            "1 client: its commit rate is bound by the flush.") in sentences
    assert "**cached**: without waiting for the flush (tpcb-sync_off) it commits only 11% more with 1 client" \
        in sentences
    assert "**tpcb-sync_on, 4 clients**: ssd leads with 2,300 tps" in sentences
    fig = section.figures[0]
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["tpcb-sync_on", "tpcb-sync_off"]
    hdd = [line for line in panels[0].get_lines() if line.get_label() == "hdd"][0]
    assert tuple(hdd.get_xdata()) == (1, 4) and tuple(hdd.get_ydata()) == (74.0, 140.0)
    assert panels[0].get_xlabel() == "Clients" and panels[0].get_ylabel() == "tps"
    # without fio results: no tie, no error
    assert "random 4K write" not in texts(sections.pgbench_section(pgbench_rows()))
    ja = sections.pgbench_section(pgbench_rows(), lang="ja", fio=fio_rows())
    assert "**hdd**：クライアント1で74.0 tpsをコミットする。これはランダム4K書き込みのレイテンシ6.67ミリ秒" \
        in texts(ja)


def test_pgbench_fixture_ties_to_the_quick_runs(store):
    section = sections.pgbench_section(recipe_rows(store, "pgbench"), fio=store.results)
    sentences = texts(section)
    assert "**HDD (emulated)** commits 7" in sentences and "consistent with its 6.6" in sentences
    assert "**SATA SSD (emulated)** commits 1,1" in sentences and "far below" in sentences


# =========================================================================== fleet


def test_fleet_hosts_side_by_side_scaling_and_tails(store, japanese):
    part = recipe_rows(store, "crystaldiskmark")
    section = sections.fleet_section(part)
    side = section.tables[0]
    assert list(side.frame.columns) == ["web1", "web2", "web3", "All 3 hosts"]
    aggregate = part[(part["host"] == "all") & (part["fleet_id"].str.endswith("-n3"))
                     & (part["test"] == "SEQ1M-Q8T1") & (part["direction"] == "read")]["bw_mbps"].mean()
    hosts = part[(part["host"] != "all") & (part["n_hosts"] == 3) & (part["test"] == "SEQ1M-Q8T1")
                 & (part["direction"] == "read")]
    assert side.data.loc[("SEQ1M-Q8T1", "read"), "All 3 hosts"] == pytest.approx(aggregate)
    assert aggregate == pytest.approx(hosts.groupby("rep")["bw_mbps"].sum().mean())
    assert side.data.loc[("SEQ1M-Q8T1", "read"), "web3"] == pytest.approx(
        hosts[hosts["host"] == "web3"]["bw_mbps"].mean())
    scaling = section.tables[2].data
    seq = scaling.loc[("SEQ1M-Q8T1", "read")]
    assert list(seq.index) == [1, 2, 3] and seq.loc[1, "% of linear"] == 100
    assert seq.loc[3, "Speed-up (x)"] == pytest.approx(seq.loc[3, "Aggregate (MB/s)"] / seq.loc[1, "Aggregate (MB/s)"])
    sentences = texts(section)
    assert "**SEQ1M-Q8T1 read**: 3 hosts at once reach 1,180 MB/s together, 2.5x 1 host (82% of linear scaling)." \
        in sentences
    assert "**SEQ1M-Q8T1 write**, per-host p99 with 3 hosts at once: from" in sentences
    scaling_fig, tail_fig = section.figures
    read = [a for a in scaling_fig.axes if a.get_title() == "read"][0]
    assert sum(1 for line in read.get_lines() if line.get_linestyle() == "--") == 2  # linear scaling per test
    assert tuple(read.get_lines()[0].get_xdata()) == (1.0, 2.0, 3.0)
    tail = tail_fig.axes[0]
    assert len(tail.patches) == 3 * 4 and [t.get_text() for t in tail.get_xticklabels()] == ["web1", "web2", "web3"]
    ja = sections.fleet_section(part, lang="ja")
    assert list(ja.tables[0].frame.columns)[-1] == "全3ホスト"
    assert "3ホスト同時で合計1,180 MB/秒に達し" in texts(ja)


# =========================================================================== the object and the errors


def test_section_markdown_show_and_errors():
    section = sections.qd_sweep_section(qd_rows())
    md = section.markdown()
    assert md.startswith("### Queue depth sweep") and "**Findings**" in md and "| 8 |" in md
    shown = []
    section.show(shown.append)
    kinds = [type(x).__name__ for x in shown]
    # heading, table, the sentence referring to the figure, the figure, its numbered caption, the findings
    assert kinds == ["Markdown", "Table", "Markdown", "Image", "Markdown", "Markdown"]
    n = int(shown[4].data.split(":**")[0].rsplit(" ", 1)[-1])
    assert shown[2].data.startswith(f"Figure {n} ") and shown[4].data.startswith(f"**Figure {n}:**")
    assert shown[3]._repr_png_()[1] == {"alt": section.figures[0].alt}
    assert section.figures[0].alt.startswith("RND4K read: IOPS (solid)")
    with pytest.raises(IolabError, match="unknown language"):
        sections.build(qd_rows(), lang="fr")
    with pytest.raises(IolabError, match="no column 'system' or 'label'"):
        sections.qd_points(pd.DataFrame({"test": ["x"]}))
    assert sections.qd_sweep_section(qd_rows().iloc[0:0]) is None


# =========================================================================== the compare notebook


#: The recipes of the Japanese render: all of the store's but bonnie (whose Japanese section test_bonnie_tables_...
#: checks), so the render also shows that a recipe filter leaves a recipe out.
JA_RECIPES = ["crystaldiskmark", "hdparm", "gnome-disks", "pgbench", "quick", "tiobench", "sqlbench", "qd-sweep"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("sections")
    en = report.report(data=STORE, notebook="compare", lang="en", out=out / "en")
    # Japanese, every recipe but bonnie chosen: pgbench still finds the quick runs' latency outside the selection
    ja = report.report(data=STORE, notebook="compare", lang="ja", out=out / "ja", recipe=JA_RECIPES)
    return en, ja


def test_compare_notebook_renders_every_section(rendered):
    en, ja = rendered
    md = en.markdown.read_text(encoding="utf-8")
    for key in ("qd", "scaling", "gnome", "bonnie", "tio", "hdparm", "pg", "sql", "fleet"):
        assert f"### {i18n.text(f'sections.{key}.heading', 'en')}" in md, key
    assert "## Recipe: quick" in md and "**Throughput (MB/s)" in md  # the generic shape for the rest
    assert "compares 10 systems measured with" in md
    assert "| 1 hosts |" not in md and "3 hosts ·" not in md
    assert "IOPS saturate at about" in md and "consistent with its 6.6" in md
    assert len(en.figures) == 13  # 10 section figures + quick's chart and two latency plots
    html = en.html.read_text(encoding="utf-8")
    assert "Bonnie++: K/sec and %CP" in html and "<img" in html and "def generic" not in html
    jmd = ja.markdown.read_text(encoding="utf-8")
    assert f"### {i18n.text('sections.gnome.heading', 'ja')}" in jmd
    assert f"### {i18n.text('sections.pg.heading', 'ja')}" in jmd
    # every recipe's section in Japanese too, and the generic shape (quick) with its Japanese table and findings
    for key in ("qd", "scaling", "tio", "hdparm", "sql", "fleet"):
        assert f"### {i18n.text(f'sections.{key}.heading', 'ja')}" in jmd, key
    assert "## レシピ：quick" in jmd and "**スループット（MB/秒）：3回中の最良値" in jmd and "**所見**" in jmd
    assert "整合する" in jmd and "Bonnie++" not in jmd


# =========================================================================== caveats of every section

from iolab.report import section_caveats  # noqa: E402
from iolab.analysis.stats import HIGH_VARIANCE_COV  # noqa: E402

CAVEAT_FLAGS = ["v1_writeback", "emulated_latency", "emulated_delay", "cache_suspect", "cpu_bound", "high_variance",
                "too_short", "small_file"]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_every_section_shows_the_caveats_of_its_rows(store, lang, japanese):
    """Each recipe's section, from the fixture runs with each flag on one system (the flags spread over the
    systems, one build per recipe): the flag's sentence is there (the compare notebook's Bonnie++ and hdparm
    sections dropped v1_writeback & co.)."""
    seen = set()
    for name in store.recipes:
        flagged = recipe_rows(store, name).copy()
        flagged["flags"] = flagged["flags"].fillna("").astype(str) if "flags" in flagged else ""
        systems = sorted(set(flagged["system"]))
        owners = {flag: systems[i % len(systems)] for i, flag in enumerate(CAVEAT_FLAGS)}
        for flag, system in owners.items():
            mine = flagged["system"] == system
            flagged.loc[mine, "flags"] = flagged.loc[mine, "flags"].map(lambda v: f"{v};{flag}" if v else flag)
        found, _ = sections.build(flagged, lang=lang)
        measured = set(sections.measured_systems(flagged))
        for section in found:
            markdown = section.markdown()
            for flag, system in owners.items():
                # a fleet section names each host once, whichever of the fleet's runs (1, 2, 3 hosts) it was in
                mine = flagged["system"] == system
                shown = flagged.loc[mine, "host"].iloc[0] if section.kind == "fleet" else system
                if shown not in measured:
                    continue
                if flag in section_caveats.NOT_SHOWN.get(section.kind, ()):
                    # hdparm shows no latency: the emulated-latency caveat would warn about nothing shown
                    assert not any(f"({flag})" in c for c in section.caveats)
                    continue
                sentence = i18n.text(f"flags.{flag}", lang, system=shown, tests="",
                                     threshold=i18n.percent(HIGH_VARIANCE_COV), cov="")
                sep = ": " if lang == "en" else "："  # after "**system**, tests" (the ja rule's full-width colon)
                tail = sentence.split(sep, 1)[1].strip() if sep in sentence else sentence[-30:]
                assert any(f"**{shown}**" in c and tail in c for c in section.caveats), (name, section.kind, flag,
                                                                                          section.caveats)
                assert tail in markdown
                seen.add(section.kind)
    # every kind of section the store has (flash-cache has its own store: tests/report/test_flashcache.py)
    assert seen == {"bonnie", "hdparm", "tiobench", "gnome-disks", "qd-sweep", "concurrency", "pgbench", "sqlbench",
                    "fleet"}, seen


def test_a_flag_on_every_test_says_all_tests(store):
    rows = recipe_rows(store, "bonnie").copy()
    system = sorted(set(rows["system"]))[0]
    rows["flags"] = ""
    rows.loc[rows["system"] == system, "flags"] = "v1_writeback"
    bonnie = [s for s in sections.build(rows, lang="en")[0] if s.kind == "bonnie"][0]
    assert any(c.startswith(f"**{system}**, all tests:") for c in bonnie.caveats), bonnie.caveats
    ja = [s for s in sections.build(rows, lang="ja")[0] if s.kind == "bonnie"][0]
    assert any(f"**{system}**" in c and "全テスト" in c for c in ja.caveats)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_gnome_disks_dropped_first_sample_is_method_not_a_caveat(store, lang):
    """GNOME Disks drops its first access-time sample (the section's intro says so): the rows' flag is no caveat,
    and never the bare 'flagged first_sample_dropped' a reader cannot decode."""
    rows = recipe_rows(store, "gnome-disks")
    assert rows["flags"].fillna("").str.contains("first_sample_dropped").any()  # the fixture carries the flag
    gnome = [s for s in sections.build(rows, lang=lang)[0] if s.kind == "gnome-disks"][0]
    assert not any("first_sample_dropped" in c for c in gnome.caveats), gnome.caveats
    assert "first_sample_dropped" not in gnome.markdown()
