"""Charts as an editor prints them (issue 23 item 7), asserted on the drawn matplotlib figures and rendered pages.

* one colour per system in every chart kind (bars, latency lines, QD and scaling curves, fleet lines);
* value labels are the tables' text (measured: i18n.number as in tables.pivot; published: as printed);
* memory (hdparm -T, a page cache that held tiobench's file) on an axis of its own beside the device's;
* one figure said in a sentence, not a lone full-width bar; a 1x line under speed-ups;
* every figure of a rendered reference page numbered, captioned and referred to, in en and ja.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from iolab.analysis import reference
from iolab.report import articles, beside, curveplots, figures, fleetplots, i18n, palette, plot, sections, tables
from iolab.report import notebooks as report

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "tests" / "fixtures" / "sections"


def _summary(name: str, benchmark: str, metric: str, lang: str = "en") -> tuple[pd.DataFrame, pd.DataFrame]:
    """An article's table as the compare notebook charts it (its rows, and the summary with an ``x`` column)."""
    published = reference.load(article=name)
    part = published[(published["benchmark"] == benchmark) & (published["metric"] == metric)]
    summary = beside.as_summary(part, lang=lang)
    summary["x"] = [i18n.test_label(t, d, lang) for t, d in zip(summary["test"], summary["direction"])]
    return part, summary


def _bar_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts if t.get_text() and t.get_gid() is None]


def _face(artist) -> tuple:
    return tuple(round(c, 4) for c in to_rgb(artist))


# --------------------------------------------------------------------------- one colour per system


def test_each_system_keeps_one_colour_in_every_chart_kind():
    plot.setup("en")
    palette.reset()
    systems = ["NVMe", "SATA SSD", "HDD"]
    rows = pd.DataFrame([{"system": s, "test": "SEQ", "direction": "read", "value": v}
                         for s, v in zip(systems, (3000.0, 500.0, 150.0))])
    # the bar chart draws only SATA SSD and HDD: the colour comes from the system, not the plot order
    ax = plot.bars(rows[rows["system"] != "NVMe"], x="test", y="value", hue="system")
    bars = {t: _face(h.patches[0].get_facecolor()) for h, t in zip(*ax.get_legend_handles_labels())}
    latency = pd.DataFrame([{"system": s, "percentile": p, "latency_ms": v * (i + 1)}
                            for i, s in enumerate(reversed(systems)) for p, v in (("p50", 0.1), ("p99", 0.5))])
    lines = plot.latency_percentiles(latency, hue="system")
    drawn = {t: _face(h.get_color()) for h, t in zip(*lines.get_legend_handles_labels())}
    sweep = pd.DataFrame([{"system": s, "iodepth": q, "iops": 1000.0 * q * (i + 1), "lat_p99_us": 100.0 * q}
                          for i, s in enumerate(systems) for q in (1, 2, 4, 8)])
    _, curve_ax = plt.subplots()
    curveplots.qd_plot(sweep, hue="system", ax=curve_ax, knee=False)
    curves = {line.get_label(): _face(line.get_color()) for line in curve_ax.get_lines() if line.get_label() in systems}
    _, scale_ax = plt.subplots()
    scaling = sweep.rename(columns={"iodepth": "numjobs", "iops": "bw_mbps"})
    curveplots.scaling_plot(scaling, hue="system", ax=scale_ax)
    scaled = {line.get_label(): _face(line.get_color()) for line in scale_ax.get_lines()
              if line.get_label() in systems}
    fleet = pd.DataFrame([{"test": s, "n_hosts": n, "total": 100.0 * n} for s in systems for n in (1, 2, 3)])
    fleet_ax = fleetplots.scaling_plot(fleet, hue="test", ideal=False)
    hosts = {line.get_label(): _face(line.get_color()) for line in fleet_ax.get_lines()}
    for system in systems:
        expected = _face(palette.color(system))
        for kind in (bars, drawn, curves, scaled, hosts):
            if system in kind:
                assert kind[system] == expected, (system, kind)
    assert set(drawn) == set(curves) == set(scaled) == set(hosts) == set(systems) and set(bars) == {"SATA SSD", "HDD"}
    assert len({_face(palette.color(s)) for s in systems}) == 3


# --------------------------------------------------------------------------- labels as the tables print them


