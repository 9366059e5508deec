"""What one server's runs were and what its numbers say, in English and Japanese: what was measured and how
(:func:`measured`), and the findings the measure notebook shows under each recipe it ran (no other system to
compare with, so no winners: the spread of its tests, reads against writes, what more I/Os in flight bought, the
latency of one I/O at a time), then the caveats, the emulated device's ceilings and the rows left out.

Means over repetitions of the valid rows (:func:`iolab.analysis.stats.valid_rows`); a mixed test is one figure,
its ``mix`` row (its fio read and write parts are neither tests of their own nor a read/write pair).
Every sentence is in the locale's ``oneserver`` section.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from iolab.analysis import stats
from iolab.core import units
from iolab.report import ceilings, commentary, i18n, tables

_t = i18n.scoped("oneserver")


def means(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (test, direction): mean ``bw``, ``iops``, ``lat`` and ``p99`` (µs), its ``bs`` and I/Os in flight
    (``oio``: iodepth x numjobs); a mixed test's read and write parts left out (its ``mix`` row stays)."""
    data = data[stats.valid_rows(data)] if not data.empty else data
    if data.empty:
        return pd.DataFrame(columns=["test", "direction", "bw", "iops", "lat", "p99", "bs", "oio"])
    in_flight = pd.to_numeric(data["iodepth"], errors="coerce") * pd.to_numeric(data["numjobs"], errors="coerce")
    data = data.assign(oio=in_flight)
    found = data.groupby(["test", "direction"], sort=False, dropna=False).agg(
        bw=("bw_mbps", "mean"), iops=("iops", "mean"), lat=("lat_mean_us", "mean"), p99=("lat_p99_us", "mean"),
        bs=("bs", "first"), oio=("oio", "first")).reset_index()
    mixed = set(found.loc[found["direction"] == "mix", "test"])
    return found[~(found["test"].isin(mixed) & found["direction"].isin(["read", "write"]))]


def findings(data: pd.DataFrame, *, lang: str = "en") -> list[str]:
    """A few sentences from one server's tidy results of one recipe ([] when nothing valid was measured)."""
    found = means(data)
    if found.empty:
        return []
    return (_spread(found, lang) + _reads_and_writes(found, lang) + _in_flight(found, lang)
            + _one_at_a_time(found, lang))


def _name(row, lang: str) -> str:
    return i18n.test_label(row["test"], row["direction"], lang)


def _spread(found: pd.DataFrame, lang: str) -> list[str]:
    ranked = found.dropna(subset=["bw"]).sort_values("bw", ascending=False)
    if len(ranked) < 2:
        return []
    top, low = ranked.iloc[0], ranked.iloc[-1]
    return [_t("spread", lang, top=_name(top, lang), top_bw=i18n.number(top["bw"]), low=_name(low, lang),
               low_bw=i18n.number(low["bw"]), factor=i18n.times(top["bw"] / low["bw"], lang, fraction=True), unit=i18n.unit("MB/s", lang))]


def _reads_and_writes(found: pd.DataFrame, lang: str) -> list[str]:
    both = found.pivot_table(index="test", columns="direction", values="bw", sort=False)
    if not {"read", "write"} <= set(both.columns):
        return []
    ratio = (both["read"] / both["write"]).dropna()
    ratio = ratio[(ratio > 0) & ratio.map(math.isfinite)]
    if not len(ratio):
        return []
    if (ratio >= 1).all():
        return [_t("reads_faster", lang, factor=i18n.factor_range(ratio.min(), ratio.max()), n=len(ratio))]
    if (ratio < 1).all():
        inverse = 1 / ratio
        return [_t("writes_faster", lang, factor=i18n.factor_range(inverse.min(), inverse.max()), n=len(ratio))]
    label = lambda tests: i18n.join([i18n.label(t, lang, section="tests") for t in tests], lang)  # noqa: E731
    return [_t("reads_and_writes", lang, reads=label(ratio[ratio >= 1].index), writes=label(ratio[ratio < 1].index))]


