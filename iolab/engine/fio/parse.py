"""Parse fio's output into one tidy row per job x direction.

Finding the JSON documents and fio's error lines in the text is
:mod:`iolab.engine.fio.text`; this module turns the last complete document into rows.

fio's stdout is rarely "just JSON". The parser survives what real runs print
(see the design notes, "fio: what the parser must survive"):

* text before and after the JSON: notes ("note: both iodepth >= 1 and
  synchronous I/O engine are selected ..."), the job failure lines
  ("fio: pid=..., err=28/file:io_u.c:..., func=io_u error, error=...") and, in
  client/server mode, the servers' own output prefixed with ``<hostname>``;
* several JSON documents (``--status-interval``): the last complete one is the
  result;
* ``--output-format=json+``: the latency histogram ``bins`` are used to merge
  percentiles exactly;
* ``client_stats`` instead of ``jobs`` in client/server mode, with the
  ``"All clients"`` aggregate skipped (it would count everything twice);
* ``numjobs > 1`` without ``group_reporting``: one JSON entry per job, all
  with the same name, merged into one row (how: below);
* a job with ``"error": 28`` (ENOSPC) and a non-zero exit: the data is kept
  and the row says what went wrong; a job that failed before any I/O still
  gives a row, so an error is never lost.

Units in the result: ``bw_mbps`` decimal MB/s (``bw_bytes / 1e6``), latencies
in microseconds (fio 3.x reports nanoseconds), ``runtime_s`` in seconds.

How entries that share a job name are merged (``numjobs`` without
``group_reporting``; the key is client host, group id and job name):

* ``bw_mbps``, ``iops``: the jobs' I/O over the longest runtime, as fio's ``group_reporting`` and
  tiotest give them (not the sum of the jobs' rates: :func:`_rates`);
* ``io_bytes``, ``cpu_usr_pct``, ``cpu_sys_pct``: sums
  (CPU is percent of one CPU, so four busy jobs may show 400 %; a
  ``group_reporting`` entry, where fio prints the jobs' *mean* CPU, is scaled
  by its number of jobs to the same sum). A job's CPU covers all its
  directions, so the read and write rows of a ``randrw`` job repeat it;
* ``lat_mean_us``: mean weighted by the number of latency samples ``N`` (fio's
  ``total_ios`` minus I/Os that never completed, e.g. the one that hit ENOSPC);
* ``lat_max_us``: maximum of the maxima; ``runtime_s``: the longest runtime;
* percentiles: **exact** when every entry carries its histogram
  (``--output-format=json+``): the bins are added and the percentile is
  read off the merged histogram with fio's own rule (the first bucket where
  the running count reaches ``p/100 * N``), so a merged p99 is exactly what
  fio's ``group_reporting`` would print. Without bins the percentiles are
  the **sample-weighted mean** of the jobs' percentiles, an approximation
  (a percentile of a union is not the mean of percentiles; it is close when
  the jobs saw similar latency distributions, which is the ``numjobs`` case).

Percentiles are of total latency (``lat_ns``) when the job ran with
``lat_percentiles=1``; otherwise fio only records completion latency
percentiles and the ``lat_p*_us`` columns hold those (``clat_ns``), which
leave out the submission latency. ``DataFrame.attrs["percentile_source"]``
says which one was used ("lat", "clat" or "clat+lat" for a mix).

``numjobs`` is the number of fio jobs (processes/threads) behind a row: the
number of entries merged, or the job's ``numjobs`` option when fio already
merged them itself (``group_reporting`` prints a single entry). ``iodepth``
and ``bs`` are the job's options as written (fio caps the effective queue depth
of synchronous engines at 1 and says so in the note quoted above).
"""
from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from iolab.core.columns import PARSE_COLUMNS
from iolab.core.errors import IolabError
from iolab.engine.fio.text import (FioErrorLine, first_meaningful_line, outside_documents, scan_documents,
                                  documents, error_lines, error_text, fio_version)  # noqa: F401 (documents)

log = logging.getLogger(__name__)

