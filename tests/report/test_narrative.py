"""Commentary in the article's voice (iolab.report.narrative) on data with known answers, en and ja."""
import pandas as pd

from iolab.report import narrative


def frame(rows, metric="bw_mbps", unit="MB/s"):
    return pd.DataFrame([{"system": s, "test": t, "direction": d, "value": v, "metric": metric, "unit": unit}
                         for s, t, d, v in rows])


TWO = frame([("A", "SEQ1M", "read", 2000), ("B", "SEQ1M", "read", 800),
             ("A", "SEQ1M", "write", 1800), ("B", "SEQ1M", "write", 700),
             ("A", "RND4K", "read", 60), ("B", "RND4K", "read", 20),
             ("A", "RND4K", "write", 50), ("B", "RND4K", "write", 100),
             ("A", "X", "", 100), ("B", "X", "", 101)])


def test_two_systems_one_sentence_per_group_then_exceptions_and_ties():
    clusters = narrative.pair_clusters(TWO, "A", "B")
    assert [(c["leader"], len(c["tests"])) for c in clusters] == [("A", 3), ("B", 1), (None, 1)]
    text = narrative.describe(TWO, lang="en")
    assert text == ("A is 2.5–3.0x as fast as B in SEQ1M read, SEQ1M write and RND4K read. "
                    "The exception: in RND4K write, B is 2.0x as fast as A. In X, A and B tie (within 3.0%).")
    assert "\n- " not in text  # a paragraph, not a bullet per row
    ja = narrative.describe(TWO, lang="ja")
    assert "AがBの2.5–3.0倍速い" in ja and "BがAの2.0倍速い" in ja and "同等" in ja


def test_lower_is_better_factor_and_all_tests():
    rows = frame([("fast", "create", "", 6.0), ("slow", "create", "", 18.0),
                  ("fast", "insert", "", 50.0), ("slow", "insert", "", 120.0)], metric="elapsed", unit="s")
    assert narrative.describe(rows, lang="en") == "fast is 2.4–3.0x as fast as slow in every test."
    assert "すべてのテストではfastがslowの2.4–3.0倍速い" in narrative.describe(rows, lang="ja")


def test_three_systems_are_ranked_with_ties_sharing_the_lead():
    three = pd.concat([TWO, TWO[TWO["system"] == "A"].assign(system="C", value=lambda f: f["value"] / 3)])
    text = narrative.describe(three, lang="en")
    assert "A leads in SEQ1M read, SEQ1M write and RND4K read." in text
    assert "B leads in RND4K write." in text
    assert "In X, A and B tie for the lead." in text
    assert text.endswith("Ranked by their mean place over the 5 tests: 1. A, 2. B and 3. C.")
    assert "1. A、2. B、3. Cの順" in narrative.describe(three, lang="ja")


def test_caveats_once_naming_the_tests():
    rows = TWO.assign(flags="")
    rows.loc[rows["system"] == "B", "flags"] = "cpu_bound"
    text = narrative.describe(rows, lang="en")
    assert text.count("(cpu_bound)") == 1 and "**B**, all tests:" in text
