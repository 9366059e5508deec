"""Huge-page state an attacker can reach no more: the lock and the holder counts live in the root-only
``/run/iolab``, not in world-writable ``/run/lock``.

Each test runs a real reservation (16 MiB of huge pages, given back) in a child process inside a
private mount namespace (``unshare --mount``) where a tmpfs stands over ``/run/lock`` or
``/run/iolab``: the planted links and marks are seen by that child only, never by the other iolab
runs on this machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iolab.core import ownership

from cli_helpers import ROOT, needs_root

pytestmark = [needs_root, pytest.mark.skipif(not Path("/proc/sys/vm/nr_hugepages").exists(),
                                             reason="this kernel has no huge pages")]

CHILD = textwrap.dedent("""
    import json, os, subprocess, sys
    from pathlib import Path
    from iolab.core.errors import IolabError
    from iolab.engine import reaper
    from iolab.isolation import hugepages
    from iolab.isolation.sandbox import open_sandbox

    victim, where = sys.argv[1], sys.argv[2]
    dead = subprocess.Popen(["true"]); dead.wait()
    if where == "/run/lock":   # what the old code read and wrote
        os.symlink(victim, "/run/lock/iolab-hugepages.lock")
        os.symlink(victim, f"/run/lock/iolab-hugepages.{os.getpid()}")
        Path(f"/run/lock/iolab-hugepages.{dead.pid}").write_text("1000000\\n")
    else:                      # root's own directory, as only root could plant in it
        os.symlink(victim, "/run/iolab/hugepages.lock")
    out = {}
    try:
        with open_sandbox("hugepages", hugepages_bytes="16M") as box:
            out["reserved"] = box.hugepages["reserved_pages"]
            out["holders"] = hugepages.hugepage_holders().get(os.getpid())
        out["released"] = box.hugepages["released"]
    except IolabError as exc:
        out["error"] = str(exc)
    out["outstanding"] = hugepages.outstanding_hugepages()
    out["dry_run"] = reaper.reap(dry_run=True)
    print(json.dumps(out))
""")


def _child(tmp_path, where: str, opts: str) -> tuple[dict, str]:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    script = f"mount -t tmpfs -o {opts} iolab-test {where} && exec {sys.executable} -c \"$0\" {victim} {where}"
    env = {k: v for k, v in os.environ.items() if k != ownership.ENV}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, CHILD],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), victim.read_text()


def test_links_and_marks_planted_in_run_lock_are_never_used(tmp_path):
    found, victim = _child(tmp_path, "/run/lock", "mode=1777")
    assert victim == "precious\n"   # neither the lock nor the holder mark was written through a link
    assert found.get("error") is None, found
    assert found["reserved"] == found["holders"] == found["released"] == 8 and found["outstanding"] == 0
    assert not [line for line in found["dry_run"] if "1000000" in line], found["dry_run"]


def test_a_lock_planted_as_a_link_in_run_iolab_is_refused(tmp_path):
    found, victim = _child(tmp_path, "/run/iolab", "mode=0700")
    assert victim == "precious\n"
    assert found["error"] == ("the huge page pool (/proc/sys/vm/nr_hugepages): refused to open the lock file "
                              "hugepages.lock: a symlink (not followed)"), found
    assert found["outstanding"] == 0 and "reserved" not in found
