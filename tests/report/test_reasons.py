"""The rule base of reasons (issue 23 item 4): each rule on stored runs or the articles' figures, in en and ja,
said where the evidence is and not where it is absent."""
import pandas as pd
import pytest

import iolab
from cli_helpers import ROOT
from iolab.analysis import reference
from iolab.report import articles, beside, commentary, i18n, interfaces, narrative, reasons, tables
from iolab.report import notebooks as report
from iolab.report.sections import bonnie_section, sqlbench_section, tiobench_section

SECTIONS = ROOT / "tests" / "fixtures" / "sections"
DATA = ROOT / "tests" / "fixtures" / "data"
LANGS = ["en", "ja"]


def _published(article: str, benchmark: str, metric: str) -> pd.DataFrame:
    published = reference.load(article=article)
    part = published[(published["benchmark"] == benchmark) & (published["metric"] == metric)]
    return beside.as_summary(part)


def _said(found: pd.DataFrame, lang: str) -> str:
    return "\n".join(reasons.sentences(found, lang=lang))


def _store(recipe: str) -> pd.DataFrame:
    data = iolab.load(SECTIONS)
    return data[data["recipe"].astype(str) == recipe].assign(system=lambda d: d["label"].astype(str))


# --------------------------------------------------------------------------- cache flushes


def _sqlbench_with_flushes(create: float, select: float) -> pd.DataFrame:
    """The stored sql-bench runs (hdd-node, ssd-node) with the ``dev_flushes`` the engine records today: create's
    CREATE TABLEs each flush the disk's cache at least once, select a tenth of that at most (the kit's lab finding,
    tests/classic/test_sqlbench.py); the other tests flush nothing here."""
    rows = _store("sqlbench")
    flushes = rows["test"].map({"create": create, "select": select}).fillna(0.0)
    return rows.assign(dev_flushes=flushes)


@pytest.mark.parametrize("lang", LANGS)
def test_flushes_name_the_kernels_count_for_the_test_that_waits_on_them(lang):
    rows = _sqlbench_with_flushes(create=120, select=8)
    found = reasons.flushes(rows)
    assert set(found["test"]) == {"create"} and set(found["system"]) == {"HDD (emulated)", "SATA SSD (emulated)"}
    hdd = found[found["system"] == "HDD (emulated)"].iloc[0]
    seconds = rows[(rows["system"] == "HDD (emulated)") & (rows["test"] == "create")]["runtime_s"].mean()
    assert hdd["value"] == pytest.approx(seconds) and hdd["ratio"] == pytest.approx(1000 * seconds / 120)
    text = _said(found, lang)
    assert "`dev_flushes`" in text and "120" in text and i18n.number(hdd["ratio"]) in text
    section = sqlbench_section(rows, lang=lang)
    assert "`dev_flushes`" in section.findings
    section.close()


@pytest.mark.parametrize("lang", LANGS)
def test_no_flush_reason_without_the_counter_or_with_few_flushes(lang):
    assert reasons.flushes(_sqlbench_with_flushes(create=10, select=1)).empty
    rows = _store("sqlbench")
    assert reasons.flushes(rows).empty  # runs made before the engine recorded dev_flushes
    section = sqlbench_section(rows, lang=lang)  # InnoDB: insert does not tie, no inference either
    assert "CREATE TABLE" not in section.findings and "dev_flushes" not in section.findings
    section.close()