def test_measured_bar_labels_are_the_tables_values():
    plot.setup("en")
    rows = pd.DataFrame([{"system": s, "test": t, "direction": "read", "bw_mbps": v, "rep": r}
                         for s, t, base in (("A", "SEQ", 318.66), ("B", "SEQ", 12.345), ("A", "RND", 0.01234),
                                            ("B", "RND", 1234.5))
                         for r, v in ((1, base), (2, base))])
    summary = tables.summarize(rows, value="bw_mbps")
    table = tables.pivot(summary, ci=False)
    summary["x"] = summary["test"]
    ax = plot.bars(summary, x="x", y="value", hue="system")
    cells = [table.frame.loc[(t, "read"), s] for t, s in zip(summary["test"], summary["system"])]
    assert sorted(_bar_texts(ax)) == sorted(cells)
    # one rule, i18n.number's (318.66 -> 319, 0.01234 -> 0.012), not a second one of 3 significant digits
    assert cells == [i18n.number(v) for v in summary["value"]] and "319" in cells and "0.012" in cells


def test_published_bar_labels_are_printed_as_the_article_printed_them():
    plot.setup("en")
    part, summary = _summary("gigaexpress", "hdparm", "throughput")
    table = articles.reference_table(part, benchmark="hdparm", metric="throughput")
    fig = figures.summary_chart(summary, unit="MB/s", ylabel="MB/s", lang="en", published=True)
    drawn = sorted(text for ax in fig.axes for text in _bar_texts(ax))
    assert drawn == sorted(v for v in table.frame.to_numpy().ravel() if v != tables.DASH)
    assert "318.66" in drawn and "1,840" in drawn


def test_sqlbench_chart_labels_each_bar_with_its_table_cell():
    plot.setup("en")
    rows = report.select(STORE, with_results=True).for_recipe("sqlbench").results
    section = sections.sqlbench_section(rows)
    table = section.tables[0]
    drawn = _bar_texts(section.figures[0].axes[0])
    cells = [v for test, row in table.frame.iterrows() if test != table.frame.index[-1] for v in row if v != tables.DASH]
    assert sorted(drawn) == sorted(cells) and len(drawn) > 4


# --------------------------------------------------------------------------- memory beside disk, one value, 1x line


def test_hdparm_cached_reads_have_an_axis_of_their_own():
    plot.setup("en")
    _, summary = _summary("gigaexpress", "hdparm", "throughput")
    fig = figures.summary_chart(summary, unit="MB/s", ylabel="MB/s", lang="en", published=True)
    disk, memory = fig.axes
    assert [t.get_text() for t in memory.get_xticklabels()] == ["-T cached reads"]
    assert all("-t" in t.get_text() for t in disk.get_xticklabels())
    assert len(disk.patches) == 4 and len(memory.patches) == 2
    assert disk.get_title() == i18n.text("charts.disk", "en") and memory.get_title() == i18n.text("charts.memory", "en")
    assert figures.split_note(fig, "ja") == i18n.text("charts.split_note", "ja")
    # the device's bars are readable: the tallest disk bar fills its own axis, not a sixth of a shared one
    assert max(p.get_height() for p in disk.patches) > 0.7 * disk.get_ylim()[1]


def test_tiobench_cache_inflated_system_is_drawn_apart_from_the_isolated_ones():
    plot.setup("en")
    _, summary = _summary("dedicated-server-2013", "tiobench", "throughput")
    memory = figures.memory_rows(summary)
    assert set(summary.loc[memory, "system"]) == {"SATA HDD (16GB RAM)"}
    assert set(summary.loc[memory, "test"]) == {"seq_read", "random_read"}  # its writes went to the device
    fig = figures.summary_chart(summary, unit="MB/s", ylabel="MB/s", lang="en", published=True)
    assert len(fig.axes) == 2 and len(fig.axes[1].patches) == 2
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == list(dict.fromkeys(summary["system"]))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_one_figure_is_a_sentence_not_a_lone_bar(lang):
    part, summary = _summary("hyperv-tpcb", "tpc-b", "speedup", lang)
    assert figures.summary_chart(summary, unit="x", ylabel="", lang=lang, published=True) is None
    table = articles.reference_table(part, benchmark="tpc-b", metric="speedup", lang=lang)
    # an article's one ratio: its findings say it right after, so the sentence in place of a chart does not
    assert figures.single_sentence(summary, "x", lang, published=True) == i18n.text("charts.single_ratio", lang)
    measured = summary.assign(metric="tps")  # any other figure alone: said here, as the table gives it
    said = figures.single_sentence(measured, "x", lang, published=True)
    assert table.frame.iloc[0, 0] in said and summary["system"].iloc[0] in said
    assert ("2.5x" in said) if lang == "en" else ("2.5倍" in said)


