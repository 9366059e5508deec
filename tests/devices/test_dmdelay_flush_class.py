"""Whether dm-delay has the flush class, from the kernel's own word (iolab.devices.dmdelay), and what
latency.stack makes of it.

The host has no device-mapper, so ``dmsetup targets`` is read from real output captured in the lab VM
(tests/fixtures/dmsetup/, Debian's 6.1 kernel: ``delay v1.3.0``). Older kernels print ``delay v1.2.1``:
those before Linux 4.19 refuse a flush delay, those from 4.19 (commit cda6b5ab7f59 added the class without
a version bump) up to the bump to v1.3.0 take it. The flush class on a real kernel is exercised in
tests/lab/test_lab_latency.py.
"""
from __future__ import annotations

import contextlib
import platform
from pathlib import Path

import pytest

from iolab.core.errors import IolabError
from iolab.devices import dmdelay, latency
from iolab.devices.emulated import get_profile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dmsetup"
LAB_RELEASE = "6.1.0-56-amd64"  # the lab VM's kernel, where the fixture comes from

# What a 4.x/5.x kernel prints (dm-delay's .version {1, 2, 1} from Linux 4.x up to the bump to 1.3.0): not
# captured here (no such kernel on this machine), written in dmsetup's own layout.
OLDER_TARGETS = "delay            v1.2.1\nstriped          v1.6.0\nlinear           v1.3.0\nerror            v1.5.0\n"


def lab_targets() -> str:
    """The captured ``dmsetup targets`` output, without the fixture's own comment lines."""
    text = (FIXTURES / "targets-lab-debian-6.1.txt").read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def test_the_lab_kernels_dmsetup_targets_gives_every_target_its_version():
    targets = dmdelay.parse_targets(lab_targets())
    assert targets == {"delay": (1, 3, 0), "striped": (1, 6, 0), "linear": (1, 4, 0), "error": (1, 5, 0)}
    assert "delay" in targets, "unavailable() keeps asking by name"


def test_a_target_without_a_readable_version_keeps_its_name():
    assert dmdelay.parse_targets("delay\n\nlinear           v1.4.0\nodd   1.2\n") == \
        {"delay": None, "linear": (1, 4, 0), "odd": None}


@pytest.mark.parametrize("version, release, missing", [
    ((1, 3, 0), LAB_RELEASE, None),                     # the lab's kernel
    ((1, 4, 0), "6.15.0", None),
    ((1, 2, 1), "5.15.0-91-generic", None),             # 4.19 .. 1.3.0: the class without the bump
    ((1, 2, 1), "4.19.0-27-amd64", None),
    ((1, 2, 1), "4.14.0-19-amd64", "dm-delay v1.2.1 on Linux 4.14.0-19-amd64: the flush class came with Linux 4.19"),
    ((1, 2, 1), "4.18.0-553.el8_10.x86_64", "dm-delay v1.2.1 on Linux 4.18.0-553.el8_10.x86_64: the flush class "
                                             "came with Linux 4.19"),
    ((1, 2, 0), "4.4.0", "dm-delay v1.2.0 on Linux 4.4.0: the flush class came with Linux 4.19"),
    ((1, 2, 1), "custom", "dm-delay v1.2.1 predates v1.3.0 and the kernel release 'custom' is not a version"),
    (None, LAB_RELEASE, "the kernel lists no dm-delay version (dmsetup targets)"),
])
def test_the_flush_class_is_decided_by_the_version_and_the_release(version, release, missing):
    assert dmdelay.flush_class_missing(version, release) == missing


def test_has_flush_class_asks_dmsetup_targets_and_the_running_kernel(monkeypatch):
    monkeypatch.setattr(dmdelay, "_targets", lambda: dmdelay.parse_targets(lab_targets()))
    monkeypatch.setattr(platform, "release", lambda: LAB_RELEASE)
    assert dmdelay.delay_version() == (1, 3, 0) and dmdelay.has_flush_class() is True
    monkeypatch.setattr(dmdelay, "_targets", lambda: dmdelay.parse_targets(OLDER_TARGETS))
    assert dmdelay.has_flush_class() is True, "v1.2.1 on a 6.1 kernel has the class"
    monkeypatch.setattr(platform, "release", lambda: "4.14.0-19-amd64")
    assert dmdelay.has_flush_class() is False
    monkeypatch.setattr(dmdelay, "_targets", lambda: None)  # no device-mapper (this host)
    assert dmdelay.delay_version() is None and dmdelay.has_flush_class() is False