@pytest.mark.parametrize("lang", LANGS)
def test_the_articles_create_is_explained_by_a_flush_per_create_table(lang):
    summary = _published("dedicated-server-2013", "sql-bench", "elapsed")
    found = reasons.flushes_published(summary)
    assert set(found["system"]) == {"SSD Intel 330 (mem=512M)", "ioDrive (mem=512M)"}
    assert found["ratio"].round(0).tolist() == [31.0, 30.0]
    text = commentary.describe(summary, lang=lang, published=True)
    assert "`CREATE TABLE`" in text and i18n.with_unit("1,060", i18n.unit("s", lang)) in text
    assert "3.8%" in text  # insert's spread: the evidence that commits were not flushed
    # insert apart too (InnoDB flushes at every commit): the inference does not hold, nothing is said
    apart = summary.copy()
    apart.loc[(apart["test"] == "insert") & (apart["system"] == "SATA HDD (mem=512M)"), "value"] = 1200.0
    assert reasons.flushes_published(apart).empty
    assert "CREATE TABLE" not in commentary.describe(apart, lang=lang, published=True)


# --------------------------------------------------------------------------- interfaces and ratings


def test_link_ceilings():
    assert interfaces.link_ceiling("SATA 6Gb/s") == 600 and interfaces.link_ceiling("SATA 3Gb/s") == 300
    assert interfaces.link_ceiling("SATA") == 600  # generation unknown: the fastest SATA
    assert interfaces.link_ceiling("PCIe 3.0 x4") == pytest.approx(3940)
    assert interfaces.link_ceiling("PCIe gen2 x8") == 4000
    assert interfaces.link_ceiling("PCIe") is None and interfaces.link_ceiling("SCSI (PCI card)") is None


@pytest.mark.parametrize("lang", LANGS)
def test_712_mb_s_on_the_sata_ssd_is_above_the_link(lang):
    summary = _published("dedicated-server-2013", "tiobench", "throughput")
    found = reasons.above_link(summary, reasons.rated_specs())
    above = found[found["rule"] == "interface"]
    assert above[["system", "test"]].values.tolist() == [["SSD Intel 330 (mem=512M)", "seq_read"]]
    assert above["against"].iloc[0] == 600 and above["detail"].iloc[0] == "SATA 6Gb/s"
    text = commentary.describe(summary, lang=lang, published=True)
    assert "SATA 6Gb/s" in text and i18n.with_unit("712", i18n.unit("MB/s", lang)) in text
    # the cached HDD's 19,339 MB/s is the page cache's, said by the cache commentary: no interface sentence
    assert not (found["system"] == "SATA HDD (16GB RAM)").any()
    # within the link: nothing to say
    within = summary.assign(value=summary["value"].where(summary["value"] < 600, 500.0))
    assert reasons.above_link(within, reasons.rated_specs()).empty


@pytest.mark.parametrize("lang", LANGS)
def test_raid0_striping_against_one_drives_rating(lang):
    summary = _published("x25v-raid0", "gnome-disks", "throughput")
    found = reasons.above_link(summary, reasons.rated_specs())
    assert found["rule"].tolist() == ["striping", "striping"]
    assert found["against"].tolist() == [170.0, 35.0] and found["extra"].tolist() == [4, 4]
    text = _said(found, lang)
    assert "RAID0" in text and "3.8" in text and "rated-specs.csv" in text
    # one drive, not a RAID0: 640 MB/s is no stripe but more than the drive is rated for
    single = summary.assign(system="Intel X25-V 40GB")
    found = reasons.above_link(single, reasons.rated_specs())
    assert found["rule"].tolist() == ["rated", "rated"] and found["against"].tolist() == [170.0, 35.0]
    text = _said(found, lang)
    assert "Intel X25-V 40GB" in text and i18n.with_unit("170", i18n.unit("MB/s", lang)) in text
    # within its rating: nothing to say
    assert reasons.above_link(single.assign(value=[150.0, 30.0]), reasons.rated_specs()).empty


def test_a_name_that_could_be_several_rated_devices_is_none_of_them():
    specs = reasons.rated_specs()
    assert interfaces.rated_device("ioDrive (mem=512M)", specs) is None  # ioDrive, ioDrive2, ioDriveDuo
    assert interfaces.rated_device("Intel X25-V 40GB x4 RAID0 (Adaptec 1430SA)", specs) == "Intel X25-V 40GB"


