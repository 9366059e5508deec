"""Japanese typesetting (issue 23, item 6): the rule written at the top of iolab/report/locale/ja.yaml,
checked on every string there, and a rendered Japanese page scanned for English words outside an allow-list."""
import re
import unicodedata

import pytest

from cli_helpers import ROOT
from iolab.report import i18n

FIXTURES = ROOT / "tests" / "fixtures" / "data"

#: What a template's reader never sees as text: code spans, {placeholders} and escaped quotes.
_HIDDEN = re.compile(r"`[^`]*`|\{[^{}]*\}|\\\"")


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def _strings(node, key=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, str):
        yield key, node


def _breaches(value: str) -> list[str]:
    """What in one ja.yaml string breaks the rule (empty when none)."""
    shown = _HIDDEN.sub("X", value)  # a placeholder stands for half-width text
    found = []
    if any(_wide(c) for c in shown):  # Japanese running text
        found += [f"half-width {c!r}" for c in "():" if c in shown]
    for mark in ("～", "〜"):
        if mark in value:
            found.append(f"range mark {mark!r} (the rule's is '–')")
    for i, c in enumerate(shown):
        if c == " " and ((i and _wide(shown[i - 1])) or (i + 1 < len(shown) and _wide(shown[i + 1]))):
            found.append(f"space beside a full-width character at {shown[max(0, i - 4):i + 5]!r}")
    # **{placeholder}** followed by kana/kanji: bold breaks when the value ends in a bracket (CommonMark flanking)
    for m in re.finditer(r"\*\*[^*]*\}\*\*(.)", value):
        if _wide(m.group(1)) and unicodedata.category(m.group(1)).startswith("L"):
            found.append(f"bold placeholder followed by {m.group(1)!r}")
    # a system's name may end in a bracket (「HDD（エミュレート）」): no second bracket right after it
    for m in re.finditer(r"\*\*\{(system|systems|winner|other|against)\}\*\*（", value):
        found.append(f"a bracket right after **{{{m.group(1)}}}**, whose name may end in one")
    return found


def test_the_rule_is_written_at_the_top_of_ja_yaml():
    head = (i18n.LOCALE_DIR / "ja.yaml").read_text(encoding="utf-8").split("\nheadings:")[0]
    assert "表記の規則" in head and "–" in head and "（）：" in head


def test_every_ja_string_follows_the_typographic_rule():
    bad = {key: found for key, value in _strings(i18n.catalog("ja")) if (found := _breaches(value))}
    for key, found in bad.items():
        print(key, found)
    assert not bad


@pytest.mark.parametrize("value, expected", [
    ("**{system}**は速い (cpu_bound)", {"half-width '('", "half-width ')'", "bold placeholder followed by 'は'"}),
    ("{low}～{high}", {"range mark '～' (the rule's is '–')"}),
    ("`lat` (発行)", {"half-width '('", "half-width ')'"}),
    ("**{system}**（{tests}）：遅い。", {"a bracket right after **{system}**, whose name may end in one"}),
])
def test_the_check_sees_what_it_should(value, expected):
    found = set(_breaches(value))
    assert expected <= found
    assert not _breaches("**{system}**、{tests}：`fio --name=x (y)`の値は{n}回、712 MB/秒。")


def test_ja_ranges_use_the_same_mark_as_the_range_helper():
    assert "–" in i18n.factor_range(2.5, 3.0)


# --- one rendered Japanese page ---------------------------------------------------------------------------

