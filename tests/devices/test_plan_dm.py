"""Setup plans with device-mapper entries (``delay``, ``cache``): validation, exact dry-run commands,
teardown's identity checks. The real cycles run in the lab VM (tests/lab/test_lab_flashcache.py and
test_lab_devices.py over examples/plans): this host's kernel has no device-mapper."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_helpers import ROOT
from iolab.core.errors import IolabError
from iolab.devices import dmtable
from iolab.devices import plan as setup_plan
from iolab.devices.plan import dm as plan_dm, undo as plan_undo


def cached(root: Path) -> dict:
    """A slow loop device behind dm-delay, cached on a loop device with carved metadata, ext4 on top."""
    return {
        "name": "fc",
        "loop_devices": [
            {"name": "hdd", "file": "images/hdd.img", "size": "256M"},
            {"name": "ssd", "file": "images/ssd.img", "size": "64M"},
        ],
        "delay": [{"name": "fc-hdd", "device": "hdd", "read_ms": 8, "write_ms": 4}],
        "cache": [{"name": "fc-on", "origin": "fc-hdd", "cache": "ssd"}],
        "filesystems": [{"device": "fc-on", "type": "ext4", "mount": str(root / "mnt")}],
    }


def load(tmp_path: Path, data: dict) -> setup_plan.Plan:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return setup_plan.load_plan(path)


@pytest.mark.parametrize("mutate, field, words", [
    (lambda p: p["delay"][0].pop("read_ms"), "delay[0].read_ms", "missing"),
    (lambda p: p["delay"][0].update(read_ms=-1), "delay[0].read_ms", "whole number of milliseconds"),
    (lambda p: p["delay"][0].update(write_ms="4ms"), "delay[0].write_ms", "whole number of milliseconds"),
    (lambda p: p["delay"][0].update(device="nope"), "delay[0].device", "unknown device name 'nope'"),
    (lambda p: p["delay"][0].update(latency=3), "delay[0].latency", "unknown key"),
    (lambda p: p["cache"][0].update(mode="writearound"), "cache[0].mode",
     "writethrough, writeback, passthrough, got 'writearound'"),
    (lambda p: p["cache"][0].update(policy="lru"), "cache[0].policy", "must be smq, got 'lru'"),
    (lambda p: p["cache"][0].update(block_size="48K"), "cache[0].block_size", "multiple of 32K"),
    (lambda p: p["cache"][0].update(block_size="2G"), "cache[0].block_size", "between 32K and 1G"),
    (lambda p: p["cache"][0].update(metadata_size="3M"), "cache[0].metadata_size", "at least 4M"),
    (lambda p: p["cache"][0].update(origin="hdd"), "cache[0].origin", "already used at delay[0].device"),
    (lambda p: (p["delay"][0].update(device="fc-on"), p.update(filesystems=[])), "(top level)",
     "circular device references: fc-hdd, fc-on"),
    (lambda p: p["cache"][0].update(metadata="hdd", metadata_size="8M"), "cache[0].metadata_size",
     "only for metadata carved"),
    (lambda p: p["cache"][0].update(metadata_size="64M"), "cache[0].cache", "no room for a cache block"),
    (lambda p: (p["loop_devices"].append({"name": "meta", "file": "images/meta.img", "size": "4M"}),
                p["loop_devices"][1].update(size="1G"), p["cache"][0].update(block_size="32K", metadata="meta")),
     "cache[0].metadata", "dm-cache needs 5 MiB of metadata for 32768 cache blocks"),
    (lambda p: p.update(partitions=[{"device": "fc-on", "parts": [{"name": "p1"}]}], filesystems=[]),
     "partitions[0].device", "device-mapper device: the kernel does not partition it"),
    (lambda p: p["filesystems"][0].update(type="xfs"), "filesystems[0].device",
     "fc-on is 256 MiB but mkfs.xfs needs at least 300 MiB: make loop_devices[0].size larger"),
])
def test_dm_entries_validated_naming_file_and_field(tmp_path, mutate, field, words):
    data = cached(tmp_path)
    mutate(data)
    with pytest.raises(IolabError) as info:
        load(tmp_path, data)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'plan.yaml'}: {field}:"), message
    assert words in message, message


def test_cached_plan_commands_are_exact(tmp_path):
    plan = load(tmp_path, cached(tmp_path))
    uuid = plan_dm.uuid(plan, plan_dm.DmPiece("x", "delay", None)).rsplit("-", 1)[0]
    images = tmp_path / "images"
    # 64 MiB cache of 64 KiB blocks: 1024 blocks, metadata 4 MiB + 16 KiB -> 5 MiB carved (10240 sectors)
    assert setup_plan.plan_commands(plan)[5:] == [
        ["dmsetup", "create", "--noudevsync", "fc-hdd", "--uuid", f"{uuid}-fc-hdd", "--table",
         "0 524288 delay <hdd> 0 8 <hdd> 0 4"],
        ["dmsetup", "create", "--noudevsync", "fc-on-cmeta", "--uuid", f"{uuid}-fc-on-cmeta", "--table",
         "0 10240 linear <ssd> 0"],
        ["dmsetup", "create", "--noudevsync", "fc-on-cdata", "--uuid", f"{uuid}-fc-on-cdata", "--table",
         "0 120832 linear <ssd> 10240"],
        ["dd", "if=/dev/zero", "of=<fc-on-cmeta>", "bs=4096", "count=1", "oflag=direct", "conv=fsync",
         "status=none"],
        ["dmsetup", "create", "--noudevsync", "fc-on", "--uuid", f"{uuid}-fc-on", "--table",
         "0 524288 cache <fc-on-cmeta> <fc-on-cdata> <fc-hdd> 128 1 writethrough smq 0"],
        ["mkfs.ext4", "-F", "<fc-on>"],
        ["mkdir", "-p", str(tmp_path / "mnt")],
        ["mount", "-t", "ext4", "<fc-on>", str(tmp_path / "mnt")],
    ]
    assert setup_plan.plan_commands(plan)[1] == ["fallocate", "--length", str(256 * 1024**2), str(images / "hdd.img")]


def test_separate_metadata_device_and_writeback(tmp_path):
    data = cached(tmp_path)
    data["loop_devices"].append({"name": "meta", "file": "images/meta.img", "size": "8M"})
    data["cache"][0].update(metadata="meta", mode="writeback", block_size="128K")
    commands = setup_plan.plan_commands(load(tmp_path, data))
    assert not any("fc-on-cmeta" in " ".join(argv) for argv in commands)
    assert ["dd", "if=/dev/zero", "of=<meta>", "bs=4096", "count=1", "oflag=direct", "conv=fsync",
            "status=none"] in commands
    assert commands[commands.index(["dd", "if=/dev/zero", "of=<meta>", "bs=4096", "count=1", "oflag=direct",
                                    "conv=fsync", "status=none"]) + 1][-1] == \
        "0 524288 cache <meta> <ssd> <fc-hdd> 256 1 writeback smq 0"


def test_example_flash_cache_plans_load_and_dry_run():
    on = setup_plan.load_plan(ROOT / "examples" / "plans" / "flash-cache.yaml")
    off = setup_plan.load_plan(ROOT / "examples" / "plans" / "flash-cache-off.yaml")
    assert [c.mode for c in on.caches] == ["writethrough"] and on.delays[0].read_ms == off.delays[0].read_ms
    assert not off.caches and off.filesystems[0].mount != on.filesystems[0].mount
    for plan in (on, off):
        assert [a for a in setup_plan.plan_commands(plan) if a[:2] == ["dmsetup", "create"]]


def test_cleaner_table_and_metadata_size():
    table = "0 524288 cache /dev/dm-1 /dev/dm-2 /dev/dm-0 128 1 writeback smq 0"
    assert dmtable.cleaner_table(table) == "0 524288 cache /dev/dm-1 /dev/dm-2 /dev/dm-0 128 1 writeback cleaner 0"
    with pytest.raises(IolabError, match="not a dm-cache table"):
        dmtable.cleaner_table("0 10 linear /dev/loop0 0")
    assert dmtable.metadata_size(64 * 1024**2, 64 * 1024) == 5 * 1024**2
    assert dmtable.metadata_size(100 * 1024**3, 32 * 1024) == 54 * 1024**2  # 4 MiB + 16 B x 3,276,800 blocks


def test_cache_counters_parse_dmsetup_status(monkeypatch):
    # `dmsetup status` of a dm-cache (Linux 6.1, cache.rst's field order)
    line = ("0 131072 cache 8 27/1280 64 512/1024 3301 1523 0 12 0 480 3 1 writethrough 2 "
            "migration_threshold 2048 smq 0 rw -")
    monkeypatch.setattr(dmtable, "status", lambda name: line)
    assert dmtable.cache_counters("x") == {"used_blocks": 512, "total_blocks": 1024, "read_hits": 3301,
                                           "read_misses": 1523, "write_hits": 0, "write_misses": 12,
                                           "demotions": 0, "promotions": 480, "dirty": 3}


def test_a_writeback_cache_waits_for_its_dirty_blocks_and_says_how_many_remain(monkeypatch):
    """Before a writeback cache is removed the cleaner policy must have written every dirty block back;
    a cache that never gets there is refused with the count still dirty (the counters as dmsetup reports
    them, read through dmtable.status as in the test above)."""
    lines = iter([3, 1, 0])
    status = ("0 131072 cache 8 27/1280 64 512/1024 3301 1523 0 12 0 480 {} 1 writeback 2 "
              "migration_threshold 2048 cleaner 0 rw -")
    monkeypatch.setattr(dmtable, "status", lambda name: status.format(next(lines)))
    plan_dm._wait_clean("fc-on")
    assert next(lines, None) is None, "read until no block was dirty, then no more"
    monkeypatch.setattr(dmtable, "status", lambda name: status.format(5))
    monkeypatch.setattr(plan_dm, "FLUSH_TIMEOUT", 0.3)
    with pytest.raises(IolabError, match="5 dirty cache blocks still not written back after 0 s"):
        plan_dm._wait_clean("fc-on")


def test_teardown_leaves_a_dm_device_that_is_not_the_plans(tmp_path, monkeypatch):
    """A state record whose dm name now belongs to another device (other uuid) is not removed; a gone
    one is skipped; either way the state file goes."""
    plan = load(tmp_path, cached(tmp_path))
    steps = [{"kind": "dm", "name": "fc-hdd", "dm_name": "fc-hdd", "uuid": "IOLAB-abc-fc-hdd", "status": "done",
              "device": "/dev/mapper/fc-hdd", "table": "0 8 delay /dev/loop0 0 8 /dev/loop0 0 4", "role": "delay"},
             {"kind": "dm", "name": "fc-on", "dm_name": "fc-on", "uuid": "IOLAB-abc-fc-on", "status": "done",
              "device": "/dev/mapper/fc-on", "table": "", "role": "cache", "mode": "writeback"}]
    plan.state_path.write_text(json.dumps({"status": "ready", "devices": {}, "steps": steps}))
    sys_block = tmp_path / "sys"
    (sys_block / "dm-0" / "dm").mkdir(parents=True)
    (sys_block / "dm-0" / "dm" / "name").write_text("fc-hdd\n")
    (sys_block / "dm-0" / "dm" / "uuid").write_text("LVM-someone-else\n")
    monkeypatch.setattr(dmtable, "SYS_BLOCK", sys_block)
    assert plan_undo.teardown_commands(plan) == []
    assert setup_plan.teardown(plan) == []
    assert not plan.state_path.exists()