class StandInDmsetup:
    """dmdelay.create/remove without a device-mapper (this host has none): records each create, and raises
    ``error`` where it is given, as a refused ``dmsetup create`` does."""

    def __init__(self, error: IolabError | None = None):
        self.error, self.made, self.removed = error, [], []

    def create(self, lower, *, read_ms, write_ms, flush_ms=None, **details):
        self.made.append((lower, read_ms, write_ms, flush_ms))
        if self.error is not None:
            raise self.error
        return "/dev/mapper/iolab-delay-1-abc"

    def install(self, monkeypatch):
        monkeypatch.setattr(dmdelay, "create", self.create)
        monkeypatch.setattr(dmdelay, "remove", self.removed.append)
        return self


def kernel(monkeypatch, targets: str, release: str) -> None:
    monkeypatch.setattr(dmdelay, "_targets", lambda: dmdelay.parse_targets(targets))
    monkeypatch.setattr(platform, "release", lambda: release)


def test_a_kernel_without_the_flush_class_gets_reads_and_writes_and_the_reason_names_its_version(monkeypatch):
    kernel(monkeypatch, OLDER_TARGETS, "4.14.0-19-amd64")
    dmsetup = StandInDmsetup().install(monkeypatch)
    chosen = latency.choose(get_profile("hdd"), unavailable=lambda: None)
    with contextlib.ExitStack() as undo:
        stacked = latency.stack(chosen, "/dev/loop7", undo)
    assert dmsetup.made == [("/dev/loop7", 8, 0, None)], "one create, the 6-argument table"
    assert dmsetup.removed == ["iolab-delay-1-abc"]
    assert (stacked.kind, stacked.read_delay_ms, stacked.write_delay_ms, stacked.flush_delay_ms) == \
        ("dm-delay", 8, 0, None)
    assert stacked.reason == (f"{chosen.reason}; its dm-delay has no flush class (dm-delay v1.2.1 on Linux "
                              "4.14.0-19-amd64: the flush class came with Linux 4.19): a cache flush waits the "
                              "write delay (0 ms), not 8 ms")


def test_a_kernel_with_the_flush_class_gets_it_and_the_reason_is_unchanged(monkeypatch):
    kernel(monkeypatch, lab_targets(), LAB_RELEASE)
    dmsetup = StandInDmsetup().install(monkeypatch)
    chosen = latency.choose(get_profile("hdd"), unavailable=lambda: None)
    with contextlib.ExitStack() as undo:
        stacked = latency.stack(chosen, "/dev/loop7", undo)
    assert dmsetup.made == [("/dev/loop7", 8, 0, 8)]
    assert (stacked.flush_delay_ms, stacked.reason, stacked.dm_device) == \
        (8, chosen.reason, "/dev/mapper/iolab-delay-1-abc")


def test_a_failed_create_on_a_kernel_with_the_flush_class_is_raised_not_taken_for_a_missing_class(monkeypatch):
    """A transient dmsetup failure used to be retried without the flush class, and the device's reason then
    blamed a flush class the kernel has."""
    kernel(monkeypatch, lab_targets(), LAB_RELEASE)
    busy = IolabError("exited with 1: device-mapper: create ioctl on iolab-delay-1-abc failed: "
                      "Device or resource busy", context="dmsetup create iolab-delay-1-abc")
    dmsetup = StandInDmsetup(error=busy).install(monkeypatch)
    chosen = latency.choose(get_profile("hdd"), unavailable=lambda: None)
    with contextlib.ExitStack() as undo:
        with pytest.raises(IolabError) as caught:
            latency.stack(chosen, "/dev/loop7", undo)
    assert caught.value is busy
    assert dmsetup.made == [("/dev/loop7", 8, 0, 8)], "asked once, with the flush class, no retry"
    assert dmsetup.removed == [], "nothing was made, nothing is undone"
