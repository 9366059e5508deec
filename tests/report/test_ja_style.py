"""One register in the Japanese pages (issue 23 items 6 and 9): the reports speak in the plain form (常体: 〜する、
〜だ、〜ない), as a printed article does; the flash-cache section and the CrystalDiskMark notes were in the polite
form (です・ます) beside it. And no caret powers ("10^6") in either language: 10⁶, as the pages' intro writes it.
"""
import re

from iolab.report import i18n

POLITE = re.compile(r"(です|ます|ません|ください|でした|ましょう)(?=[。、）」]|$)")


def strings(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, str):
        yield path, node


def test_the_ja_pages_speak_in_one_register():
    polite = {key: text for key, text in strings(i18n.catalog("ja")) if POLITE.search(text)}
    assert polite == {}


def test_the_check_sees_the_polite_form():
    assert POLITE.search("平均値を表示します。") and POLITE.search("使ってください")
    assert not POLITE.search("平均値を表示する。") and not POLITE.search("ますます速い")


def test_powers_are_written_as_superscripts():
    for lang in i18n.LANGS:
        carets = {key: text for key, text in strings(i18n.catalog(lang)) if re.search(r"\d\^\d", text)}
        assert carets == {}, lang