#: English a Japanese reader may see, by kind. Anything else in the page is a string left untranslated.
ALLOWED = {
    # units
    "MB", "MiB", "GiB", "KiB", "KB", "IOPS", "B", "s", "ms", "us", "µs", "tps",
    # products, tools, standards and hardware terms written in Latin letters in Japanese too
    "CrystalDiskMark", "KDiskMark", "fio", "iolab", "GNOME", "hdparm", "Bonnie", "tiobench", "pgbench",
    "NVMe", "SATA", "SSD", "HDD", "RAM", "CPU", "OS", "I/O", "ID", "URL", "cgroup", "v1", "O_DIRECT", "OIO", "TRIM",
    "MySQL", "sql-bench", "UTC",
    # options and statistics names the text quotes
    "repeat", "p50", "p99",
}
#: Kinds matched by pattern: test names (SEQ1M-Q8T1, RND4K-Q1T1-write), queue depths, file names and paths,
#: code identifiers (flag names such as cpu_bound, column names such as lat_mean_us).
ALLOWED_PATTERNS = [
    re.compile(r"(SEQ|RND)\w*(-Q\d+T\d+)?(-(read|write|mix))?"), re.compile(r"Q\d+T\d+|QD\d+"),
    re.compile(r"[\w./-]+\.(csv|json|yaml|ipynb|png)|raw/?"), re.compile(r"\w+_\w+"),
]
#: A word starts with a letter after no letter or digit (a run id such as 20261120T223550Z-quick-a797 is no word).
_WORD = re.compile(r"(?<![A-Za-z0-9_./+-])[A-Za-z](?:[A-Za-z0-9_./+-]*[A-Za-z0-9+])?")


def _from_data(md: str) -> set:
    """Words the page prints from the runs' own records, which a report does not translate: the system labels
    a user chose (the environment table's header) and the manifest's values (kernel, CPU model, device, paths,
    host names, recipe and isolation mode names: the environment table's cells), and the recipe's tool line."""
    words = set()
    env = md.split("## テスト環境")[1].split("\n## ")[0]
    device_row = f"| {i18n.text('labels.device', 'ja')} |"
    for line in env.splitlines():
        # the device row is left out: the kit's own descriptions ('loop device', 'iolab emulated HDD (loop,
        # throttled)') are translated (i18n.device_description); only a drive's model, which is not, is allowed
        if line.startswith("|") and not line.startswith("|---") and not line.startswith(device_row):
            words |= set(_WORD.findall("|".join(line.split("|")[2:])))
    words |= {word for model in _stored_device_models() if i18n.device_description(model, "ja") == model
              for word in _WORD.findall(model)}
    # host names (a run that measured nothing is named by its host, outside the environment table)
    words |= {host.name for host in FIXTURES.iterdir() if host.is_dir()}
    return words


def _stored_device_models() -> set:
    """The device descriptions the fixture runs stored (targets[].device.model)."""
    import json
    models = set()
    for path in FIXTURES.glob("*/*/manifest.json"):
        for target in json.loads(path.read_text(encoding="utf-8")).get("targets") or []:
            model = (target.get("device") or {}).get("model")
            if model:
                models.add(str(model))
    return models


def _visible_text(md: str) -> str:
    md = re.sub(r"`[^`]*`", " ", md)                      # code spans (fio's error messages, column names)
    md = re.sub(r"\]\([^)]*\)", "]", md)                  # image and link targets
    md = re.sub(r"https?://\S+", " ", md)
    return md


def english_words(md: str) -> dict:
    """ASCII words of a rendered ja page outside the allow-lists, each with one line it occurs in."""
    allowed = ALLOWED | _from_data(md)
    found = {}
    for line in _visible_text(md).splitlines():
        for word in _WORD.findall(line):
            bare = word.rstrip(".+/")
            if (word in allowed or bare in allowed or any(p.fullmatch(bare) for p in ALLOWED_PATTERNS)
                    or all(part in allowed for part in re.split(r"[/+-]", bare) if part)):
                continue
            found.setdefault(word, line.strip()[:160])
    return found


#: Japanese text (kana, kanji) a half-width bracket or colon must not touch.
_JA = r"[\u3040-\u30ff\u4e00-\u9fff]"


def half_width_brackets(md: str, stored_names) -> list[str]:
    """Where a rendered ja page breaks the rule's full-width brackets: a half-width bracket (or colon) beside
    Japanese text on either side, or a system named with a half-width bracket; ``stored_names``: the names as the
    data keeps them ('SATA HDD (mem=512M)', 'HDD (emulated)'), which a ja page must print typeset
    ('SATA HDD（mem=512M）', 'HDD（エミュレート）'). A source's headline quoted in 『』 is left as printed."""
    text = re.sub(r"『[^』\n]*』", " ", _visible_text(md))
    found = re.findall(_JA + r"[ ]?[(:][^\n]{0,30}|[^\n]{0,30}\)[ ]?" + _JA, text)
    return found + [name for name in dict.fromkeys(stored_names) if "(" in str(name) and str(name) in text]