#: fio's data directions, in the order rows are emitted.
DIRECTIONS = ("read", "write", "trim")

#: Job name fio gives the aggregate entry of ``client_stats`` (more than one client).
ALL_CLIENTS = "All clients"

#: The percentiles the result columns hold.
PERCENTILES = {"lat_p50_us": 50.0, "lat_p99_us": 99.0, "lat_p999_us": 99.9}

_INT_COLUMNS = ("groupid", "bs", "iodepth", "numjobs", "io_bytes")
_FLOAT_COLUMNS = (
    "bw_mbps", "iops", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us",
    "lat_max_us", "cpu_usr_pct", "cpu_sys_pct", "runtime_s",
)

# "fio: pid=4431, err=28/file:io_u.c:1876, func=io_u error, error=No space left on device"
# (in client/server mode the line is prefixed with "<server-hostname> ").
# --------------------------------------------------------------------------- options

def parse_fio_size(value: Any, *, kb_base: int = 1024) -> int | None:
    """A fio size option (``"4k"``, ``"1m"``, ``"4096"``) in bytes, as fio reads it.

    fio's default ``kb_base=1024`` is its compatibility mode: ``k``/``kB``/``K``
    mean 1024 but ``KiB`` means **1000** (and the other way round with
    ``kb_base=1000``). Checked against fio 3.33's own ``bs=(R) ...`` lines.
    Returns ``None`` for what this does not understand (expressions, ranges).
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    match = re.fullmatch(r"(0x[0-9a-f]+|\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?)(b?)", text)
    if not match:
        return None
    number_text, prefix, iec, _ = match.groups()
    number = int(number_text, 16) if number_text.startswith("0x") else float(number_text)
    if iec and not prefix:
        return None
    power = "kmgtpe".index(prefix) + 1 if prefix else 0
    if iec:
        base = 1024 if kb_base == 1000 else 1000
    else:
        base = kb_base
    return int(number * base ** power)


def block_sizes(options: Mapping[str, Any]) -> dict[str, int | None]:
    """Block size per direction from fio's ``bs`` option (``"4k"``, ``"8k,64k"``, ``",8k,"``).

    fio: "A value not terminated in a comma applies to subsequent types";
    an empty field means the default (4096).
    """
    kb_base = _int(options.get("kb_base")) or 1024
    if options.get("bs") is None and any(
            key in options for key in ("bsrange", "blocksize_range", "bssplit")):
        return {d: None for d in DIRECTIONS}
    raw = str(options.get("bs", "4096"))
    fields = raw.split(",")
    sizes: dict[str, int | None] = {}
    default = 4096
    for index, ddir in enumerate(DIRECTIONS):
        if index < len(fields):
            field = fields[index].strip()
            value = parse_fio_size(field, kb_base=kb_base) if field else default
        elif len(fields) < len(DIRECTIONS) and not raw.rstrip().endswith(","):
            value = sizes[DIRECTIONS[len(fields) - 1]]  # last value applies onwards
        else:
            value = default
        sizes[ddir] = value
    return sizes


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value).strip(), 0)
    except ValueError:
        try:
            return int(float(value))
        except ValueError:
            return None


# --------------------------------------------------------------------------- latency

def percentile_from_bins(bins: Mapping[Any, int], percentile: float) -> float:
    """The ``percentile`` of a fio json+ histogram, in the histogram's unit (ns).

    ``bins`` maps a bucket's value (fio writes ``plat_idx_to_val``) to its
    count. fio's rule (``calc_clat_percentiles``): the value of the first
    bucket at which the running count reaches ``percentile / 100 * total``.
    """
    items = sorted((int(value), int(count)) for value, count in bins.items() if int(count) > 0)
    total = sum(count for _, count in items)
    if total == 0:
        return math.nan
    threshold = percentile / 100.0 * total
    running = 0
    for value, count in items:
        running += count
        if running >= threshold:
            return float(value)
    return float(items[-1][0])


def _lookup_percentile(table: Mapping[str, Any], percentile: float) -> float:
    for key, value in table.items():
        try:
            if abs(float(key) - percentile) < 1e-6:
                return float(value)
        except ValueError:
            continue
    return math.nan


def _latency(stats: list[Mapping]) -> tuple[dict[str, float], str | None]:
    """Latency columns for direction ``stats`` of one or more entries (ns -> us)."""
    out = {column: math.nan for column in ("lat_mean_us", "lat_max_us", *PERCENTILES)}
    if any("lat_ns" not in s for s in stats):
        raise IolabError(
            "latency figures without lat_ns (fio older than 3.0?)",
            context="fio output", hint="iolab reads fio 3.x JSON",
        )
    lat = [s["lat_ns"] for s in stats]
    weights = [_samples(s) for s in stats]
    total = sum(weights)
    if total == 0:
        return out, None
    out["lat_mean_us"] = sum(l.get("mean", 0.0) * w for l, w in zip(lat, weights)) / total / 1000.0
    out["lat_max_us"] = max(float(l.get("max", 0)) for l, w in zip(lat, weights) if w) / 1000.0

    live = [(s, w) for s, w in zip(stats, weights) if w]
    if all("percentile" in s["lat_ns"] for s, _ in live):
        source = "lat"
    elif all("percentile" in s.get("clat_ns", {}) or "bins" in s.get("clat_ns", {})
             for s, _ in live):
        source = "clat"
    else:
        return out, None
    tables = [s[f"{source}_ns"] for s, _ in live]
    if len(tables) > 1 and all("bins" in t for t in tables):
        merged: dict[int, int] = {}
        for table in tables:
            for value, count in table["bins"].items():
                merged[int(value)] = merged.get(int(value), 0) + int(count)
        for column, p in PERCENTILES.items():
            out[column] = percentile_from_bins(merged, p) / 1000.0
    else:
        for column, p in PERCENTILES.items():
            values = [(_lookup_percentile(t.get("percentile", {}), p), w)
                      for t, (_, w) in zip(tables, live)]
            if len(values) == 1 and math.isnan(values[0][0]) and "bins" in tables[0]:
                out[column] = percentile_from_bins(tables[0]["bins"], p) / 1000.0
            elif all(not math.isnan(v) for v, _ in values):
                out[column] = sum(v * w for v, w in values) / sum(w for _, w in values) / 1000.0
    return out, source


def _samples(stats: Mapping) -> int:
    n = stats.get("lat_ns", {}).get("N")
    return int(n) if n is not None else int(stats.get("total_ios", 0))


# --------------------------------------------------------------------------- rows

def did_io(stats: Mapping | None) -> bool:
    return bool(stats) and (int(stats.get("total_ios", 0)) > 0 or int(stats.get("io_bytes", 0)) > 0)


def job_entries(doc: Mapping) -> tuple[list[Mapping], bool]:
    if "client_stats" in doc:
        entries = [e for e in doc["client_stats"] if e.get("jobname") != ALL_CLIENTS]
        skipped = len(doc["client_stats"]) - len(entries)
        if skipped:
            log.debug("skipped %d %r aggregate entr%s", skipped, ALL_CLIENTS,
                      "y" if skipped == 1 else "ies")
        return entries, True
    return list(doc.get("jobs", [])), False


def _rates(stats: list[Mapping], runtime_ms: float) -> dict:
    """``bw_mbps`` and ``iops`` of one direction of entries merged into one row.

    One entry: fio's own figures. Several (``numjobs`` without ``group_reporting``): their I/O over the
    longest runtime -- what fio's ``group_reporting`` entry gives for the same jobs (its runtime is the
    longest of its jobs', its bandwidth the summed bytes over it) and what tiotest prints as a test's Rate
    (total MiB over first start to last stop). The sum of the jobs' own rates is not: a job that finished
    early counts at its rate for the whole test, and eight threads served unevenly by a 150 IOPS disk
    summed to 165.7 IOPS. ``runtime_ms``: the longest of the entries' runtimes; without one (fio's before 3.x)
    the sum of the rates is left.
    """
    if len(stats) == 1 or runtime_ms <= 0 or any("total_ios" not in s for s in stats):
        return {"bw_mbps": sum(float(s.get("bw_bytes", 0)) for s in stats) / 1e6,
                "iops": sum(float(s.get("iops", 0.0)) for s in stats)}
    return {"bw_mbps": sum(int(s.get("io_bytes", 0)) for s in stats) * 1000.0 / runtime_ms / 1e6,
            "iops": sum(int(s["total_ios"]) for s in stats) * 1000.0 / runtime_ms}


def _empty_row(job: str | None, host: str | None, groupid: int | None) -> dict:
    row = {column: None for column in PARSE_COLUMNS}
    row.update({column: math.nan for column in _FLOAT_COLUMNS})
    row.update(job=job, host=host, groupid=groupid)
    return row


def _rows_for(entries: list[Mapping], *, host: str | None, global_options: Mapping,
              lines: list[FioErrorLine], sources: set) -> list[dict]:
    first = entries[0]
    options = {**global_options, **first.get("job options", {})}
    job, groupid = first.get("jobname"), _int(first.get("groupid"))
    sizes = block_sizes(options)
    iodepth = _int(options.get("iodepth")) or 1
    numjobs = max(len(entries), _int(options.get("numjobs")) or 1)
    # group_reporting: fio's merged entry gives the *mean* CPU of its jobs
    # (summed CPU time over summed runtime); scale it to the sum, so that the
    # same workload reads the same with and without group_reporting.
    cpu_scale = numjobs / len(entries)

    codes = []
    for entry in entries:
        code = _int(entry.get("error")) or 0
        if code and code not in codes:
            codes.append(code)
    error = "; ".join(
        error_text(code, next((l for l in lines if l.errno == code), None)) for code in codes
    ) or None

    rows = []
    for ddir in DIRECTIONS:
        stats = [e[ddir] for e in entries if ddir in e]
        if not any(did_io(s) for s in stats):
            continue
        row = _empty_row(job, host, groupid)
        runtime_ms = max(float(s.get("runtime", 0) or 0) for s in stats)
        latency, source = _latency(stats)
        if source:
            sources.add(source)
        row.update(latency)
        row.update(
            direction=ddir, bs=sizes[ddir], iodepth=iodepth, numjobs=numjobs,
            **_rates(stats, runtime_ms),
            cpu_usr_pct=cpu_scale * sum(float(e.get("usr_cpu", 0.0)) for e in entries),
            cpu_sys_pct=cpu_scale * sum(float(e.get("sys_cpu", 0.0)) for e in entries),
            io_bytes=sum(int(s.get("io_bytes", 0)) for s in stats),
            runtime_s=runtime_ms / 1000.0,
            error=error,
        )
        rows.append(row)
    if not rows:
        # No I/O in any direction: keep the job visible, with its error if any.
        row = _empty_row(job, host, groupid)
        row.update(iodepth=iodepth, numjobs=numjobs, error=error)
        if error:
            log.info("fio job %r failed before any I/O: %s", job, error)
        else:
            log.warning("fio job %r did no I/O and reported no error", job)
        rows.append(row)
    elif error:
        log.info("fio job %r reported an error after %d byte(s) of I/O: %s", job,
                 sum(r["io_bytes"] for r in rows), error)
    return rows


def _frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=PARSE_COLUMNS)
    for column in _INT_COLUMNS:
        frame[column] = pd.array(
            [None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
             for v in frame[column]], dtype="Int64")
    for column in _FLOAT_COLUMNS:
        frame[column] = frame[column].astype("float64")
    for column in ("job", "host", "direction", "error"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def parse_output(text: str) -> pd.DataFrame:
    """Parse fio's stdout (``--output-format=json`` or ``json+``) into a DataFrame.

    One row per job (by name; per client host in client/server mode) and
    direction that did I/O, columns :data:`iolab.core.columns.PARSE_COLUMNS`.
    Passing stdout and stderr together is fine (and gives error lines that fio
    writes to stderr a chance to be matched). Raises :class:`IolabError` with
    context ``"fio output"`` when there is no complete JSON document.

    ``attrs`` of the result: ``fio_version``, ``timestamp_ms``, ``documents``
    (how many complete documents the text held), ``percentile_source`` and
    ``truncated_tail`` (an incomplete document followed the one used).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    scan = scan_documents(text)
    if not scan.docs:
        raise _no_document(text, scan)
    if scan.truncated_at is not None:
        log.warning("fio output ends with an incomplete JSON document; using the last complete "
                    "one (document %d, possibly an interim --status-interval report)",
                    len(scan.docs))
    doc = scan.docs[-1]
    if len(scan.docs) > 1:
        log.debug("fio output holds %d JSON documents; using the last", len(scan.docs))

    lines = error_lines(outside_documents(text, scan.spans))
    entries, client_mode = job_entries(doc)
    global_options = doc.get("global options", {}) or {}
    rows: list[dict] = []
    sources: set = set()
    for (host, _, _), group in _by_job(entries, client_mode).items():
        rows.extend(_rows_for(group, host=host, global_options=global_options,
                              lines=lines, sources=sources))
    rows += _unmatched_error_rows(entries, lines)
    if not rows:
        log.warning("fio output holds no job results")

    frame = _frame(rows)
    frame.attrs.update(
        fio_version=fio_version(doc),
        timestamp_ms=doc.get("timestamp_ms"),
        documents=len(scan.docs),
        percentile_source="+".join(sorted(sources)) or None,
        truncated_tail=scan.truncated_at is not None,
    )
    return frame