# --------------------------------------------------------------------------- queue depth


@pytest.mark.parametrize("lang", LANGS)
def test_queue_depth_gains_are_explained_by_parallelism(lang):
    sel = report.select(str(DATA), [], recipe=["crystaldiskmark"], with_results=True)
    summary = tables.summarize(sel.results, value="bw_mbps")
    found = reasons.queue_depth(summary)
    nvme = found[found["system"] == "NVMe"].set_index("direction")
    expected = summary[summary["system"] == "NVMe"].set_index(["test", "direction"])["value"]
    assert nvme.loc["read", "ratio"] == pytest.approx(expected[("RND4K-Q32T1", "read")]
                                                       / expected[("RND4K-Q1T1", "read")])
    assert "HDD (emulated)" not in set(found["system"])  # 150 IOPS at both depths: no gain to explain
    text = narrative.describe(summary, lang=lang)
    assert i18n.text("reasons.heading", lang) in text and "RND4K-Q1T1" in text
    # an emulated device's depths are iolab.report.ceilings' business
    flagged = summary.assign(flags="emulated_latency")
    assert reasons.queue_depth(flagged).empty


# --------------------------------------------------------------------------- CPU-bound


@pytest.mark.parametrize("lang", LANGS)
def test_per_char_ties_are_cpu_bound_in_the_article(lang):
    summary = _published("dedicated-server-2013", "bonnie++", "throughput")
    found = reasons.cpu_bound(summary)
    assert found["test"].tolist() == ["seq_write_per_chr", "seq_read_per_chr"]
    assert found["ratio"].iloc[0] == pytest.approx(260766 / 43441)  # rewrite: ioDrive against the HDD
    text = commentary.describe(summary, lang=lang, published=True)
    assert "`putc`/`getc`" in text and "1,214–1,238" in text
    # the block tests alone: nothing CPU-bound to say
    assert reasons.cpu_bound(summary[~summary["test"].str.endswith("per_chr")]).empty


@pytest.mark.parametrize("lang", LANGS)
def test_bonnie_section_names_the_cpu_use_of_its_per_char_tests(lang):
    section = bonnie_section(_store("bonnie"), lang=lang)
    cpu = {"en": "CPU use of 99% or more", "ja": "CPU使用率99%以上"}[lang]
    assert sum(cpu in s for s in section.sentences) == 1 and "`putc`/`getc`" in section.findings
    section.close()


# --------------------------------------------------------------------------- file size against RAM


@pytest.mark.parametrize("lang", LANGS)
def test_tiobench_fits_in_ram_and_bonnie_does_not(lang):
    tio = reasons.file_vs_ram(_published("dedicated-server-2013", "tiobench", "throughput"))
    assert tio[["system", "extra"]].values.tolist() == [["SATA HDD (16GB RAM)", "fits"]]
    assert tio["value"].iloc[0] == 1024**3 and tio["against"].iloc[0] == 16 * 1024**3
    bonnie = reasons.file_vs_ram(_published("dedicated-server-2013", "bonnie++", "throughput"))
    assert bonnie["extra"].tolist() == ["exceeds"] and bonnie["ratio"].iloc[0] == 2.0
    text = _said(pd.concat([tio, bonnie]), lang)
    assert "1 GiB" in text and "16 GiB" in text and "32 GiB" in text and "2 × RAM" in text
    # every system isolated (mem=512M): no file against RAM to explain; latencies: said beside throughput only
    isolated = _published("dedicated-server-2013", "tiobench", "throughput")
    assert reasons.file_vs_ram(isolated[isolated["cache_isolated"].astype(bool)]).empty
    assert reasons.file_vs_ram(_published("dedicated-server-2013", "tiobench", "latency_avg")).empty
    assert reasons.ram_bytes("SATA HDD (mem=512M)") == 512 * 1024**2 and reasons.ram_bytes("SATA HDD") is None


