"""One server's findings and what was measured (the measure notebook's words), in English and Japanese, from
stored runs."""
import json

from cli_helpers import ROOT
from iolab.analysis import stats
from iolab.report import i18n, notebooks as report, oneserver

FIXTURES = ROOT / "tests" / "fixtures" / "data"


def one_run(node="hdd-node", recipe="quick"):
    sel = report.select(str(FIXTURES / node)).for_recipe(recipe)
    first = sel.manifests["run_id"].iloc[0]
    return sel.results[sel.results["run_id"] == first], sel.manifests[sel.manifests["run_id"] == first]


def test_findings_name_the_fastest_and_slowest_test_and_the_latency_of_one_io_at_a_time():
    results, _ = one_run()
    valid = results[stats.valid_rows(results)]
    bw = valid.groupby(["test", "direction"])["bw_mbps"].mean()
    (top_test, top_dir), (low_test, low_dir) = bw.idxmax(), bw.idxmin()
    en, ja = oneserver.findings(results, lang="en"), oneserver.findings(results, lang="ja")
    assert len(en) == len(ja) >= 4
    assert en[0].startswith(f"The fastest test was **{i18n.test_label(top_test, top_dir, 'en')}** at "
                            f"**{i18n.number(bw.max())} MB/s**")
    assert f"**{i18n.test_label(low_test, low_dir, 'en')}** at {i18n.number(bw.min())} MB/s" in en[0]
    assert ja[0].startswith(f"最も速いテストは**{i18n.test_label(top_test, top_dir, 'ja')}**（**{i18n.number(bw.max())} MB/秒**）")
    # the emulated HDD's SEQ1M against its RND4K-Q1T1: a factor past 100, said as orders of magnitude (i18n.times)
    factor = bw.max() / bw.min()
    assert factor >= i18n.MAGNITUDE_FROM
    assert en[0].endswith(f", lower by more than two orders of magnitude ({i18n.factor(factor)}x).")
    assert ja[0].endswith(f"で、その2桁以上（{i18n.factor(factor)}分の1）。")
    lat = valid[valid["test"] == "RND4K-Q1T1"].groupby("direction")["lat_mean_us"].mean() / 1000
    for direction, ms in lat.items():
        assert f"mean latency {i18n.number(ms)} ms" in en[-2 if direction == "read" else -1]
        assert f"平均レイテンシ{i18n.number(ms)}ミリ秒" in ja[-2 if direction == "read" else -1]


def test_more_ios_in_flight_are_said_per_block_size_and_direction():
    results, _ = one_run()
    means = oneserver.means(results).set_index(["test", "direction"])
    gain = means.loc[("RND4K-Q32T1", "read"), "iops"] / means.loc[("RND4K-Q1T1", "read"), "iops"]
    (en,) = [s for s in oneserver.findings(results, lang="en") if s.startswith("With 4 KiB blocks")]
    assert f"going from 1 to 32 I/Os in flight changed IOPS by {i18n.factor(gain)}x for reads" in en
    (ja,) = [s for s in oneserver.findings(results, lang="ja") if s.startswith("4 KiBのブロックで")]
    assert f"読み込みで{i18n.factor(gain)}倍" in ja


def test_nothing_valid_is_said_so_and_left_out_rows_are_counted():
    results, manifests = one_run()
    broken = results.assign(error="fio: io_u error")
    assert oneserver.findings(broken, lang="en") == []
    text = oneserver.markdown(broken, manifests, lang="en")
    assert text.startswith("No numbers to comment on.")
    assert f"{len(broken)} result rows carry a fio error or were marked invalid and are left out." in text
    assert f"（{len(broken)}行）は除いた。" in oneserver.markdown(broken, manifests, lang="ja")


def test_what_was_measured_names_each_run_and_its_isolation():
    run_dir = next(p.parent for p in sorted((FIXTURES / "hdd-node").glob("*/manifest.json")))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    en = oneserver.measured([(manifest, run_dir)], lang="en")
    ja = oneserver.measured([(manifest, run_dir)], lang="ja")
    tests = list(dict.fromkeys(t.get("test") or t.get("name") for t in manifest["tests"]))
    mode = manifest["isolation"]["mode"]
    assert en.startswith(f"- **{manifest['recipe']}** (") and f"{len(tests)} tests run ({', '.join(tests)})" in en
    assert f"cache isolation: {mode} — {i18n.label(mode, 'en', section='isolation')}" in en
    assert f"`{run_dir}`, status **{manifest['status']}**." in en
    assert f"{len(tests)}個のテストを実行（{'、'.join(tests)}）" in ja
    # the ja page words the status and the recipe's description in Japanese, not as the manifest stores them
    assert f"状態：**{i18n.label(manifest['status'], 'ja', section='status')}**。" in ja and manifest["status"] not in ja
    assert i18n.label(manifest["recipe"], "ja", section="recipe_descriptions") in ja
    assert manifest["recipe_description"] in en and manifest["recipe_description"] not in ja
