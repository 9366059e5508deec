"""Sizes as an editor prints them (units.human_size): one decimal only where it is not 0, the largest unit that
keeps the number below 1024, TiB the last."""
import pytest

from iolab.core.units import human_size


@pytest.mark.parametrize("nbytes, shown", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
    (512 * 2**20, "512 MiB"),  # not '512.0 MiB'
    (2**30, "1 GiB"), (1.5 * 2**30, "1.5 GiB"), (16 * 2**30, "16 GiB"),
    (5 * 2**40, "5 TiB"), (3 * 2**50, "3072 TiB"),  # past TiB: still TiB
    (-2048, "-2 KiB"),
])
def test_human_size(nbytes, shown):
    assert human_size(nbytes) == shown