# --------------------------------------------------------------------------- single-sample maxima


@pytest.mark.parametrize("lang", LANGS)
def test_a_one_run_maximum_is_an_anecdote(lang):
    summary = _published("dedicated-server-2013", "tiobench", "latency_max")
    found = reasons.single_max(summary)
    assert found["test"].tolist() == ["random_write"] and found["extra"].tolist() == [1]
    assert i18n.factor(found["ratio"].iloc[0]) == "431,078"
    text = commentary.describe(summary, lang=lang, published=True)
    assert i18n.text("reasons.heading", lang) in text and "431,078" in text.split(i18n.text("reasons.heading",
                                                                                               lang))[1]
    assert reasons.single_max(_published("dedicated-server-2013", "tiobench", "latency_avg")).empty


@pytest.mark.parametrize("lang", LANGS)
def test_tiobench_section_calls_its_maximum_latency_an_anecdote(lang):
    section = tiobench_section(_store("tiobench"), lang=lang)
    word = {"en": "an anecdote", "ja": "逸話"}[lang]
    assert sum(word in s for s in section.sentences) == 1
    section.close()


def test_every_reason_has_words_in_both_languages():
    keys = set(i18n.catalog("en")["reasons"])
    assert keys == set(i18n.catalog("ja")["reasons"])
    assert reasons.markdown(reasons.from_summary(pd.DataFrame(columns=["system", "test", "value"]))) == ""


# --------------------------------------------------------------------------- on the rendered pages


@pytest.mark.parametrize("lang", LANGS)
def test_the_2013_article_page_gives_its_reasons_once_each(render_once, lang):
    md = render_once(reference="dedicated-server-2013", lang=lang).markdown.read_text(encoding="utf-8")
    heading = i18n.text("reasons.heading", lang)
    assert md.count(heading) >= 4
    for evidence in ("SATA 6Gb/s", "`CREATE TABLE`", "`putc`/`getc`", "431,078"):
        assert evidence in md.split(heading, 1)[1]
    # said once: the SATA link under the tiobench throughput table only, the flushes under sql-bench's
    assert md.count("SATA 6Gb/s") == 1 and md.count("`CREATE TABLE`") == 1


def test_the_compare_page_of_the_stored_runs_explains_the_queue_depth_gain(render_once):
    md = render_once(data=DATA, notebook="compare", lang="en").markdown.read_text(encoding="utf-8")
    why = md.split("**Why**", 1)[1].split("\n\n", 1)[0]
    assert "- **NVMe**: RND4K-Q32T1 read gives " in why and "x RND4K-Q1T1 read (" in why
    assert "HDD (emulated)" not in why  # 150 IOPS at QD1 and QD32: the ceilings paragraph says why
    # why a deeper queue helps is said once, with the first system; the next one points back to it
    assert why.count("With one request in flight") == 1
    assert "- **SATA SSD (emulated)**: RND4K-Q32T1 read gives 2.6x RND4K-Q1T1 read (164 MB/s against 62.4 MB/s), " \
           "for the same reason at a depth of 32." in why


# --------------------------------------------------------------------------- a measured drive against its link


def _nvme_run(width: int, generation: int):
    """The stored NVMe run (Samsung SSD 980 PRO) with the link the engine records today for its drive
    (``targets[].drives[]``, :func:`iolab.devices.health.identity`): the stored manifest predates that record."""
    sel = report.select(str(DATA), [], host=["nvme-node"], recipe=["crystaldiskmark"], with_results=True)
    manifests = sel.manifests.copy()
    drive = {"device": "/dev/nvme0n1", "transport": "nvme", "model": "Samsung SSD 980 PRO 1TB",
             "link": {"pcie": {"generation": generation, "width": width, "speed": "16.0 GT/s PCIe"}}}
    manifests["targets"] = [[{**t, "drives": [drive]} for t in targets] for targets in manifests["targets"]]
    return sel.results, manifests


