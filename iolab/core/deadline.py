"""Time limits: a :class:`Deadline`, and :func:`wait_until`, the one loop that polls for something awaited."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from iolab.core.errors import IolabError

T = TypeVar("T")


class Deadline:
    """A moment ``seconds`` from now (None: never), on the monotonic clock."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        """Seconds until it (0 once past; None: no deadline)."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.at is not None and time.monotonic() > self.at


def wait_until(predicate: Callable[[], T], timeout: float | None, *, interval: float = 0.05,
               what: str | Callable[[], str] | None = None, context: str | None = None,
               hint: str | None = None) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a true value, and return that.

    After ``timeout`` seconds (None: no limit): an :class:`IolabError` "timed out after N s waiting for
    <what>" (``what`` names what was awaited; a callable makes the phrase from what is known by then),
    or, without ``what``, the last (false) value. ``predicate`` may raise to give up early.
    """
    deadline = Deadline(timeout)
    while not (value := predicate()):
        if deadline.expired():
            if what is None:
                return value
            phrase = what() if callable(what) else what
            raise IolabError(f"timed out after {timeout:g} s waiting for {phrase}", context=context, hint=hint)
        time.sleep(interval)
    return value