def _in_flight(found: pd.DataFrame, lang: str) -> list[str]:
    """Per block size: what going from the fewest to the most I/Os in flight did to IOPS, per direction."""
    out = []
    for bs, group in found.dropna(subset=["oio", "iops"]).groupby("bs", sort=False):
        shallow, deep = group["oio"].min(), group["oio"].max()
        if shallow == deep:
            continue
        parts = []
        for direction, sub in group.groupby("direction", sort=False):
            a, b = sub[sub["oio"] == shallow], sub[sub["oio"] == deep]
            if len(a) and len(b) and a["iops"].iloc[0]:
                what = _t(f"kinds.{direction}", lang) if i18n.has(f"oneserver.kinds.{direction}", lang) else direction
                parts.append(_t("in_flight_part", lang, factor=i18n.factor(b["iops"].iloc[0] / a["iops"].iloc[0]),
                                what=what, shallow=i18n.number(a["iops"].iloc[0]), deep=i18n.number(b["iops"].iloc[0])))
        if parts:
            out.append(_t("in_flight", lang, bs=units.human_size(bs), shallow=int(shallow), deep=int(deep),
                          parts=i18n.join(parts, lang)))
    return out


def _one_at_a_time(found: pd.DataFrame, lang: str) -> list[str]:
    single = found[(found["oio"] == found["oio"].min()) & found["lat"].notna()]
    single = single[single["bs"] == single["bs"].min()]
    out = []
    for _, row in single.iterrows():
        p99 = _t("p99", lang, p99=i18n.number(row["p99"] / 1000)) if pd.notna(row["p99"]) else ""  # none for a mix
        out.append(_t("one_at_a_time", lang, name=_name(row, lang), lat=i18n.number(row["lat"] / 1000), p99=p99))
    return out


def markdown(results: pd.DataFrame, manifests: pd.DataFrame, *, lang: str = "en") -> str:
    """The findings of one recipe's runs on one server as Markdown: the sentences, the caveats, the emulated
    device's ceilings (:func:`iolab.report.ceilings.markdown`) and how many rows were left out."""
    sentences = findings(results, lang=lang)
    text = "\n".join(f"- {s}" for s in sentences) or _t("nothing", lang)
    found = commentary.caveats(tables.summarize(results, value="bw_mbps"))
    if not found.empty:
        text += (f"\n\n**{i18n.text('headings.caveats', lang)}**\n\n"
                 + "\n".join(f"- {s}" for s in commentary.caveat_sentences(found, lang=lang)))
    against = ceilings.markdown(results, manifests, lang=lang)
    if against:
        text += "\n\n" + against
    excluded = int((~stats.valid_rows(results)).sum())
    if excluded:
        text += "\n\n" + _t("excluded", lang, n=excluded)
    return text


def measured(runs: list[tuple[dict, str | Path]], *, lang: str = "en") -> str:
    """One Markdown item per run (its manifest and run directory): the recipe, the tests run on which targets,
    passes, runtime and file size, the cache isolation (and what it fell back from), where the run is, its status."""
    items = []
    for manifest, path in runs:
        iso = manifest.get("isolation") or {}
        mode = iso.get("mode", "?")
        fallback = (_t("fallback", lang, requested=iso["requested"], reason=iso["fallback"])
                    if iso.get("fallback") else "")
        opts = manifest.get("options") or {}
        ran = list(dict.fromkeys(t.get("test") or t.get("name") for t in manifest.get("tests", [])))
        reason = _t("reason", lang, reason=manifest["reason"]) if manifest.get("reason") else ""
        description = i18n.recipe_description(manifest["recipe"], manifest.get("recipe_description"), lang) or ""
        items.append(_t("measured", lang, recipe=manifest["recipe"], description=description,
                        n=len(ran), tests=i18n.comma_list(ran, lang), where=i18n.join(_targets(manifest, lang), lang),
                        repeat=opts.get("repeat") or "?", runtime=opts.get("runtime") or "?",
                        size=units.human_size(opts["size"]) if opts.get("size") else "?", mode=mode,
                        mode_label=i18n.label(mode, lang, section="isolation"), fallback=fallback, path=str(path),
                        status=i18n.label(manifest["status"], lang, section="status"), reason=reason))
    return "\n".join(items)


def _targets(manifest: dict, lang: str) -> list[str]:
    """Each target as ``spec`` (file system, model, rotational or not)."""
    out = []
    for target in manifest.get("targets", []):
        device = target.get("device") or {}
        rotational = device.get("rotational")
        kind = "" if rotational is None else _t("rotational" if rotational else "non_rotational", lang)
        details = [x for x in (target.get("filesystem"), i18n.device_description(device.get("model"), lang), kind) if x]
        out.append(_t("target", lang, spec=target.get("spec"), details=i18n.comma_list(details, lang)))
    return out
