"""An emulated device's system name in the page's language: the demo's ("emulated hdd") and the kit's
("HDD (emulated)") in Japanese on a ja page, every name unchanged on an en page (issue 23)."""
import json
import shutil

import pytest

from iolab.engine import store
from iolab.report import i18n, notebooks as report
from cli_helpers import FIXTURES

DATA = FIXTURES / "data"
HDD_QUICK = DATA / "hdd-node" / "20261120T223550Z-quick-312c"


def _ja(name):
    return i18n.with_note(name, i18n.text("system_names.emulated", "ja"), "ja")


def test_only_an_emulated_runs_label_in_the_kits_wording_is_named_in_japanese():
    emulated = store.read_manifest(HDD_QUICK)
    plain = store.read_manifest(DATA / "nvme-node" / "20261120T223550Z-crystaldiskmark-f5be")
    assert {t["kind"] for t in emulated["targets"]} == {"emulated"} and plain["targets"][0]["kind"] == "dir"
    assert report.display_name("HDD (emulated)", emulated, "ja") == _ja("HDD") == "HDD（エミュレート）"
    assert report.display_name("emulated sata-ssd", emulated, "ja") == _ja("sata-ssd")
    for label in ("HDD (emulated)", "emulated hdd", "HDD, cached"):
        assert report.display_name(label, emulated, "en") == label  # en unchanged
    assert report.display_name("HDD, cached", emulated, "ja") == "HDD, cached"  # a label of the user's own
    assert report.display_name("emulated hdd", plain, "ja") == "emulated hdd"  # no emulated device measured


def test_select_names_the_systems_in_the_pages_language():
    en, ja = report.select(DATA), report.select(DATA, lang="ja")
    assert set(en.systems) == {"HDD (emulated)", "HDD, cached", "NVMe", "SATA SSD (emulated)"}
    assert set(ja.systems) == {_ja("HDD"), "HDD, cached", "NVMe", _ja("SATA SSD")}
    assert list(ja.manifests["run_id"]) == list(en.manifests["run_id"])


def _demo_run(tmp_path):
    """A stored run on the emulated hdd labelled as tools/demo.sh labels it."""
    run = shutil.copytree(HDD_QUICK, tmp_path / "runs" / HDD_QUICK.name)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["label"] = "emulated hdd"
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_demo_page_names_its_emulated_devices_in_its_language(tmp_path, lang):
    runs = [_demo_run(tmp_path), DATA / "ssd-node" / "20261120T223550Z-quick-6c0d"]
    md = report.report(runs, notebook="compare", out=tmp_path / "page", lang=lang).markdown.read_text()
    if lang == "en":
        assert "emulated hdd" in md and "SATA SSD (emulated)" in md
    else:
        assert _ja("hdd") in md and _ja("SATA SSD") in md
        assert "emulated hdd" not in md and "SATA SSD (emulated)" not in md


@pytest.mark.parametrize("lang, scaled, plain", [
    ("en", "HDD (emulated, scale 0.01)", "NVMe (scale 0.01)"),
    ("ja", "HDD（エミュレート、規模0.01）", "NVMe（規模0.01）")])
def test_a_qualifier_joins_the_names_own_bracket_never_a_second_one(lang, scaled, plain):
    """'HDD（エミュレート）（規模0.01）' stacked two brackets beside an article: one bracket, its parts joined."""
    from iolab.report import beside
    name = report.display_name("HDD (emulated)", store.read_manifest(HDD_QUICK), lang)
    assert beside.column_name(name, 0.01, lang) == scaled
    assert beside.column_name("NVMe", 0.01, lang) == plain  # no bracket yet: one of its own
    assert ")(" not in scaled and "）（" not in scaled and ") (" not in scaled


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_two_runs_of_one_label_on_one_host_take_the_run_id_in_the_pages_brackets(tmp_path, lang):
    """Two runs of the same emulated HDD on one host: their columns differ by run ID, in the page's brackets
    (a ja page's full-width, not 'HDD（エミュレート） @ hdd-node (RUN)')."""
    second = _demo_run(tmp_path)
    manifest = json.loads((second / "manifest.json").read_text())
    manifest.update(label="HDD (emulated)", run_id=manifest["run_id"] + "-b")
    (second / "manifest.json").write_text(json.dumps(manifest))
    sel = report.select(None, [HDD_QUICK, second], lang=lang)
    first_id, host = store.read_manifest(HDD_QUICK)["run_id"], manifest["host"]
    name = report.display_name("HDD (emulated)", manifest, lang)
    expected = {f"{name} @ {host}{i18n.paren(run_id, lang)}" for run_id in (first_id, first_id + "-b")}
    assert set(sel.manifests["system_name"]) == expected
    if lang == "ja":
        assert all("（" + first_id in n and " (" not in n for n in sel.manifests["system_name"])


def test_a_half_width_label_takes_the_note_in_full_width_brackets_on_a_japanese_page():
    """A user's label with its own half-width bracket: on a ja page the qualifier joins it in one full-width
    bracket (the typesetting rule of ja.yaml), never 'db (r2, 規模0.01)'; English keeps the label's bracket."""
    assert i18n.with_note("db (r2)", "規模0.01", "ja") == "db（r2、規模0.01）"
    assert i18n.with_note("db (r2)", "scale 0.01", "en") == "db (r2, scale 0.01)"
    assert i18n.with_note("HDD（エミュレート）", "規模0.01", "ja") == "HDD（エミュレート、規模0.01）"
