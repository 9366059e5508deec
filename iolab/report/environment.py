"""The runs' environment: each manifest as the fields of a test-environment table
(:func:`manifest_fields`, with the drive's identity from :mod:`iolab.report.driveidentity`), that table with
one column per run (:func:`environment_table`) and the provenance table, one row per run
(:func:`provenance_table`); how each run was isolated and confined."""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from iolab.report import driveidentity, i18n
from iolab.report.tables import DASH, MAX_COLUMNS, Table


def field(mapping, *path, default=None):
    node = mapping
    for key in path:
        if isinstance(node, list):
            node = node[0] if node else None
        if not isinstance(node, dict):
            return default
        node = node.get(key)
    return default if node is None or (isinstance(node, float) and math.isnan(node)) else node


def yes_no(value, lang):
    if value is None:
        return None
    return i18n.text("labels.yes" if bool(value) else "labels.no", lang)


def size_text(value):
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        from iolab.core.units import human_size
        return human_size(value)
    return str(value)


def seconds_text(value, lang):
    if value is None:
        return None
    try:
        return i18n.text("labels.seconds", lang, value=i18n.number(float(value), digits=0 if float(value) >= 1 else 1))
    except (TypeError, ValueError):
        return str(value)


def manifest_fields(manifest: dict, *, lang: str = "en") -> dict:
    """A manifest as ``{label: text}`` rows of an environment table (missing fields as None)."""
    target = (manifest.get("targets") or [{}])[0] or {}
    device = target.get("device") or {}
    emulated = target.get("emulated") or {}
    isolation = manifest.get("isolation") or {}
    options = manifest.get("options") or {}
    system = manifest.get("system") or {}
    versions = manifest.get("versions") or {}
    mode = isolation.get("mode")
    fallback = isolation.get("fallback")
    status = manifest.get("status")
    fields = {
        "host": manifest.get("host"),
        "run_id": manifest.get("run_id"),
        "recipe": manifest.get("recipe"),
        "status": i18n.label(status, lang, section="status") if status else None,
        "started": when(manifest.get("started")),
        "kernel": system.get("kernel"),
        "os": system.get("os"),
        "cpu_model": system.get("cpu_model"),
        "cpu_count": system.get("cpu_count"),
        "ram": size_text(system.get("ram_bytes")),
        "fio": versions.get("fio"),
        "iolab": versions.get("iolab"),
        "target": target.get("path") or target.get("spec"),
        "target_kind": i18n.label(target["kind"], lang, section="target_kinds") if target.get("kind") else None,
        "filesystem": target.get("filesystem"),
        "mount_options": target.get("mount_options"),
        "device": i18n.device_description(device.get("model"), lang) or driveidentity.model_of(manifest),
        "rotational": yes_no(device.get("rotational"), lang) if device.get("rotational") is not None else None,
        "scheduler": device.get("scheduler"),
        "emulated": emulated.get("profile") if emulated else None,
        "isolation": mode,
        # O_DIRECT and "none" runs set no memory limit: a limit row would suggest one applied
        "mem_limit": (size_text(isolation.get("mem_limit") or options.get("mem_limit"))
                      if mode in (None, "cgroup", "hugepages") else None),
        "fallback": fallback if fallback else None,
        "confinement": _confinement(manifest.get("confinement"), lang),
        "size": size_text(options.get("size")),
        "runtime": seconds_text(options.get("runtime"), lang),
        "repeat": options.get("repeat"),
        "tool": manifest.get("provenance") if manifest.get("imported") else None,  # iolab import: who measured it
    }
    shown = {}
    for key, value in fields.items():
        shown[i18n.text(f"labels.{key}", lang)] = value
        if key == "scheduler":  # the drive itself, as the run recorded it (issue 25): after the block device's rows
            shown.update({i18n.text(f"drives.labels.{k}", lang): v
                          for k, v in driveidentity.identity_fields(manifest, lang=lang).items()})
    return shown


def _confinement(record, lang: str) -> str | None:
    """How the run's processes were confined (iolab.isolation.confine); None for runs from before."""
    if not isinstance(record, dict) or "confined" not in record:
        return None
    if record["confined"]:
        return i18n.text("text.confined", lang).format(tool=record.get("tool") or "bubblewrap")
    return i18n.text("text.unconfined", lang).format(reason=record.get("reason") or "?")


