"""iolab.report.curveplots: artists, labels and the knee marker (not pixels)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

from iolab.report.curveplots import position_plot, qd_plot, scaling_plot, twin_of  # noqa: E402
from iolab.core.errors import IolabError  # noqa: E402

QD = [1, 2, 4, 8, 16, 32, 64]
IOPS = [10_000, 20_000, 40_000, 78_000, 80_000, 80_500, 80_700]
P99 = [100, 102, 105, 120, 200, 400, 800]


@pytest.fixture
def ax():
    fig, axes = plt.subplots()
    yield axes
    plt.close(fig)


def sweep(direction="read", scale=1.0, numjobs=1, reps=2):
    return pd.DataFrame([
        {"run_id": "r", "direction": direction, "rep": rep, "iodepth": q, "numjobs": numjobs,
         "iops": i * scale, "lat_p99_us": p}
        for rep in range(reps) for q, i, p in zip(QD, IOPS, P99)])


def gnome_samples():
    position = np.arange(100) / 100
    read = pd.DataFrame({"position": position, "bw_mbps": 200 - 100 * position, "direction": "read"})
    write = pd.DataFrame({"position": position, "bw_mbps": 180 - 90 * position, "direction": "write"})
    return pd.concat([read, write], ignore_index=True)


def access_samples(n=200):
    rng = np.random.default_rng(42)
    return pd.DataFrame({"position": rng.uniform(0, 1, n), "access_ms": rng.uniform(2, 15, n)})


# --- position ------------------------------------------------------------------
def test_position_plot_lines_and_access_scatter(ax):
    out = position_plot(gnome_samples(), hue="direction", access=access_samples(), ax=ax)
    assert out is ax
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["read", "write"]
    x, y = lines[0].get_data()
    assert x[0] == 0 and x[-1] == pytest.approx(99) and y[0] == 200   # percent of the device
    assert ax.get_xlim() == (0, 100) and ax.get_ylim()[0] == 0
    assert ax.get_xlabel() == "Position on device (%)" and "MB/s" in ax.get_ylabel()
    twin = twin_of(ax)
    assert twin is not None and twin.get_ylabel() == "Access time (ms)"
    scatters = [c for c in twin.collections if isinstance(c, PathCollection)]
    assert len(scatters) == 1 and len(scatters[0].get_offsets()) == 199  # first has no seek distance
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["read", "write", "access time"]


def test_position_plot_without_access_has_no_twin_and_labels_translate(ax):
    position_plot(gnome_samples().query("direction == 'read'"), ax=ax,
                  labels={"x": "デバイス上の位置 (%)", "y": "速度 (MB/秒)"})
    assert twin_of(ax) is None and len(ax.get_lines()) == 1
    assert ax.get_xlabel() == "デバイス上の位置 (%)"
    with pytest.raises(IolabError, match="label"):
        position_plot(gnome_samples(), ax=ax, labels={"colour": "x"})


def test_position_plot_rejects_percent_positions(ax):
    with pytest.raises(IolabError, match="fraction"):
        position_plot(pd.DataFrame({"position": [0, 50], "bw_mbps": [1, 1]}), ax=ax)


# --- QD sweep -----------------------------------------------------------------------
def test_qd_plot_marks_the_knee(ax):
    out = qd_plot(sweep(), ax=ax)
    assert out is ax
    knee = [a for a in ax.get_children() if a.get_gid() == "knee"]
    assert len(knee) == 2  # the star and the vertical line
    star = next(line for line in knee if line.get_marker() == "*")
    assert list(star.get_xdata()) == [8] and list(star.get_ydata()) == [78_000]
    assert star.get_label() == "knee (QD 8)"
    iops_line = next(line for line in ax.get_lines() if line.get_marker() == "o")
    assert list(iops_line.get_xdata()) == QD
    twin = twin_of(ax)
    (p99_line,) = twin.get_lines()
    assert p99_line.get_linestyle() == "--" and list(p99_line.get_ydata()) == P99
    assert p99_line.get_color() == iops_line.get_color()
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "Queue depth"
    assert ax.get_ylabel() == "IOPS" and "p99" in twin.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["IOPS", "knee (QD 8)", "p99"]
    # IOPS ticks with thousands separators, as the tables print them (the report showed 500000)
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert any("," in t for t in ticks) and not any(t.replace(".", "").isdigit() and len(t) > 4 for t in ticks), ticks


def test_qd_plot_hue_and_jobs_use_outstanding_io(ax):
    data = pd.concat([sweep("read", numjobs=2), sweep("write", scale=0.5, numjobs=2)], ignore_index=True)
    qd_plot(data, hue="direction", ax=ax)
    stars = [a for a in ax.get_lines() if a.get_gid() == "knee" and a.get_marker() == "*"]
    assert sorted(s.get_label() for s in stars) == ["knee (OIO 16)", "knee (OIO 16)"]
    assert ax.get_xlabel().startswith("Outstanding I/O")
    assert len(twin_of(ax).get_lines()) == 2


def test_qd_plot_without_knee_has_no_marker(ax):
    never = sweep().assign(iops=lambda d: d["iodepth"] * 1000.0, lat_p99_us=100.0)
    qd_plot(never, ax=ax)
    assert not [a for a in ax.get_children() if a.get_gid() == "knee"]
    qd_plot(sweep(), knee=False, ax=ax)
    assert not [a for a in ax.get_children() if a.get_gid() == "knee"]
    assert len(ax.figure.axes) == 2  # the second call reused the twin


def test_qd_plot_refuses_several_curves_without_hue(ax):
    data = pd.concat([sweep("read"), sweep("write")], ignore_index=True)
    with pytest.raises(IolabError, match="several curves"):
        qd_plot(data, ax=ax)


# --- concurrency ----------------------------------------------------------------------
def clients():
    rows = []
    for jobs, rates in ((1, [100]), (2, [90, 90]), (4, [60, 60, 60, 20])):
        for c, rate in enumerate(rates):
            rows.append({"numjobs": jobs, "host": f"c{c}", "bw_mbps": rate, "lat_p99_us": 500.0 * jobs})
    return pd.DataFrame(rows)


def test_scaling_plot_total_p99_and_clients(ax):
    out = scaling_plot(clients(), client="host", ax=ax)
    assert out is ax
    (total,) = ax.get_lines()
    assert list(total.get_xdata()) == [1, 2, 4] and list(total.get_ydata()) == [100, 180, 200]
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == 7
    (p99,) = twin_of(ax).get_lines()
    assert list(p99.get_ydata()) == [500, 1000, 2000]
    assert ax.get_xlabel() == "Concurrency (numjobs)" and ax.get_ylabel() == "Total throughput (MB/s)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["total", "per client", "p99"]


def test_scaling_plot_hue_without_p99(ax):
    data = pd.DataFrame({"label": ["a"] * 3 + ["b"] * 3, "numjobs": [1, 2, 4] * 2,
                         "iops": [100, 200, 400, 100, 110, 120]})
    scaling_plot(data, y="iops", hue="label", ax=ax)
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    assert twin_of(ax) is None and ax.get_ylabel() == "Total IOPS"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]


def test_plots_need_their_columns(ax):
    with pytest.raises(IolabError, match="bw_mbps"):
        scaling_plot(pd.DataFrame({"numjobs": [1]}), ax=ax)
    with pytest.raises(IolabError, match="no data"):
        qd_plot(sweep().iloc[:0], ax=ax)
