"""The environment table's device cells in the page's language (issue 23 item 6): the descriptions the kit writes
itself ('loop device', 'virtio disk', 'device-mapper NAME', the fixtures' 'iolab emulated HDD (loop, throttled)')
are said from their kind key on a Japanese page; a drive's model or a user's own words are printed as stored; an
English page keeps every stored description."""
import copy
import re

import pytest

from iolab.core import recorded
from iolab.engine import store
from iolab.report import beside, environment, i18n, oneserver
from cli_helpers import FIXTURES

HDD_QUICK = FIXTURES / "data" / "hdd-node" / "20261120T223550Z-quick-312c"
NVME = FIXTURES / "data" / "nvme-node" / "20261120T223550Z-crystaldiskmark-f5be"


@pytest.mark.parametrize("stored, ja", [
    ("loop device", "ループデバイス"),
    ("virtio disk", "virtioディスク"),
    ("device-mapper iolab-hdd-delay", "device-mapper（iolab-hdd-delay）"),
    ("device-mapper", "device-mapper"),
    ("md raid0", "md（raid0）"),
    ("zram (compressed RAM)", "zram（圧縮したRAM）"),
    ("iolab emulated HDD (loop, throttled)", "iolabがエミュレートしたHDD（ループデバイス、帯域制限）"),
    ("iolab emulated SATA SSD (loop, throttled)", "iolabがエミュレートしたSATA SSD（ループデバイス、帯域制限）"),
    # not the kit's: as stored, in both languages
    ("Samsung SSD 980 PRO 1TB", "Samsung SSD 980 PRO 1TB"),
    ("my loop device (scratch)", "my loop device (scratch)"),
])
def test_the_kits_device_descriptions_are_translated_and_others_kept(stored, ja):
    assert i18n.device_description(stored, "ja") == ja
    assert i18n.device_description(stored, "en") == stored
    assert i18n.device_description(None, "ja") is None


def test_the_recorded_descriptions_and_the_locales_share_their_keys():
    """One table (iolab.core.recorded.DEVICE_DESCRIPTIONS) is what blockdev.model writes and what a page reads
    back: the English locale says each as recorded, the Japanese one has each key."""
    assert i18n.catalog("en")["devices"] == recorded.DEVICE_DESCRIPTIONS
    assert set(i18n.catalog("ja")["devices"]) == set(recorded.DEVICE_DESCRIPTIONS)


def _with_model(manifest: dict, model: str) -> dict:
    changed = copy.deepcopy(manifest)
    changed["targets"][0]["device"]["model"] = model
    return changed


@pytest.mark.parametrize("model, ja", [
    (None, "iolabがエミュレートしたHDD（ループデバイス、帯域制限）"),  # as the fixture stored it
    ("loop device", "ループデバイス"),
    ("virtio disk", "virtioディスク"),
    ("device-mapper iolab-hdd", "device-mapper（iolab-hdd）"),
])
def test_the_environment_tables_device_row_is_japanese_on_a_japanese_page(model, ja):
    manifest = store.read_manifest(HDD_QUICK)
    if model:
        manifest = _with_model(manifest, model)
    stored = manifest["targets"][0]["device"]["model"]
    device = i18n.text("labels.device", "ja")
    table = environment.environment_table([manifest], lang="ja", names=["HDD"]).frame
    assert table.loc[device, "HDD"] == ja
    assert stored not in table.to_string()
    en = environment.environment_table([manifest], lang="en", names=["HDD"]).frame
    assert en.loc[i18n.text("labels.device", "en"), "HDD"] == stored


def test_a_drives_model_stays_as_stored_on_a_japanese_page():
    manifest = store.read_manifest(NVME)
    table = environment.environment_table([manifest], lang="ja", names=["NVMe"]).frame
    assert table.loc[i18n.text("labels.device", "ja"), "NVMe"] == manifest["targets"][0]["device"]["model"]


def test_beside_an_article_and_one_server_pages_say_the_device_in_japanese():
    manifest = _with_model(store.read_manifest(HDD_QUICK), "loop device")
    assert beside.device_text(manifest, "ja") == "ループデバイス、ext4"
    assert beside.device_text(manifest, "en") == "loop device, ext4"
    targets = oneserver._targets(manifest, "ja")
    assert "ループデバイス" in targets[0] and "loop device" not in targets[0]


def test_the_ja_scan_catches_an_untranslated_kit_description():
    """The page scan allows the environment table's cells (a run's own values), but not the device row's kit
    descriptions: 'loop device' on a ja page is an English word left."""
    from test_ja_typesetting import english_words
    page = ("## テスト環境\n| システム | HDD |\n|---|---:|\n| ホスト | hdd-node |\n"
            "| デバイス | loop device |\n## 結果\n本文。\n")
    assert {"loop", "device"} <= set(english_words(page))
    fixed = page.replace("loop device", i18n.device_description("loop device", "ja"))
    assert not english_words(fixed)
    assert not re.search(r"[A-Za-z]", i18n.device_description("loop device", "ja"))


@pytest.mark.parametrize("kind, en, ja", [
    ("emulated", "emulated device", "エミュレートしたデバイス"),
    ("dir", "directory", "ディレクトリ"),
    ("block", "block device", "ブロックデバイス"),
    ("file", "file", "ファイル"),
])
def test_the_target_kind_is_said_in_the_pages_language(kind, en, ja):
    """The demo's Japanese environment table read 「対象の種類：emulated」, the manifest's key."""
    manifest = copy.deepcopy(store.read_manifest(HDD_QUICK))
    manifest["targets"][0]["kind"] = kind
    for lang, said in (("en", en), ("ja", ja)):
        table = environment.environment_table([manifest], lang=lang, names=["HDD"]).frame
        assert table.loc[i18n.text("labels.target_kind", lang), "HDD"] == said
