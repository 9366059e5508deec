"""The shared device fixtures undo what they made, also when the test using them fails."""
from __future__ import annotations

import pytest

import device_fixtures
from cli_helpers import needs_root
from device_fixtures import loops_under, mounted_image, mounts_under, requires


@needs_root
@requires("mkfs.ext4", "losetup")
def test_mounted_image_is_undone_also_when_the_test_fails(tmp_path, monkeypatch):
    image, mountpoint = tmp_path / "fs.img", tmp_path / "mnt"
    with pytest.raises(RuntimeError, match="the test failed"):
        with mounted_image(image, mountpoint, size="16M") as loop:
            assert loop.startswith("/dev/loop") and mounts_under(tmp_path) == [str(mountpoint)]
            (mountpoint / "file").write_text("x")
            raise RuntimeError("the test failed")
    assert not mounts_under(tmp_path) and not loops_under(tmp_path) and not image.exists()
    real_sh = device_fixtures.sh

    def failing_mount(*argv, **kwargs):
        if argv[0] == "mount":
            raise AssertionError("mount failed (stood in)")
        return real_sh(*argv, **kwargs)

    monkeypatch.setattr(device_fixtures, "sh", failing_mount)  # a set-up step fails: undone as far as it got
    with pytest.raises(AssertionError, match="mount failed"):
        with mounted_image(image, mountpoint, size="16M"):
            pass
    assert not mounts_under(tmp_path) and not loops_under(tmp_path) and not image.exists()
