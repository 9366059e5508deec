"""A user's system label on a Japanese page takes the page's brackets (issue 23 item 6): 'ssd (raid0)' reads
'ssd（raid0）' in the tables, headings, chart alt texts and sentences, by the one rule article systems follow
(i18n.page_name); an English page, the data and the CSVs keep the label as the run stored it."""
import json
import re
import shutil

import pytest

from iolab.engine import store
from iolab.report import notebooks as report, toolnames
from cli_helpers import FIXTURES

DATA = FIXTURES / "data"
NVME = DATA / "nvme-node" / "20261120T223550Z-crystaldiskmark-f5be"
HDD = DATA / "hdd-node" / "20261120T223550Z-crystaldiskmark-6a8a"
LABEL = "ssd (raid0)"


def test_a_users_label_takes_the_pages_brackets():
    manifest = store.read_manifest(NVME)
    assert report.display_name(LABEL, manifest, "ja") == "ssd（raid0）"
    assert report.display_name(LABEL, manifest, "en") == LABEL
    assert report.display_name("NVMe", manifest, "ja") == "NVMe"


def test_an_emulated_devices_note_goes_inside_the_labels_own_bracket():
    manifest = {"targets": [{"kind": "emulated", "name": "hdd"}]}
    assert report.display_name("emulated hdd", manifest, "ja") == "hdd（エミュレート）"
    assert report.display_name("emulated my hdd (r1)", manifest, "ja") == "my hdd（r1、エミュレート）"
    assert report.display_name("HDD (r1) (emulated)", manifest, "ja") == "HDD（r1、エミュレート）"
    assert report.display_name("emulated my hdd (r1)", manifest, "en") == "emulated my hdd (r1)"
    assert report.display_name("emulated hdd", {"targets": [{"kind": "device"}]}, "ja") == "emulated hdd"


def _labelled(tmp_path):
    run = shutil.copytree(NVME, tmp_path / "runs" / NVME.name)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["label"] = LABEL
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("labels")
    runs = [_labelled(tmp), HDD]
    return {lang: report.report(runs, notebook="compare", out=tmp / lang, lang=lang).markdown.read_text()
            for lang in ("en", "ja")}


def test_every_mention_on_a_japanese_page_is_typeset(pages):
    ja, en = pages["ja"], pages["en"]
    assert LABEL not in ja
    typeset = "ssd（raid0）"
    # the environment table's column, the results tables' columns, a chart's alt text, the findings
    env = ja.split("## テスト環境")[1].split("\n## ")[0]
    assert f"| {typeset} |" in env or f"| {typeset} " in env
    assert re.search(r"^\| テスト \|.*ssd（raid0）", ja, re.M)
    assert re.search(r"!\[[^\]]*ssd（raid0）", ja) or "ssd（raid0）" in ja.split("**所見**")[1]
    assert ja.count(typeset) == en.count(LABEL) > 3  # every mention kept, none left half-width
    assert "ssd（raid0）" not in en


def test_the_selection_keeps_the_stored_label(tmp_path):
    sel = report.select(None, [_labelled(tmp_path)], lang="ja")
    assert list(sel.manifests["label"]) == [LABEL]  # data keeps the run's label; only the page's name changes
    assert set(sel.systems) == {"ssd（raid0）"}


def test_a_recipes_own_tool_qualifier_takes_the_pages_brackets():
    assert toolnames.describe("tiobench 0.3.3 (tiotest)", "ja").count("tiobench 0.3.3（tiotest）") == 1
    assert "tiobench 0.3.3 (tiotest)" in toolnames.describe("tiobench 0.3.3 (tiotest)", "en")
