"""The emulated consumer SSD: its write ceiling falls after the declared bytes and comes back after idle.

Real fio on a real throttled loop device; the detector (iolab.analysis.cliff) reads fio's own
per-second bandwidth log. The rates are ceilings far below what the loop device does, so they
hold on a busy host; the cliff is placed by the device's own write counter.
"""
from __future__ import annotations

import time

import pytest

from iolab.analysis.cliff import find_cliff, parse_bw_log
from iolab.core.errors import IolabError
from iolab.devices.cliffwatch import CliffSpec, parse_cliff
from iolab.devices.emulated import emulated_device, get_profile
from iolab.isolation.sandbox import open_sandbox

from kernel_fixtures import fio_json, machine_clean, module_clean, needs_fio, needs_root, scratch  # noqa: F401

pytestmark = pytest.mark.usefixtures("module_clean", "machine_clean")

MiB = 1024**2


def test_the_profile_declares_its_cliff():
    p = get_profile("consumer-ssd")
    assert p.cliff == CliffSpec(after_bytes=256 * MiB, write_bps=25_000_000, recover_idle_s=3.0)
    assert p.write_bps == 100_000_000


@pytest.mark.parametrize("spec, message", [
    ("fast", "must be a mapping"),
    ({"after": "1G", "write_bps": 5}, "missing field"),
    ({"after": "1G", "write_bps": 5, "recover_idle_s": 1, "x": 1}, "unknown field"),
    ({"after": "1G", "write_bps": -5, "recover_idle_s": 1}, "write_bps"),
    ({"after": "1G", "write_bps": 5, "recover_idle_s": 0}, "recover_idle_s"),
])
def test_a_bad_cliff_names_its_field(spec, message):
    with pytest.raises(IolabError, match=message):
        parse_cliff(spec, "emulated.yaml: x.cliff")


def _write(box, dev, tmp_path, name, size):
    """A sequential 128 KiB O_DIRECT write of ``size`` with a per-second bandwidth log; returns (job, log)."""
    job = fio_json([f"--name={name}", f"--filename={dev.device}", "--rw=write", "--bs=128k", "--direct=1",
                    "--ioengine=libaio", "--iodepth=4", f"--size={size}", f"--write_bw_log={tmp_path / name}",
                    "--log_avg_msec=1000", *[f"--{k}={v}" for k, v in dev.fio_options.items()]],
                   popen=box.popen)
    return job, (tmp_path / f"{name}_bw.1.log").read_text()


@needs_root
@needs_fio
def test_the_cliff_is_where_it_was_declared_and_recovers_after_idle(scratch, tmp_path):
    p = get_profile("consumer-ssd")
    with emulated_device("consumer-ssd", size="448M", scratch_dir=scratch) as dev:
        with open_sandbox("direct", buffered=False, throttles=dev.throttles) as box:
            _, log_text = _write(box, dev, tmp_path, "sustained", "384M")
            cliffs = [e for e in dev.cliff_watch.events if e["event"] == "cliff"]
            time.sleep(p.cliff.recover_idle_s + 0.5)
            recovery, _ = _write(box, dev, tmp_path, "recovery", "64M")
        described = dev.describe()["cliff"]
    cliff = find_cliff(*parse_bw_log(log_text))
    print(f"\nconsumer-ssd: burst {cliff.burst_bps / 1e6:.1f} MB/s, cliff after {cliff.cliff_bytes / MiB:.1f} MiB, "
          f"then {(cliff.after_bps or 0) / 1e6:.1f} MB/s; after idle {recovery['write']['bw_bytes'] / 1e6:.1f} MB/s")
    assert cliff.found
    assert cliff.cliff_bytes == pytest.approx(p.cliff.after_bytes, rel=0.05)
    assert cliff.burst_bps == pytest.approx(p.write_bps, rel=0.10)
    assert cliff.after_bps == pytest.approx(p.cliff.write_bps, rel=0.10)
    assert recovery["write"]["bw_bytes"] == pytest.approx(p.write_bps, rel=0.10)
    # the manifest's record: what was declared and when the cliff was applied (within a few MB of it)
    assert described["declared"]["after_bytes"] == p.cliff.after_bytes
    assert len(cliffs) == 1 and cliffs[0]["groups"]
    assert cliffs[0]["written_bytes"] == pytest.approx(p.cliff.after_bytes, rel=0.02)
    assert [e["event"] for e in described["events"]][:2] == ["cliff", "recovered"]
