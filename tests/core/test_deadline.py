"""core.deadline: the Deadline and wait_until, the one polling loop, on the real clock and a real child."""
from __future__ import annotations

import subprocess
import time

import pytest

from iolab.core.deadline import Deadline, wait_until
from iolab.core.errors import IolabError


def test_a_deadline_counts_down_and_expires_and_none_never_does():
    deadline = Deadline(0.3)
    assert not deadline.expired() and 0.2 < deadline.left() <= 0.3
    time.sleep(0.35)
    assert deadline.expired() and deadline.left() == 0.0
    assert not Deadline(None).expired() and Deadline(None).left() is None


def test_wait_until_returns_what_the_predicate_found_once_it_is_true():
    child = subprocess.Popen(["sleep", "0.2"])
    started = time.monotonic()
    assert wait_until(lambda: child.poll() is not None, 10, what="sleep to end") is True  # (poll's 0 is false)
    assert child.returncode == 0
    assert time.monotonic() - started < 5
    values = iter([None, "", "found"])
    assert wait_until(lambda: next(values), 10, interval=0.01) == "found"


def test_wait_until_names_what_it_awaited_when_time_runs_out():
    started = time.monotonic()
    with pytest.raises(IolabError, match=r"^dev0: timed out after 0.2 s waiting for the node to appear \(udev\?\)$"):
        wait_until(lambda: False, 0.2, what="the node to appear", context="dev0", hint="udev?")
    assert 0.2 <= time.monotonic() - started < 5
    seen = []
    with pytest.raises(IolabError, match=r"waiting for it to show 3 \(it shows 2\)"):
        wait_until(lambda: seen.append(len(seen)) or False, 0.1, interval=0.01,
                   what=lambda: f"it to show 3 (it shows {min(seen[-1], 2)})")


def test_without_what_the_last_false_value_comes_back_and_a_predicate_may_give_up_early():
    assert wait_until(lambda: 0, 0.1, interval=0.01) == 0

    def gives_up():
        raise IolabError("exited while starting", context="server")
    with pytest.raises(IolabError, match="exited while starting"):
        wait_until(gives_up, 60)
