"""The sustained-write section from result rows (no fio): its table, its findings, its place among the kinds."""
import pandas as pd

from iolab.report import sections
from iolab.report.tables import DASH
from iolab.report.sections.sustained import sustained_section

MiB = 1024**2


def results():
    def pair(label, **finding):
        sustained = {"test": "sustained", "label": label, "direction": "write", "bw_mbps": 24.0,
                     "io_bytes": 224 * MiB, "valid": True, "cliff_error": None, **finding}
        return [sustained, {"test": "recovery", "label": label, "direction": "write", "bw_mbps": 51.0, "valid": True}]
    return pd.DataFrame(
        pair("consumer SSD", cliff_found=True, burst_mbps=49.9, cliff_bytes=171_300_000, cliff_s=3.45,
             series_s="1;2;3;4;5;6", series_mbps="49.9;50;49.9;23.1;9.95;9.96",
             after_mbps=9.95, cliff_drop=0.8, recovery_mbps=51.2, recovery_fraction=1.03, recovered=True, idle_s=7.2)
        + pair("steady SSD", cliff_found=False, burst_mbps=50.0, cliff_samples=5, series_s="1;2;3",
               series_mbps="50;50;49.9"))


def test_one_row_per_system_and_a_finding_each():
    section = sustained_section(results(), lang="en")
    table = section.tables[0]
    assert list(table.frame.index) == ["consumer SSD", "steady SSD"]
    row = table.frame.loc["consumer SSD"]
    assert list(row) == ["49.9", "163.4 MiB", "9.95", "80%", "51.2", "7.2"]
    assert table.frame.loc["steady SSD", "After the cliff (MB/s)"] == DASH
    assert "falls to 9.95 MB/s" in section.sentences[0] and "no write cliff" in section.sentences[1]


def test_in_japanese(japanese):
    section = sustained_section(results(), lang="ja")
    assert section.title == "連続書き込み：書き込みの崖" and "崖の後（MB/秒）" in section.tables[0].frame.columns
    assert "書き込みの崖" in section.sentences[0]


def test_the_rows_get_their_own_section_and_leave_the_generic_shape():
    data = results()
    assert sections.plan(data) == ["sustained-write"]
    built, rest = sections.build(data, lang="en")
    assert [s.kind for s in built] == ["sustained-write"] and rest.empty
    plain = pd.DataFrame([{"test": "sustained", "label": "x", "bw_mbps": 1.0}])  # no finding: not this kind
    assert sections.plan(plain) == []


def test_the_rate_over_time_with_the_cliff_dashed():
    (figure,) = sustained_section(results(), lang="en").figures
    (ax,) = figure.axes
    solid = [line for line in ax.lines if line.get_linestyle() == "-"]
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [line.get_label() for line in solid] == ["consumer SSD", "steady SSD"]
    assert list(solid[0].get_ydata()) == [49.9, 49.9, 50, 49.9, 23.1, 9.95, 9.96]  # from 0 s, a step a second
    assert solid[0].get_drawstyle() == "steps-pre"
    assert len(dashed) == 1 and list(dashed[0].get_xdata()) == [3.45, 3.45]  # only the drive with a cliff
    assert dashed[0].get_color() == solid[0].get_color()
    assert ax.get_ylabel() == "Write rate (MB/s)" and "consumer SSD and steady SSD" in figure.alt
    assert sustained_section(results().drop(columns=["series_s", "series_mbps"]), lang="en").figures == []


def test_the_emulated_ceilings_leave_the_write_with_a_cliff_to_this_section():
    """Its mean (burst and cliff together) is below the burst ceiling because of the cliff, not the loop device."""
    from iolab.report import ceilings
    declared = {"profile": "consumer-ssd", "declared": {"read_bps": 200_000_000, "write_bps": 50_000_000,
                                                        "read_iops": 20000, "write_iops": 20000}}
    manifests = pd.DataFrame([{"run_id": "r1", "targets": [{"name": "t", "emulated": declared}]}])
    rows = results().assign(system="demo", run_id="r1", target="t", bs=131072, iodepth=4, numjobs=1, flags=None,
                            lat_mean_us=10_000.0)
    rows["iops"] = rows["bw_mbps"] * 1e6 / 131072
    found = ceilings.against_ceilings(rows[rows["label"] == "consumer SSD"], manifests)
    assert list(found["test"]) == ["recovery"] and found["verdict"].iloc[0] == "reached"