def test_the_bracket_check_sees_what_it_should():
    name = "SATA HDD (mem=512M)"
    assert half_width_brackets(f"{name}と比べて", [name]) == ["SATA HDD (mem=512M)と", name]
    assert half_width_brackets("| SATA HDD (mem=512M) | 1,214 |", [name]) == [name]  # in a table: no kana beside
    assert half_width_brackets("速い (2倍)", []) and half_width_brackets("db (r2)の値", [])
    assert not half_width_brackets("SATA HDD（mem=512M）と比べて、`fio (x)`の値。『性能をチェック(4)』", [name])


def test_a_rendered_japanese_page_has_no_english_outside_the_allow_list(render_once):
    md = render_once(data=FIXTURES, notebook="compare", lang="ja").markdown.read_text(encoding="utf-8")
    found = english_words(md)
    for word, line in sorted(found.items()):
        print(f"{word!r}: {line}")
    assert not found
    # no half-width bracket beside Japanese text or in a system's name (labels, captions, chart titles, alt texts)
    from iolab.report import notebooks as report
    half = half_width_brackets(md, report.select(FIXTURES).systems)
    print(half)
    assert not half
    assert "**" not in re.sub(r"\*\*[^*\n]+\*\*", "", md)  # every bold pair closes (nothing printed as **)


def test_the_rendered_2013_article_in_japanese_has_no_half_width_bracket(render_once):
    """The article's systems are stored as 'SATA HDD (mem=512M)' (its CSV, articles.yaml's baseline): the ja page
    names them 'SATA HDD（mem=512M）' in its tables, legends' alt texts and sentences (i18n.page_name)."""
    from iolab.analysis import reference
    md = render_once(reference="dedicated-server-2013", lang="ja").markdown.read_text(encoding="utf-8")
    stored = list(reference.load(article="dedicated-server-2013")["system"])
    half = half_width_brackets(md, stored)
    print(half)
    assert not half and "SATA HDD（mem=512M）" in md


def test_article_table_captions_carry_one_bracket_in_japanese():
    """"所要時間（短いほど良い）（秒）": the unit goes inside the caption's own bracket, not in a second one."""
    from iolab.analysis import reference
    from iolab.report import articles
    captions = []
    for name in reference.articles():
        info = reference.article_info(name)
        published = reference.load(article=name)
        for spec in reference.table_specs(info, published):
            title = i18n.label(spec["title"], "ja", section="tables")
            table = articles.reference_table(published, benchmark=spec["benchmark"], metric=spec["metric"],
                                             lang="ja", caption=title)
            captions.append(table.caption)
    print(captions)
    assert captions and not [c for c in captions if "）（" in c or "(" in c]


def test_the_articles_japanese_texts_follow_the_rule():
    """data/reference/articles.yaml's ja titles, methods and source notes are printed on the reference pages too:
    the x25v page read "Adaptec 1430SA 上で Intel X25-V 40 GB を 4 台 RAID0 にまとめ、... (数値はない)"."""
    import yaml
    articles = yaml.safe_load((ROOT / "data" / "reference" / "articles.yaml").read_text(encoding="utf-8"))
    texts = {key: value for key, value in _strings(articles) if key.endswith(".ja")}
    assert len(texts) >= 15  # every article's title, method and source note
    bad = {key: found for key, value in texts.items() if (found := _breaches(value))}
    assert bad == {}


@pytest.mark.parametrize("test, direction, en, ja", [
    ("RND4K-Q32T1", "read", "RND4K-Q32T1 read", "RND4K-Q32T1の読み込み"),  # no space between Latin and kana
    ("seq_read_block", "read", "Block read", "ブロック読み込み"),  # the name says its direction once
    ("seq read", "read", "Sequential read", "シーケンシャル読み込み"),
    ("round", "", "round", "round"),
    ("", "write", "write", "書き込み"),
])
def test_a_test_and_its_direction_make_one_label(test, direction, en, ja):
    assert (i18n.test_label(test, direction, "en"), i18n.test_label(test, direction, "ja")) == (en, ja)