def _no_document(text: str, scan) -> IolabError:
    """The error for output without a complete fio document, quoting its first meaningful line."""
    before = text[:scan.truncated_at] if scan.truncated_at is not None else text
    first = first_meaningful_line(before)
    if scan.truncated_at is not None:
        message = f"truncated JSON ({scan.truncated_reason})"
    elif text.strip():
        message = "no JSON document"
    else:
        message = "empty output"
    if first:
        message = f"{message}; first line: {first!r}"
    return IolabError(message, context="fio output", hint="fio must run with --output-format=json or json+ and finish")


def _by_job(entries: list[Mapping], client_mode: bool) -> dict[tuple, list[Mapping]]:
    """Entries grouped by (client host, group id, job name): the rows' keys."""
    # clients are servers; two on one address (different ports) are two hosts: "addr:port"
    ports: dict = {}
    for entry in entries if client_mode else ():
        ports.setdefault(entry.get("hostname"), set()).add(entry.get("port"))

    def client(entry: Mapping) -> str | None:
        if not client_mode:
            return None
        name = entry.get("hostname")
        return f"{name}:{entry.get('port')}" if len(ports.get(name, ())) > 1 else name

    groups: dict[tuple, list[Mapping]] = {}
    for entry in entries:
        key = (client(entry), _int(entry.get("groupid")), entry.get("jobname"))
        groups.setdefault(key, []).append(entry)
    return groups


def _unmatched_error_rows(entries: list[Mapping], lines: list[FioErrorLine]) -> list[dict]:
    """Rows for fio error lines that match no job's error: when no job ran at all, each is a row."""
    job_codes = {_int(e.get("error")) for e in entries}
    unmatched = [l for l in lines if l.errno not in job_codes]
    rows = []
    if unmatched and not entries:
        # fio gave up before any job ran (e.g. laying out a file failed).
        for line in unmatched:
            row = _empty_row(None, None, None)
            row["error"] = error_text(line.errno, line)
            rows.append(row)
        log.info("fio ran no job: %s", "; ".join(l.line for l in unmatched))
    elif unmatched:
        log.warning("fio error line(s) not matching any job's error code: %s",
                    "; ".join(l.line for l in unmatched))
    return rows


def parse_file(path: str | os.PathLike) -> pd.DataFrame:
    """:func:`parse_output` of a saved fio output file; errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise IolabError(f"cannot read fio output: {exc.strerror}", context=str(path)) from exc
    try:
        return parse_output(text)
    except IolabError as exc:
        raise IolabError(exc.message, context=f"{path} ({exc.context})" if exc.context else str(path),
                         hint=exc.hint) from exc