def test_speedups_are_drawn_over_a_1x_line():
    plot.setup("en")
    _, summary = _summary("nytro", "crystaldiskmark-3", "speedup")
    fig = figures.summary_chart(summary, unit="x", ylabel="", lang="en", published=True)
    (ax,) = fig.axes
    lines = [line for line in ax.get_lines() if line.get_gid() == "reference"]
    assert len(lines) == 1 and list(lines[0].get_ydata()) == [1.0, 1.0]
    assert i18n.text("charts.speedup_line", "en") in [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(ax.patches) == len(summary)


# --------------------------------------------------------------------------- captions and references


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_show_numbers_captions_and_refers_to_each_figure(lang):
    plot.setup(lang)
    page = figures.page(lang)
    shown = []
    for caption in ("Throughput", "Latency"):
        fig, _ = plt.subplots()
        figures.show(shown.append, fig, alt=caption, caption=caption, lang=lang)
    texts = [getattr(x, "data", None) for x in shown]  # lead, image, caption; lead, image, caption
    assert [type(x).__name__ for x in shown] == ["Markdown", "Image", "Markdown"] * 2
    refer = {"en": "Figure {n} ", "ja": "図{n}は"}[lang]
    assert texts[0].startswith(refer.format(n=1)) and texts[3].startswith(refer.format(n=2))
    assert texts[2] == page.caption(1, "Throughput") == i18n.text("charts.caption", lang, n=1, caption="Throughput")
    assert texts[5] == ("**Figure 2:** Latency." if lang == "en" else "**図2**：Latency。")
    with pytest.raises(Exception, match="without a caption"):
        figures.show(shown.append, plt.figure(), alt="x", caption="", lang=lang)


def _figures_of(markdown: str, lang: str) -> list[tuple[int, bool, bool]]:
    """(number, referred to in a sentence, captioned) for each image of a rendered page, in order."""
    name = "Figure " if lang == "en" else "図"
    captions = re.compile(r"^\*\*" + name + r"(\d+)" + (r":\*\*" if lang == "en" else r"\*\*："), re.M)
    found = []
    for match in captions.finditer(markdown):
        n = int(match.group(1))
        before = markdown[:match.start()]
        referred = bool(re.search(r"^" + re.escape(name) + str(n) + r"\D", before, re.M))
        found.append((n, referred, bool(markdown[match.end():].split("\n", 1)[0].strip())))
    return found


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_rendered_reference_page_captions_and_refers_to_every_figure(tmp_path, lang):
    files = report.report(reference="gigaexpress", lang=lang, out=tmp_path / lang)
    markdown = files.markdown.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\([^)]+\.png\)", markdown)
    found = _figures_of(markdown, lang)
    assert len(images) == len(found) == len(files.figures) >= 1
    assert [n for n, _, _ in found] == list(range(1, len(found) + 1))
    assert all(referred and captioned for _, referred, captioned in found)
    assert i18n.text("charts.split_note", lang) in markdown  # -T and -t on separate axes, and said so


def test_a_rendered_page_says_a_one_figure_table_instead_of_drawing_it(tmp_path):
    files = report.report(reference="hyperv-tpcb", lang="ja", out=tmp_path)
    markdown = files.markdown.read_text(encoding="utf-8")
    assert not files.figures and markdown.count("棒1本のグラフにせず") == 2


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_tiobench_section_draws_rates_a_page_cache_served_on_their_own_axis(lang):
    plot.setup(lang)
    rows = report.select(STORE, with_results=True).for_recipe("tiobench").results
    plain = sections.tiobench_section(rows, lang=lang).figures[0]
    assert len(plain.axes) == 1 and plain.caption == i18n.text("sections.tio.alt", lang)
    cached = rows.copy()
    first = cached["system"] == cached["system"].iloc[0]
    reads = cached["test"].isin(set(cached.loc[first, "test"]) - set(cached.loc[first, "test"].iloc[:2]))
    cached.loc[first & reads, "flags"] = "cache_inflated"
    figure = sections.tiobench_section(cached, lang=lang).figures[0]
    disk, memory = figure.axes
    assert len(memory.patches) == (first & reads).groupby(cached["test"]).any().sum()
    assert len(disk.patches) + len(memory.patches) == len(plain.axes[0].patches)
    assert figure.caption.endswith(i18n.text("charts.split_note", lang))
    # the labels stay the table's text, on either axis
    table_cells = {v for t in sections.tiobench_section(cached, lang=lang).tables
                   for v in t.frame[i18n.text("sections.tio.col_rate", lang)]}
    assert {text for ax in figure.axes for text in _bar_texts(ax)} <= table_cells
