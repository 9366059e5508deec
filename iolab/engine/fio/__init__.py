"""The fio engine: render job files, check them with fio, run fio without a shell.

Parsing lives in :mod:`iolab.engine.fio.parse`; :func:`parse_output` is re-exported
here because it is the contract name (``iolab.engine.fio.parse_output``).
"""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess

from iolab.core import commands
from iolab.core.errors import IolabError
from iolab.core.units import fio_size
from iolab.isolation import confine
from iolab.engine.fio.parse import parse_output  # noqa: F401  (contract: iolab.fio.parse_output)

log = logging.getLogger(__name__)

#: Percentiles every run asks fio for (on total latency, lat_ns).
PERCENTILES = "50:99:99.9"
#: Options iolab adds to every job so the result columns can be filled.
REPORTING_OPTIONS = {"lat_percentiles": 1, "percentile_list": PERCENTILES}


def fio_binary() -> str:
    return commands.which("fio")


def version() -> str:
    """fio's version string, e.g. ``fio-3.33``."""
    return commands.run([fio_binary(), "--version"]).stdout.strip()


def _value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    if "\n" in text:
        raise IolabError(f"a fio option value cannot span lines: {text!r}")
    return text


def render_job(name: str, options: dict, global_options: dict | None = None) -> str:
    """A fio job file with a ``[global]`` section and one job section."""
    lines = ["; written by iolab; run it again with: fio <this file>", "[global]"]
    for key, value in {**REPORTING_OPTIONS, **(global_options or {})}.items():
        lines.append(f"{key}={_value(value)}")
    lines += ["", f"[{name}]"]
    for key, value in options.items():
        lines.append(f"{key}={_value(value)}")
    return "\n".join(lines) + "\n"


def job_options(recipe, step, target, *, force_direct: bool) -> tuple[dict, dict]:
    """The [global] and job options of one step on one target."""
    global_options = dict(recipe.fio)
    if target.emulated is not None:  # what the device needs for its declared limits to hold
        global_options.update(target.emulated.fio_options)
    if recipe.jobfile is None:
        global_options["filename"] = target.filename
        global_options["size"] = fio_size(recipe.size)
        if recipe.ramp_time:
            global_options["ramp_time"] = f"{int(recipe.ramp_time)}s"
    options = dict(step.options)
    if force_direct and step.buffered:
        options["direct"] = 1
    return global_options, options


def check_job(path: str | os.PathLike) -> None:
    """``fio --parse-only``: a bad option stops the run before anything is measured.

    fio loads an external ioengine while it parses (its constructor runs), so the parse is
    confined too where it can be: nothing writable, no device, no network.
    """
    proc = commands.run(confine.reader_argv([fio_binary(), "--parse-only", str(path)]), check=False)
    if proc.returncode != 0:
        text = (proc.stderr + proc.stdout).strip().splitlines()
        problems = [line.strip() for line in text if line.startswith("fio:")] or text[-1:]
        raise IolabError(f"fio rejects the job file: {'; '.join(problems) or 'no detail'}", context=str(path))


def command(jobfile: str | os.PathLike, *, output_format: str = "json",
            extra: list[str] | None = None) -> list[str]:
    """The exact fio command line iolab runs (recorded in the manifest)."""
    argv = [fio_binary(), f"--output-format={output_format}"]
    argv += extra or []
    argv.append(str(jobfile))
    return argv


_ERR_RE = re.compile(r"^fio: .*$", re.MULTILINE)


def error_lines(text: str) -> list[str]:
    """fio's own error lines (``fio: pid=..., err=28/...``) from stderr or stdout."""
    return [m.group(0).strip() for m in _ERR_RE.finditer(text or "")]


def _sigint_default() -> None:
    """In the child, before exec: SIGINT back to its default. An iolab started with SIGINT ignored
    (``cmd &`` in a script, some CI runners) would pass SIG_IGN on, and fio would not stop at the
    watchdog's or the user's SIGINT (the watchdog then had to SIGKILL it, losing its JSON)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(argv: list[str], *, stdout, stderr, popen=subprocess.Popen, cwd=None) -> subprocess.Popen:
    """Start fio (no shell); ``popen`` lets cache isolation place it in a cgroup."""
    log.info("running %s", " ".join(argv))
    # Only then: a preexec_fn makes Python run its at-fork hooks in this process, and a Ctrl-C landing
    # inside one (logging's lock release) is printed and dropped: the run would not stop
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    return popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=cwd,
                 **({"preexec_fn": _sigint_default} if ignored else {}))
