"""Words iolab records in a manifest for a report to read back by key.

A producer (iolab.devices: a block device's description, a tool's reason for not reading a drive) writes a
template of a table here with its fields; a report finds the key and the fields again with :func:`read` and says
them in its page's language (the locale's words under the same keys). The table is the one place both sides
agree on: a template changed here changes what is written and what is recognised together. Anything else
(a drive's own model, a tool's own words) is not iolab's and is printed as stored.
"""
from __future__ import annotations

import functools
import re

#: A block device without a model of its own, described by kind (iolab.devices.blockdev.model); ``emulated``
#: is how runs before the emulated devices' own records described them (and the test fixtures still do).
#: A report's locale says each in its language under ``devices``.
DEVICE_DESCRIPTIONS = {
    "loop": "loop device",
    "virtio": "virtio disk",
    "dm_named": "device-mapper {name}",
    "dm": "device-mapper",
    "md_level": "md {level}",
    "zram": "zram (compressed RAM)",
    "emulated": "iolab emulated {kind} (loop, throttled)",
}


@functools.lru_cache(maxsize=None)
def _pattern(template: str, free: tuple[str, ...]) -> re.Pattern:
    """``template``'s literal text, each ``{field}`` one word, or any text for the ``free`` fields."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else (f"(?P<{p}>.*?)" if p in free else f"(?P<{p}>\\S+)")
                              for i, p in enumerate(parts)), re.S)


def read(text, templates: dict, free: tuple[str, ...] = ()) -> tuple[str, dict] | None:
    """``(key, fields)`` of the first template of ``templates`` that ``text`` is, whole (``free``: the fields that
    may hold spaces, a tool's own words), or None for words iolab did not write."""
    for key, template in templates.items():
        found = _pattern(template, tuple(free)).fullmatch(str(text).strip())
        if found:
            return key, found.groupdict()
    return None


def write(templates: dict, key: str, **fields) -> str:
    """The recorded words of ``key`` with its ``fields``."""
    return templates[key].format(**fields)
