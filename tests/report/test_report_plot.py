"""Plots: artists, not pixels; Japanese glyphs from matplotlib-fontja without warnings."""
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from iolab.report import plot  # noqa: E402
from iolab.core.errors import IolabError  # noqa: E402


@pytest.fixture
def summary():
    return pd.DataFrame({
        "test": ["SEQ", "SEQ", "RND", "RND"],
        "system": ["HDD", "SSD", "HDD", "SSD"],
        "value": [100.0, 500.0, 0.5, 150.0],
        "ci_low": [98.0, 490.0, 0.4, 148.0],
        "ci_high": [102.0, 510.0, 0.6, 152.0],
    })


def test_bar_positions_are_computed_apart_from_drawing(summary):
    pos = plot.bar_positions(summary, x="test", y="value", hue="system", low="ci_low", high="ci_high")
    assert list(pos["pos"]) == pytest.approx([-0.2, 0.2, 0.8, 1.2])
    assert list(pos["err_high"]) == pytest.approx([2.0, 10.0, 0.1, 2.0])
    with pytest.raises(IolabError, match="no column 'nope'"):
        plot.bar_positions(summary, x="nope", y="value")


def test_bars_draws_one_patch_per_row_with_error_bars_and_log_axis(summary):
    plot.setup("en")
    ax = plot.bars(summary, x="test", y="value", hue="system", low="ci_low", high="ci_high",
                   ylabel="Throughput (MB/s)")
    try:
        assert len(ax.patches) == 4
        assert ax.get_yscale() == "log"  # 0.5 next to 500: spans more than 100x
        assert [t.get_text() for t in ax.get_xticklabels()] == ["SEQ", "RND"]
        assert ax.get_ylabel() == "Throughput (MB/s, log scale)"  # a log axis says so
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["HDD", "SSD"]
        assert len(ax.collections) == 2  # one error-bar collection per system
    finally:
        plt.close(ax.figure)
    linear = plot.bars(summary.iloc[:2], x="test", y="value", hue="system")
    assert linear.get_yscale() == "linear"
    plt.close(linear.figure)