@pytest.mark.parametrize("lang", LANGS)
def test_a_measured_figure_above_the_drives_recorded_link_is_questioned(lang):
    from iolab.report import ceilings
    results, manifests = _nvme_run(width=4, generation=4)  # the 980 PRO's own link: 7,876 MB/s, nothing to say
    assert reasons.above_measured_link(results, manifests).empty
    assert "PCIe" not in ceilings.markdown(results, manifests, lang=lang)
    results, manifests = _nvme_run(width=1, generation=3)  # trained at one PCIe 3.0 lane: 985 MB/s
    found = reasons.above_measured_link(results, manifests)
    seq = results[(results["test"] == "SEQ1M-Q8T1") & (results["direction"] == "read")]["bw_mbps"].mean()
    row = found[(found["test"] == "SEQ1M-Q8T1") & (found["direction"] == "read")].iloc[0]
    assert row["value"] == pytest.approx(seq) and row["against"] == 985 and row["detail"] == "PCIe 3.0 x1"
    assert set(found["test"]) <= {"SEQ1M-Q8T1", "SEQ1M-Q1T1"}  # RND4K's 705 MB/s fits through the lane
    text = ceilings.markdown(results, manifests, lang=lang)
    assert "PCIe 3.0 x1" in text and i18n.with_unit(i18n.number(seq), i18n.unit("MB/s", lang)) in text


@pytest.mark.parametrize("lang", LANGS)
def test_reasons_alone_sit_under_the_findings_heading_not_a_second_one(lang):
    """x25v-raid0: one system, nothing to compare; its findings are the RAID0 striping reasons. The page showed
    an empty "Findings" heading with "Why" under it; the reasons are now the findings themselves."""
    summary = _published("x25v-raid0", "gnome-disks", "throughput")
    text = commentary.describe(summary, lang=lang, published=True)
    assert text.startswith("- **") and i18n.text("reasons.heading", lang) not in text
    # read and write both above one drive's rating: the source and why (RAID0 striping) said once
    assert ("RAID0" in text) and text.count("rated-specs.csv") == 1
    assert text.count("RAID0 stripes the data" if lang == "en" else "RAID0はデータを") == 1
    # the write, 4.6x one drive's rating, is beyond what 4 drives are rated for together: no stripe explains it
    assert ("4.6x one Intel X25-V 40GB's rated 35.0 MB/s, more than its 4 drives are rated for together (140 MB/s)"
            if lang == "en" else "4台の定格値の合計（140 MB/秒）も超える") in text


@pytest.mark.parametrize("lang", LANGS)
def test_hdparm_cached_reads_are_said_to_measure_memory_and_the_table_says_hdparms_mib(lang):
    """gigaexpress: the RAID5 disk and the flash card tie at -T (1,840 and 1,834 MB/s) while -t differs 8x: -T
    re-reads the page cache, so the tie is the machines' memory, which the findings now say; and the article's
    "MB/s" are hdparm's MiB/s, which the table's note says."""
    summary = _published("gigaexpress", "hdparm", "throughput")
    found = reasons.memory_read(summary)
    assert found["test"].tolist() == ["-T cached reads"] and found["extra"].tolist() == [2]
    text = _said(found, lang)
    assert "hdparm -T" in text and ("memory and CPU, not their disk" if lang == "en" else "メモリとCPU") in text
    assert "-T cached reads" in reasons.from_summary(summary)["test"].tolist()
    table = articles.reference_table(reference.load(article="gigaexpress"), benchmark="hdparm", metric="throughput",
                                     lang=lang)
    assert any(("MiB/s as \"MB/sec\"" if lang == "en" else "MiB/秒を「MB/sec」") in n for n in table.notes)
    # a measured run's test ids are not the article's names: its hdparm section says this in its own note
    assert reasons.memory_read(summary.assign(test="cached-reads")).empty