def environment_table(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en", names: Sequence[str] | None = None,
                      caption: str | None = None, drop_empty: bool = True, orient: str = "auto") -> Table:
    """Rows = provenance fields, columns = runs (named by ``names``, default the label).

    ``orient="systems"`` (automatic beyond :data:`MAX_COLUMNS` runs) puts one
    run per row instead.
    """
    i18n.check_lang(lang)
    records = manifests.to_dict("records") if isinstance(manifests, pd.DataFrame) else list(manifests)
    if not records:
        return Table(pd.DataFrame(), caption=_environment_caption(caption, lang),
                     notes=[i18n.text("text.no_runs", lang)])
    names = list(names) if names is not None else [r.get("label") or r.get("host") or "?" for r in records]
    # one column per run: a name used by runs of several recipes gets the recipe added
    names = unique_names([f"{n} · {r.get('recipe')}" if names.count(n) > 1 else n for n, r in zip(names, records)])
    columns = {name: manifest_fields(record, lang=lang) for name, record in zip(names, records)}
    frame = pd.DataFrame(columns)
    frame = frame.map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    if drop_empty:
        frame = frame.dropna(how="all")
    frame = frame.fillna(DASH)
    if orient == "systems" or (orient == "auto" and frame.shape[1] > MAX_COLUMNS):
        frame = frame.T
    frame.index.name = i18n.text("labels.system", lang) if frame.index.name is None else frame.index.name
    if frame.columns.name:
        frame.columns.name = None
    return Table(frame, caption=_environment_caption(caption, lang))


def _environment_caption(caption: str | None, lang: str) -> str:
    """None: "Test environment"; "" (under a heading that says so already): no caption."""
    return i18n.text("headings.environment", lang) if caption is None else caption


def provenance_table(manifests: pd.DataFrame | Sequence[dict], *, lang: str = "en",
                     names: Sequence[str] | None = None) -> Table:
    """One row per run: name, host, run ID, recipe, status, start, isolation, target, fio; under it, for each
    imported run, where it came from and which tool measured it (the manifest's ``provenance``)."""
    i18n.check_lang(lang)
    records = manifests.to_dict("records") if isinstance(manifests, pd.DataFrame) else list(manifests)
    names = list(names) if names is not None else unique_names([r.get("label") or r.get("host") or "?" for r in records])
    rows, notes = [], []
    for name, record in zip(names, records):
        if record.get("imported") and record.get("provenance"):  # measured by another tool: said under the table
            notes.append(f"{name}{i18n.colon(lang)}{record['provenance']}")
        target = (record.get("targets") or [{}])[0] or {}
        status = record.get("status")
        reason = record.get("reason")
        rows.append({
            i18n.text("labels.system", lang): name,
            i18n.text("labels.host", lang): record.get("host"),
            i18n.text("labels.run_id", lang): record.get("run_id"),
            i18n.text("labels.recipe", lang): record.get("recipe"),
            i18n.text("labels.status", lang): (i18n.label(status, lang, section="status") if status else None)
            if not reason or (isinstance(reason, float) and math.isnan(reason))
            else f"{i18n.label(status, lang, section='status')}{i18n.colon(lang)}{reason}",
            i18n.text("labels.started", lang): when(record.get("started")),
            i18n.text("labels.isolation", lang): field(record, "isolation", "mode"),
            i18n.text("labels.target", lang): target.get("path") or target.get("spec"),
            i18n.text("labels.fio", lang): field(record, "versions", "fio"),
        })
    frame = pd.DataFrame(rows)
    if frame.empty:
        return Table(frame, caption=i18n.text("tables.provenance", lang), notes=[i18n.text("text.no_runs", lang)])
    frame = frame.set_index(i18n.text("labels.system", lang))
    frame = frame.map(lambda v: DASH if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return Table(frame, caption=i18n.text("tables.provenance", lang), notes=notes)


def when(stamp) -> str | None:
    """A manifest's ISO time as a table prints it: ``2026-11-20T22:35:50+00:00`` -> ``2026-11-20 22:35 UTC`` (to the
    minute, in UTC; the full stamp stays in manifest.json); a value that is no ISO time unchanged."""
    if not isinstance(stamp, str) or not stamp:
        return stamp
    import datetime as dt
    try:
        parsed = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.timezone.utc)
        return parsed.strftime("%Y-%m-%d %H:%M UTC")
    return parsed.strftime("%Y-%m-%d %H:%M")


def unique_names(names: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out
