"""User YAML files that are not UTF-8: one clear line naming the file and the bad byte, exit 2.

Recipes, setup plans, fleet inventories and batch inventories all go through
:mod:`iolab.core.yamlfile`; each kind is checked here through the real CLI.
"""
import pytest

from iolab.core import yamlfile
from iolab.core.errors import IolabError

from cli_helpers import iolab_cli

#: Latin-1 "café" in a comment: byte 0xe9 at offset 21 of line 2.
LATIN1 = b"# iolab test file\n# caf\xe9 au lait\nname: x\n"
BAD_OFFSET = LATIN1.index(b"\xe9")


@pytest.fixture
def bad_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(LATIN1)
    return path


def _one_line_error(proc, path):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    line = lines[0]
    assert str(path) in line
    assert "not UTF-8" in line and "0xe9" in line and f"byte offset {BAD_OFFSET}" in line
    assert "line 2" in line
    return line


@pytest.mark.parametrize("args, what", [
    (["run", "{bad}", "--target", "{tmp}", "--dry-run"], "recipe file"),
    (["setup", "{bad}", "--dry-run"], "plan file"),
    (["run", "quick", "--hosts", "{bad}", "--dry-run"], "inventory file"),
    (["batch", "{bad}", "--dry-run"], "inventory file"),
], ids=["recipe", "setup-plan", "fleet-inventory", "batch-inventory"])
def test_non_utf8_yaml_is_one_line_exit_2(bad_yaml, tmp_path, args, what):
    argv = [a.format(bad=bad_yaml, tmp=tmp_path) for a in args]
    line = _one_line_error(iolab_cli(*argv, timeout=120), bad_yaml)
    assert what in line


def test_decode_names_offset_and_line(tmp_path):
    with pytest.raises(IolabError) as info:
        yamlfile.read_text(_write(tmp_path, LATIN1), what="recipe file")
    assert info.value.context.endswith("x.yaml")
    assert f"byte offset {BAD_OFFSET}" in info.value.message and "line 2" in info.value.message


def test_utf8_text_still_reads(tmp_path):
    path = _write(tmp_path, "name: café\n".encode())
    assert yamlfile.load(path) == {"name": "café"}


def test_directory_is_refused_clearly(tmp_path):
    with pytest.raises(IolabError, match="is a directory"):
        yamlfile.read_text(tmp_path, what="recipe file")


def _write(tmp_path, data: bytes):
    path = tmp_path / "x.yaml"
    path.write_bytes(data)
    return path