def test_japanese_labels_render_without_missing_glyphs(summary):
    rc = plot.setup("ja")
    assert rc["font.sans-serif"][0] == "IPAexGothic"
    assert matplotlib.rcParams["font.family"][0] == "IPAexGothic"
    data = summary.assign(test=["シーケンシャル読み込み", "シーケンシャル読み込み", "ランダム書き込み", "ランダム書き込み"],
                          system=["ハードディスク", "SSD", "ハードディスク", "SSD"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ax = plot.bars(data, x="test", y="value", hue="system", ylabel="スループット (MB/秒)", title="テスト結果")
        ax.figure.savefig(__import__("io").BytesIO(), format="png")
    plt.close(ax.figure)
    glyphs = [str(w.message) for w in caught if "missing from" in str(w.message) or "Glyph" in str(w.message)]
    assert glyphs == []
    from matplotlib import font_manager
    used = font_manager.findfont(font_manager.FontProperties(family=matplotlib.rcParams["font.sans-serif"][0]))
    assert used.endswith("ipaexg.ttf")


def test_english_setup_still_falls_back_to_japanese_glyphs(summary):
    plot.setup("en")
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", "IPAexGothic"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ax = plot.bars(summary.assign(system=["東京", "大阪", "東京", "大阪"]), x="test", y="value", hue="system")
        ax.figure.savefig(__import__("io").BytesIO(), format="png")
    plt.close(ax.figure)
    assert not [w for w in caught if "missing from" in str(w.message)]


def test_percentiles_and_latency_plot():
    data = pd.DataFrame({"system": ["A", "A", "B"], "test": ["R", "R", "R"], "direction": ["read"] * 3,
                         "lat_p50_us": [100.0, 300.0, 40.0], "lat_p99_us": [1000.0, 1000.0, 80.0],
                         "lat_p999_us": [2000.0, 2000.0, 90.0], "lat_max_us": [5000.0, 5000.0, 100.0]})
    frame = plot.percentile_frame(data)
    a = frame[frame["system"] == "A"].set_index("percentile")["latency_ms"]
    assert a["p50"] == pytest.approx(0.2) and a["max"] == pytest.approx(5.0)  # median over repetitions, in ms
    ax = plot.latency_percentiles(frame, ylabel="Latency (ms)")
    assert ax.get_yscale() == "log" and len(ax.get_lines()) >= 2  # 0.04 to 5 ms: more than 100x
    # a log axis says so and its ticks are plain numbers (the ja page showed 10^-1 ... 10^2)
    assert ax.get_ylabel() == "Latency (ms, log scale)"
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and not any("10^" in t or "$" in t or "e-" in t for t in ticks), ticks
    assert "0.1" in ticks and "1" in ticks
    # within 100x the axis is linear, as the bar charts'
    narrow = plot.latency_percentiles(frame[frame["system"] == "A"], ylabel="Latency (ms)")
    assert narrow.get_yscale() == "linear" and narrow.get_ylabel() == "Latency (ms)"
    image = plot.to_image(ax.figure, alt="latency")
    assert image.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.alt == "latency"


def test_dots_for_dozens_of_systems():
    data = pd.DataFrame({"test": ["SEQ"] * 30 + ["RND"] * 30, "system": [f"s{i}" for i in range(30)] * 2,
                         "value": [float(i + 1) for i in range(30)] + [float(1000 * (i + 1)) for i in range(30)]})
    pos = plot.dot_positions(data, x="test", y="value")
    seq = pos[pos["test"] == "SEQ"].sort_values("dot_rank")
    assert seq["dot_y"].iloc[0] == 30.0 and seq["dot_pos"].iloc[0] == pytest.approx(-0.3)
    assert seq["dot_pos"].iloc[-1] == pytest.approx(0.3)
    ax = plot.dots(data, x="test", y="value", label="system", annotate=1, ylabel="MB/s")
    try:
        assert ax.get_yscale() == "log"
        # the log axis says so, with plain tick numbers (1,000 not 10^3), as the bar charts
        assert ax.get_ylabel() == "MB/s (log scale)"
        ax.figure.canvas.draw()
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert "1,000" in ticks and not any("$" in t for t in ticks), ticks
        assert len(ax.collections[0].get_offsets()) == 60
        assert sorted(t.get_text() for t in ax.texts) == ["s0", "s0", "s29", "s29"]  # best and worst per test
    finally:
        plt.close(ax.figure)


def test_dots_on_a_linear_axis_write_thousands_as_the_other_charts():
    """A linear dot chart goes through :func:`plot.y_axis` too: 2,000 not matplotlib's 2000; its label stays."""
    data = pd.DataFrame({"test": ["RND4K"] * 12, "system": [f"s{i}" for i in range(12)],
                         "value": [1000.0 + 500.0 * i for i in range(12)]})  # 1,000..6,500 IOPS: 6.5x, linear
    ax = plot.dots(data, x="test", y="value", label="system", ylabel="IOPS")
    try:
        ax.figure.canvas.draw()
        assert ax.get_yscale() == "linear" and ax.get_ylabel() == "IOPS"
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert any(float(t.replace(",", "")) >= 1000 for t in ticks), ticks
        for text in ticks:
            assert text == plot.tick_label(float(text.replace(",", ""))), ticks
        assert "2,000" in ticks and "2000" not in ticks, ticks
    finally:
        plt.close(ax.figure)


def test_not_isolated_systems_are_hatched(summary):
    ax = plot.bars(summary, x="test", y="value", hue="system", hatched=["SSD"])
    try:
        assert [p.get_hatch() for p in ax.patches] == [None, None, "///", "///"]
    finally:
        plt.close(ax.figure)


def test_bars_carry_values_mark_unmeasured_and_keep_each_systems_colour(summary):
    plot.setup("en")
    frame = summary.copy()
    frame.loc[(frame["system"] == "SSD") & (frame["test"] == "SEQ"), "value"] = float("nan")
    ax = plot.bars(frame, x="test", y="value", hue="system")
    try:
        texts = [t.get_text() for t in ax.texts]
        assert plot.UNMEASURED in texts  # the +++++ result is marked, not a silent gap
        assert any(t and t[0].isdigit() for t in texts)  # value labels on the bars
        ticks = [plot.tick_label(v) for v in (1000.0, 0.5, 10.0)]
        assert ticks == ["1,000", "0.5", "10"]
    finally:
        plt.close(ax.figure)
    # SSD keeps its colour in a chart where HDD is missing
    hdd, ssd = plot.system_color("HDD"), plot.system_color("SSD")
    only = plot.bars(summary[summary["system"] == "SSD"], x="test", y="value", hue="system")
    assert tuple(only.patches[0].get_facecolor()[:3]) == pytest.approx(tuple(ssd))
    assert hdd != ssd
    plt.close(only.figure)


def test_log_axis_starts_a_decade_below_the_smallest_value():
    """1,214 next to 578,389 KB/s: the axis starts at 100 (not at an arbitrary 1 or 1,000), every bar from there."""
    from iolab.report import barlabels
    assert barlabels.log_baseline([1214, 101934, float("nan")]) == 100
    assert barlabels.log_baseline([1000, 5000]) == 100  # a bar exactly on a decade still has a decade of length
    assert barlabels.log_baseline([0.58, 97.8]) == pytest.approx(0.01)
    plot.setup("en")
    frame = pd.DataFrame({"test": ["putc", "block", "rewrite", "getc"], "system": ["HDD"] * 4,
                          "value": [1214.0, 101934.0, 578389.0, float("nan")]})
    ax = plot.bars(frame, x="test", y="value", hue="system")
    try:
        assert ax.get_yscale() == "log" and ax.get_ylim()[0] == pytest.approx(100)
        assert [p.get_y() for p in ax.patches] == pytest.approx([100] * 4)
        assert [p.get_y() + p.get_height() for p in ax.patches[:3]] == pytest.approx([1214, 101934, 578389])
        marker = [t for t in ax.texts if t.get_text() == plot.UNMEASURED][0]
        assert marker.xy[1] == pytest.approx(100)  # the +++++ marker sits on the axis, not at log(0)
    finally:
        plt.close(ax.figure)


def _label_boxes(ax):
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text() and t.get_text()[0].isdigit()]
    return [t.get_window_extent(renderer) for t in labels], ax.get_window_extent(renderer)


@pytest.mark.parametrize("spread", [0, 12345])  # equal bars (labels side by side) and a staircase
def test_value_labels_of_many_narrow_bars_never_intersect(spread):
    """72 bars of six-digit values in a 10-inch chart: horizontal labels would run into each other."""
    import itertools
    plot.setup("en")
    frame = pd.DataFrame([{"test": f"T{t}", "system": f"S{s}", "value": 123456.0 + spread * s + 777 * t}
                          for t in range(12) for s in range(6)])
    fig, ax = plt.subplots(figsize=(10, 4))
    plot.bars(frame, x="test", y="value", hue="system", ax=ax)
    try:
        boxes, frame_box = _label_boxes(ax)
        assert len(boxes) == 72
        assert not [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
        centres = sorted((b.x0 + b.x1) / 2 for b in boxes)
        pitch = min(b - a for a, b in zip(centres, centres[1:]))
        assert max(b.width for b in boxes) <= pitch + 0.5  # no label spills over its neighbour's bar
        assert max(b.y1 for b in boxes) <= frame_box.y1 + 0.5  # none clipped at the top of the axes
        assert all(t.get_fontsize() >= 5 for t in ax.texts)
    finally:
        plt.close(fig)


@pytest.mark.parametrize("tests, systems, width", [(4, 3, 10), (6, 2, 10), (3, 4, 8)])
def test_value_labels_fit_the_width_the_layout_leaves_beside_a_long_legend(tests, systems, width):
    """Level labels that fit the axes as first drawn ran into each other once plot.tight narrowed the axes for a
    legend of long system names: tight fits them again at the final width."""
    import itertools
    plot.setup("en")
    names = [f"System {s} on a long description of its disks" for s in range(systems)]
    frame = pd.DataFrame([{"test": f"T{t}", "system": name, "value": 1234.5 + 7 * t + s}
                          for t in range(tests) for s, name in enumerate(names)])
    fig, ax = plt.subplots(figsize=(width, 4))
    plot.bars(frame, x="test", y="value", hue="system", ax=ax)
    plot.tight(fig)
    try:
        boxes, frame_box = _label_boxes(ax)
        assert len(boxes) == tests * systems
        assert not [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
        centres = sorted((b.x0 + b.x1) / 2 for b in boxes)
        assert max(b.width for b in boxes) <= min(b - a for a, b in zip(centres, centres[1:])) + 0.5
        assert max(b.y1 for b in boxes) <= frame_box.y1 + 0.5
    finally:
        plt.close(fig)


def test_a_closed_bar_chart_is_freed():
    """What plot.tight needs to fit the value labels again must not keep a figure alive (the explorer draws a new
    one at every change)."""
    import gc
    import weakref
    plot.setup("en")
    fig, ax = plt.subplots(figsize=(6, 3))
    plot.bars(pd.DataFrame({"test": ["A", "B"], "system": ["x", "x"], "value": [1.0, 2.0]}),
              x="test", y="value", hue="system", ax=ax)
    plot.tight(fig)
    freed = weakref.ref(fig)
    plt.close(fig)
    del fig, ax
    gc.collect()
    assert freed() is None


def test_few_wide_bars_keep_horizontal_labels():
    plot.setup("en")
    frame = pd.DataFrame({"test": ["SEQ", "RND"], "system": ["HDD", "HDD"], "value": [150.0, 1.2]})
    fig, ax = plt.subplots(figsize=(8, 4))
    plot.bars(frame, x="test", y="value", hue="system", ax=ax)
    try:
        assert [t.get_rotation() for t in ax.texts if t.get_text()] == [0.0, 0.0]
    finally:
        plt.close(fig)


ARTICLE_SYSTEMS = ["SATA HDD (mem=512M)", "SSD Intel 330 (mem=512M)", "ioDrive (mem=512M)", "SATA HDD (16GB RAM)"]


@pytest.mark.parametrize("tests, systems, width, turned", [
    (["ランダムシーク"], 1, 8, False),  # one test: its label under its bars, level
    (["Read (all positions)", "Write (all positions)"], 1, 10, False),  # two labels with room: were turned
    (["Per-char write", "Block write", "Rewrite", "Per-char read", "Block read"], 4, 10, False),
    (["ATIS", "alter-table", "big-tables", "connect", "create", "insert", "select", "wisconsin"], 4, 10, True),
    (["Sequential read", "Sequential write", "512K random read/write", "4K random read/write",
      "4K QD32 random read/write"], 1, 10, True),  # nytro: the last two would touch
])
def test_category_labels_are_turned_only_where_level_they_would_run_together(tests, systems, width, turned):
    """Measured at the figure's final width (plot.tight: after the layout made room for the legend), not guessed
    from the labels' length: 'alter-table' beside 'big-tables' ran together; two labels with room were turned."""
    plot.setup("en")
    fig, ax = plt.subplots(figsize=(width, 4))
    frame = pd.DataFrame([{"test": t, "system": name, "value": 100.0 + i}
                          for i, t in enumerate(tests) for name in ARTICLE_SYSTEMS[:systems]])
    plot.bars(frame, x="test", y="value", hue="system", ax=ax)  # the 2013 article's legend, right of the axes
    plot.tight(fig)
    try:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        assert {t.get_rotation() for t in labels} == {30.0 if turned else 0.0}
        if not turned:  # level: none touches the next (a turned label's box is not its outline)
            fig.canvas.draw()
            boxes = [t.get_window_extent() for t in labels]
            assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
    finally:
        plt.close(fig)


def test_bars_on_a_bare_figure_fit_their_labels_and_keep_its_canvas():
    """The explorer's widgets draw on a matplotlib Figure without a pyplot canvas."""
    from matplotlib.figure import Figure
    plot.setup("en")
    fig = Figure(figsize=(4, 3))
    canvas = fig.canvas
    ax = fig.subplots()
    frame = pd.DataFrame([{"test": f"T{t}", "system": f"S{s}", "value": 123456.0} for t in range(6) for s in range(4)])
    plot.bars(frame, x="test", y="value", hue="system", ax=ax)
    assert fig.canvas is canvas
    assert {t.get_rotation() for t in ax.texts if t.get_text()} == {90.0}  # 24 six-digit labels in 4 inches: upright


def test_fleet_tail_chart_labels_its_bars_and_its_log_axis():
    """The fleet section's per-host tail chart: 10^2 ticks, no log note, no value labels and an arbitrary baseline."""
    from iolab.report import barlabels, fleetplots
    one = pd.DataFrame({"host": ["web1"] * 4 + ["web2"] * 4, "percentile": ["p50", "p99", "p99.9", "max"] * 2,
                        "latency_ms": [2.5, 114.0, 210.0, 640.0, 2.6, 128.0, 230.0, 700.0]})
    ax = fleetplots.tail_latency_plot(one, y="latency_ms", labels={"y": "Latency (ms)"})
    try:
        assert ax.get_yscale() == "log" and ax.get_ylabel() == "Latency (ms, log scale)"
        assert ax.get_ylim()[0] == barlabels.log_baseline(one["latency_ms"]) == 0.1  # a decade below 2.5
        assert sorted(t.get_text() for t in ax.texts) == sorted(plot.bar_label(v) for v in one["latency_ms"])
        ax.figure.canvas.draw()
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert "100" in ticks and not any("$" in t for t in ticks), ticks
    finally:
        plt.close(ax.figure)
    linear = fleetplots.tail_latency_plot(one[one["percentile"] != "p50"], y="latency_ms", log=False,
                                          labels={"y": "Latency (ms)"})
    try:
        assert linear.get_yscale() == "linear" and linear.get_ylabel() == "Latency (ms)"
    finally:
        plt.close(linear.figure)


def test_one_value_axis_rule_for_every_chart():
    """:func:`plot.y_axis`, the axis rule bars, dots, latency percentiles, the fleet tail chart and the curve
    plots share: plain tick numbers; where log, '(log scale)' in the report's language after the label, no minor
    tick labels, and bars from a decade below the smallest."""
    from iolab.report import i18n
    fig, ax = plt.subplots()
    try:
        ax.bar([0, 1], [250.0, 90000.0])
        plot.y_axis(ax, log=True, label="Latency (µs)", bars=[250.0, 90000.0])
        fig.canvas.draw()
        assert ax.get_yscale() == "log" and ax.get_ylabel() == "Latency (µs, log scale)"
        assert ax.get_ylim()[0] == pytest.approx(10)  # a decade below 250: the short bar still has a length
        major = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert {"100", "1,000", "10,000"} <= set(major), major
        assert not [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()]
    finally:
        plt.close(fig)
    fig, ax = plt.subplots()
    try:  # linear: the label seaborn (or the caller) set stays, ticks still carry thousands separators
        ax.plot([0, 1], [0, 500000])
        ax.set_ylabel("IOPS")
        plot.y_axis(ax, log=False)
        fig.canvas.draw()
        assert ax.get_yscale() == "linear" and ax.get_ylabel() == "IOPS"
        assert "500,000" in [t.get_text() for t in ax.get_yticklabels()]
    finally:
        plt.close(fig)
    plot.setup("ja")
    fig, ax = plt.subplots()
    try:  # the note is in the report's language; no label: the note alone
        ax.plot([0, 1], [1, 1000])
        plot.y_axis(ax, log=True, label=None)
        assert ax.get_ylabel() == f"（{i18n.text('labels.log_scale', 'ja')}）" != "(log scale)"
    finally:
        plt.close(fig)
        plot.setup("en")


def test_systems_with_the_same_latencies_both_show():
    """Two systems whose percentiles coincide (the demo's NVMe and SATA SSD read, HDD and HDD cached): each line
    keeps its colour, has a marker of its own and is narrower than the one drawn before, so the first peeks out
    from under the second and the legend tells them apart."""
    from iolab.report import palette
    palette.reset()  # a page's palette: ten colours, then round again; other tests in this process drew other names
    same = {"test": "R", "direction": "read", "lat_p50_us": 60.0, "lat_p99_us": 160.0, "lat_p999_us": 270.0,
            "lat_max_us": 730.0}
    frame = plot.percentile_frame(pd.DataFrame([{"system": "NVMe", **same}, {"system": "SATA SSD", **same}]))
    ax = plot.latency_percentiles(frame, ylabel="Latency (ms)")
    first, second = ax.get_lines()[:2]
    assert list(first.get_ydata()) == list(second.get_ydata())  # on top of each other ...
    assert first.get_marker() != second.get_marker()  # ... yet told apart
    assert first.get_linewidth() > second.get_linewidth() and first.get_markersize() > second.get_markersize()
    assert first.get_color() != second.get_color()
    legend = {t.get_text(): h.get_marker() for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert legend == {"NVMe": first.get_marker(), "SATA SSD": second.get_marker()}


@pytest.mark.parametrize("lang, label, expected", [
    ("en", "Throughput (MB/s)", "Throughput (MB/s, log scale)"),
    ("en", "IOPS", "IOPS (log scale)"),
    ("ja", "スループット（MB/秒）", "スループット（MB/秒、対数目盛）"),
    ("ja", "IOPS", "IOPS（対数目盛）"),
])
def test_a_log_axis_note_goes_inside_the_labels_brackets(lang, label, expected):
    """One bracket, not "(MB/s) (log scale)": the note joins the unit's."""
    from iolab.report import i18n
    plot.setup(lang)
    fig, ax = plt.subplots()
    try:
        ax.plot([0, 1], [1, 1000])
        plot.y_axis(ax, log=True, label=label)
        assert ax.get_ylabel() == expected == i18n.with_note(label, i18n.text("labels.log_scale", lang), lang)
    finally:
        plt.close(fig)
        plot.setup("en")


@pytest.mark.parametrize("label, expected", [
    ("-tバッファ付きディスク読み込み（交互に5回実行した平均）", "-tバッファ付きディスク読み込み\n（交互に5回実行した平均）"),
    ("-t buffered disk reads (mean of 5 alternating runs)", "-t buffered disk reads\n(mean of 5 alternating runs)"),
    ("4K QD32 random read/write", "4K QD32 random read/write"),  # fits: unchanged
    ("SEQ1M-Q8T1 read", "SEQ1M-Q8T1 read"),
])
def test_a_long_category_label_takes_two_lines(label, expected):
    """The gigaexpress chart: a 30-character turned label took half the figure's height and squashed its bars."""
    assert plot.wrapped_tick(label) == expected


@pytest.mark.parametrize("values, log, systems", [
    ([3.3, 13.0, 14.0, 40.0, 90.0], False, 1),  # nytro: a label on the line met the short first bar's '3.3'
    ([0.01, 1.5, 0.9, 0.95, 0.5], True, 1),     # 1x near the top of a log axis
    ([2.0, 90.0, 3.0, 4.0, 1.5], False, 2),     # two systems: the line in their legend
])
def test_the_reference_line_is_named_in_a_legend_clear_of_the_bars_labels(values, log, systems):
    frame = pd.DataFrame([{"test": t, "system": f"S{s}", "value": v * (s + 1)}
                          for t, v in zip("abcde", values) for s in range(systems)])
    ax = plot.bars(frame, x="test", y="value", hue="system", log=log)
    plot.reference_line(ax, 1.0, "1x: no speed-up")
    assert "1x: no speed-up" not in [t.get_text() for t in ax.texts]
    legend = ax.get_legend()
    named = [f"S{s}" for s in range(systems)] if systems > 1 else []  # one system: no legend of its own
    assert [t.get_text() for t in legend.get_texts()] == named + ["1x: no speed-up"]
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    assert box.x0 >= ax.get_window_extent(renderer).x1  # right of the axes: clear of every bar and value label
    plt.close(ax.figure)
