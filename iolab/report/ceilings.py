"""An emulated device's declared limits as what they are: ceilings, and each test measured against them.

An emulated device (``--target emulated:hdd``) is a loop device throttled by
the block cgroup: its profile's rates are the most the throttle lets through,
not what a test will reach. A test with one I/O in flight is held by each I/O's
latency (the loop device's, plus dm-delay's per-read delay on the
latency-true ``hdd``), a CPU-bound one by the CPU, and the host's loop device
may give less than the ceiling at any depth. This module compares every test
of an emulated target with the ceiling that binds it (bandwidth or IOPS, for
its block size and direction) and says, in ``en`` or ``ja``, which tests
reached it, which fell short and why, and which went above it (a throttle that
did not hold).

Computation (:func:`against_ceilings`, a tidy frame) is separate from the
sentences (:func:`sentences`, :func:`markdown`). The limits come from the
run's manifest (``targets[].emulated.declared``, recorded by every run since
the profiles carried them), else from the shipped profile of that name.

A throttle is only a ceiling: whether this host can reach it at all is measured
when the device is made (:mod:`iolab.devices.ceilingprobe`, recorded as
``targets[].emulated.ceiling_probe``, and ``reachable`` beside ``declared``).
Where the probe fell short of a limit the text says "ceiling not reached on
this host (loop device / CPU)" with the figure the host reached, and a test
held there is blamed on the host (reason ``host``), never said to follow its
declared limits; a probe skipped on request is said to be skipped.
"""
from __future__ import annotations

import logging
import math

import pandas as pd

from iolab.core.errors import IolabError
from iolab.report import i18n

log = logging.getLogger(__name__)

#: Within this fraction of the ceiling a test "reached" it (the design's ground truth: within 10%).
NEAR = 0.10

COLUMNS = ("system", "test", "direction", "bs", "outstanding", "iops", "bw_mbps", "lat_mean_us", "ceiling_iops",
           "ceiling_mbps", "binding", "ratio", "verdict", "reason", "delay_ms", "profile", "limits", "probe",
           "unreached")


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def declared_limits(emulated: dict | None) -> dict | None:
    """``{read_bps, write_bps, read_iops, write_iops}`` of an emulated target (None: not emulated or unknown)."""
    if not isinstance(emulated, dict) or not emulated.get("profile"):
        return None
    declared = emulated.get("declared")
    if isinstance(declared, dict) and any(_number(v) for v in declared.values()):
        return {k: _number(declared.get(k)) for k in ("read_bps", "write_bps", "read_iops", "write_iops")}
    try:  # older manifests name the profile only: the shipped profile of that name, if there is one
        from iolab.devices.emulated import load_profiles
        profile = load_profiles().get(str(emulated["profile"]))
    except (IolabError, OSError) as err:
        log.info("no emulated profiles to read (%s)", err)
        return None
    if profile is None or not profile.throttled:
        return None
    return {k: _number(v) for k, v in profile.limits.items()}


def _delay_ms(emulated: dict, direction: str) -> float | None:
    emulation = emulated.get("emulation") if isinstance(emulated, dict) else None
    if not isinstance(emulation, dict) or emulation.get("kind") != "dm-delay":
        return None
    return _number(emulation.get(f"{direction}_delay_ms")) or None


def _targets(manifests: pd.DataFrame) -> dict:
    """``(run_id, target name) -> emulated dict`` for every emulated target of the runs."""
    found = {}
    for record in manifests.to_dict("records"):
        for target in record.get("targets") or []:
            if isinstance(target, dict) and target.get("emulated"):
                found[(record.get("run_id"), target.get("name"))] = target["emulated"]
    return found


def _verdict(row: dict, ratio: float, flags: set[str]) -> tuple[str, str]:
    if ratio > 1 + NEAR:
        if "cache_suspect" in flags or "cache_inflated" in flags:
            return "above", "cache"
        if "v1_writeback" in flags:
            return "above", "writeback"
        return "above", "unknown"
    if ratio >= 1 - NEAR:
        return "reached", ""
    if "cpu_bound" in flags:
        return "short", "cpu"
    if row["outstanding"] <= 1:
        return "short", "latency"
    return "short", "host" if row["unreached"] is not None else "loop"


def probe_of(emulated: dict | None) -> dict | None:
    """The ceiling probe a run recorded for its emulated target (None: a run from before iolab probed)."""
    probe = emulated.get("ceiling_probe") if isinstance(emulated, dict) else None
    return probe if isinstance(probe, dict) else None


def _unreached(probe: dict | None, field: str) -> dict | None:
    """The probe's job for the declared ``field`` when the host did not reach it, else None."""
    for job in (probe or {}).get("jobs") or []:
        if isinstance(job, dict) and job.get("limit") == field and job.get("reached") is False:
            return job
    return None


def request_bound(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of a classic tool's tests (Bonnie++, tiobench) whose I/Os reach the device one request each, the
    only ones its IOPS ceiling can be held against: random reads (Bonnie++'s seeks, tiobench's RandRead).
    Sequential I/O merges into larger requests before the throttle counts them, and buffered writes reach it
    through the page cache and writeback, so their operations per second are not the device's."""
    if results.empty or "test" not in results.columns or "direction" not in results.columns:
        return results.iloc[0:0]
    random = results["test"].astype(str).str.contains("rand|seek", case=False)
    return results[random & (results["direction"] == "read")]


def against_ceilings(results: pd.DataFrame, manifests: pd.DataFrame, *, statistic: str = "mean") -> pd.DataFrame:
    """One row per system x test x direction on an emulated target: the measurement, the ceiling that binds it
    (``binding``: ``bw`` or ``iops``), ``ratio`` (measured / ceiling), ``verdict`` (reached, short, above) and
    ``reason`` (latency, loop, cpu; cache, writeback, unknown for a figure above the ceiling)."""
    columns = list(COLUMNS)
    if results.empty or "target" not in results.columns:
        return pd.DataFrame(columns=columns)
    emulated = _targets(manifests)
    if not emulated:
        return pd.DataFrame(columns=columns)
    rows = results[results["valid"].fillna(True).astype(bool)] if "valid" in results.columns else results
    out = []
    keys = ["system", "run_id", "target", "test", "direction"]
    for (system, run_id, target, test, direction), group in rows.groupby(keys, sort=False, dropna=False):
        info = emulated.get((run_id, target))
        limits = declared_limits(info)
        bs = _number(group["bs"].iloc[0]) if "bs" in group else None
        if not limits or not bs or direction not in ("read", "write"):
            continue
        if "cliff_found" in group and group["cliff_found"].astype(str).str.lower().isin(["true", "1", "1.0"]).any():
            continue  # an average over a burst and a write cliff: the sustained-write section holds it against both
        bps, iops_limit = limits.get(f"{direction}_bps"), limits.get(f"{direction}_iops")
        rates = {"bw": bps / bs if bps else None, "iops": iops_limit}
        rates = {k: v for k, v in rates.items() if v}
        if not rates:
            continue
        binding = min(rates, key=rates.get)
        ceiling = rates[binding]
        agg = getattr(group[["iops", "bw_mbps", "lat_mean_us"]], statistic if statistic in ("mean", "median") else "mean")()
        measured = _number(agg["iops"])
        if measured is None:
            continue
        outstanding = int((_number(group["iodepth"].iloc[0]) or 1) * (_number(group["numjobs"].iloc[0]) or 1)) \
            if "iodepth" in group and "numjobs" in group else 1
        flags = set()
        for value in group.get("flags", pd.Series(dtype=object)).dropna():
            flags.update(f for f in str(value).split(";") if f)
        row = {"system": system, "test": test, "direction": direction, "bs": int(bs), "outstanding": outstanding,
               "iops": measured, "bw_mbps": _number(agg["bw_mbps"]), "lat_mean_us": _number(agg["lat_mean_us"]),
               "ceiling_iops": ceiling, "ceiling_mbps": ceiling * bs / 1e6, "binding": binding,
               "ratio": measured / ceiling, "delay_ms": _delay_ms(info, direction), "profile": info.get("profile"),
               "limits": limits, "probe": probe_of(info),
               "unreached": _unreached(probe_of(info), f"{direction}_{'bps' if binding == 'bw' else 'iops'}")}
        row["verdict"], row["reason"] = _verdict(row, row["ratio"], flags)
        out.append(row)
    return pd.DataFrame(out, columns=columns)


_t = i18n.scoped("ceilings")


def _test_label(test: str, direction: str, lang: str) -> str:
    """A test as the sentences name it: a classic tool's test that says its direction (``ceilings.tests``) as it is,
    any other with its direction (:func:`iolab.report.i18n.test_label`)."""
    own = f"ceilings.tests.{test}"
    return i18n.text(own, lang) if i18n.has(own, lang) else i18n.test_label(test, direction, lang)


def _limits_text(limits: dict, lang: str) -> str:
    """"at most 100 MB/s and 150 IOPS in each direction" (per direction where they differ)."""
    def one(direction: str) -> str:
        bps, iops = limits.get(f"{direction}_bps"), limits.get(f"{direction}_iops")
        items = [f"{i18n.number(bps / 1e6)} {i18n.unit('MB/s', lang)}"] if bps else []
        return i18n.join(items + ([f"{i18n.number(iops)} IOPS"] if iops else []), lang)
    read, write = one("read"), one("write")
    if read == write:
        return _t("limits_both", lang, limits=read)
    return i18n.join([_t("limits_one", lang, limits=text, direction=i18n.label(d, lang, section="directions"))
                      for d, text in (("read", read), ("write", write)) if text], lang)


def _measured(row, lang: str) -> str:
    """"100 IOPS, 67% of 150 IOPS" below a ceiling; "2,522 MB/s, 25x 100 MB/s" above it."""
    above = row["verdict"] == "above"
    share = i18n.factor(row["ratio"]) if above else i18n.number(100 * row["ratio"], digits=0)
    if row["binding"] == "bw":
        return _t("above_bw" if above else "measured_bw", lang, value=i18n.number(row["bw_mbps"]),
                  unit=i18n.unit("MB/s", lang), ceiling=i18n.number(row["ceiling_mbps"]), share=share)
    return _t("above_iops" if above else "measured_iops", lang, value=i18n.number(row["iops"]),
              ceiling=i18n.number(row["ceiling_iops"]), share=share)


def _span(values, lang: str) -> str:
    low, high = i18n.number(min(values)), i18n.number(max(values))
    return low if low == high else f"{low}–{high}"


def _reason(rows: pd.DataFrame, lang: str, said: set | None = None) -> str:
    """Why ``rows`` (one verdict and reason) missed their ceiling. An explanation already given in ``said`` (one I/O
    in flight, the loop device) is not given again: the rows' own figures then, with a word that it was said."""
    first = rows.iloc[0]
    fields = {"lat": _span([(v or 0) / 1000 for v in rows["lat_mean_us"]], lang),
              "oio": "–".join(dict.fromkeys(str(int(v)) for v in sorted(rows["outstanding"])))}
    if first["reason"] == "latency":
        key = "why_latency_delay" if first["delay_ms"] else "why_latency"
        return _t(_once(key, said), lang, delay=f"{first['delay_ms'] or 0:g}", **fields)
    if first["reason"] == "loop":
        return _t(_once("why_loop", said), lang, **fields)
    if first["reason"] == "host":
        return _t("why_host", lang, held=_held([j.get("held_by") for j in rows["unreached"] if j], lang))
    return _t(f"why_{first['reason']}", lang)


def _once(key: str, said: set | None) -> str:
    """``key`` the first time, ``key_again`` (the figures without the explanation) after: ``said`` keeps track."""
    if said is None:
        return key
    if key in said:
        return f"{key}_again"
    said.add(key)
    return key


def _same_ceiling(reached: pd.DataFrame, lang: str) -> list[str]:
    """Tests of one block size and direction that reached the same ceiling at different queue depths (an emulated
    hdd's 150 IOPS at QD1 and at QD32): one sentence saying why the depth changed nothing."""
    out = []
    # IOPS ceilings only: random I/O is where a disk gains from depth; streaming at one bandwidth at QD1 and QD8 is
    # what a disk does too
    reached = reached[reached["binding"] == "iops"]
    for (_bs, _ceiling), group in reached.groupby(["bs", "ceiling_iops"], sort=False):
        if group["outstanding"].nunique() < 2:
            continue
        ceiling = f"{i18n.number(group['ceiling_iops'].iloc[0])} IOPS"
        tests = [_test_label(t, d, lang) for t, d in zip(group["test"], group["direction"])]
        out.append(_t("same_ceiling", lang, tests=i18n.join(tests, lang), ceiling=ceiling,
                      depths=i18n.join([str(int(v)) for v in sorted(set(group["outstanding"]))], lang)))
    return out


def sentences(found: pd.DataFrame, *, lang: str = "en") -> list[list[str]]:
    """Per emulated profile: its ceilings (the first item), then one text per system: the tests that reached them
    and, grouped by reason, those that fell short or went above, each measured against its ceiling.

    What the systems share is said once: what an emulated device's limits are (the first profile's intro; the
    next profiles name their limits), one sentence for every system whose probe reached all its limits, and
    each explanation of a shortfall (one I/O in flight, the loop device), given where it first applies; a later
    system gets its own figures only."""
    i18n.check_lang(lang)
    gap = " " if lang == "en" else ""
    out, said = [], set()
    probed = _probe_reached(found)
    for i, (profile, of_profile) in enumerate(found.groupby("profile", sort=False)):
        systems = list(dict.fromkeys(of_profile["system"]))
        intro = _t("intro" if i == 0 else "intro_more", lang, systems=i18n.join(systems, lang), n=len(systems),
                   profile=profile, limits=_limits_text(of_profile["limits"].iloc[0], lang))
        if i == 0 and probed:
            intro += gap + _t("probe_reached", lang, systems=i18n.join(probed, lang), n=len(probed))
        parts = [intro]
        for system in systems:
            parts.append(gap.join(_system_sentences(system, of_profile[of_profile["system"] == system], lang, said)))
        out.append(parts)
    return out


def _system_sentences(system: str, rows: pd.DataFrame, lang: str, said: set) -> list[str]:
    """One system's sentences: what the probe found (unless it reached every limit: said once for all), the tests
    that reached the ceiling, then those that did not, grouped by verdict and reason."""
    probe = rows["probe"].iloc[0]
    found = _probe_sentences(system, probe, lang) if not _reached_every_limit(probe) else []
    label = lambda r: _test_label(r["test"], r["direction"], lang)  # noqa: E731
    reached = [label(r) for _, r in rows[rows["verdict"] == "reached"].iterrows()]
    if reached:
        found.append(_t("reached", lang, system=system, tests=i18n.join_capped(reached, lang), n=len(reached)))
    found.extend(_same_ceiling(rows[rows["verdict"] == "reached"], lang))
    rest = rows[rows["verdict"] != "reached"]
    for (verdict, _reason_key), group in rest.groupby(["verdict", "reason"], sort=False):
        items = [f"{label(r)}{_t('paren', lang, text=_measured(r, lang))}" for _, r in group.iterrows()]
        found.append(_t(verdict, lang, system=system, tests=i18n.join_capped(items, lang), n=len(items),
                        reason=_reason(group, lang, said)))
    return found


def _reached_every_limit(probe) -> bool:
    return isinstance(probe, dict) and bool(probe.get("ran")) and not any(
        isinstance(j, dict) and j.get("reached") is False for j in probe.get("jobs") or [])


def _probe_reached(found: pd.DataFrame) -> list[str]:
    """The systems whose probe, when their device was made, reached every declared limit on this host."""
    systems = found.drop_duplicates("system")
    return [s for s, probe in zip(systems["system"], systems["probe"]) if _reached_every_limit(probe)]


def _held(causes, lang: str) -> str:
    """"loop device", "CPU" or "loop device / CPU": what held the probe's jobs below their ceilings."""
    keys = [k for k in ("loop device", "cpu") if k in set(causes)] or ["loop device"]
    return " / ".join(_t("held_cpu" if k == "cpu" else "held_loop", lang) for k in keys)


def _probe_figure(job: dict, lang: str) -> str:
    """"sequential read (1 MiB, QD8) 1,234 MB/s of the declared 50,000 MB/s"."""
    what = _t(f"probe_{job['limit']}", lang)
    if str(job["limit"]).endswith("_bps"):
        return _t("probe_item_bw", lang, what=what, value=i18n.number((job.get("measured") or 0) / 1e6),
                  declared=i18n.number((job.get("declared") or 0) / 1e6), unit=i18n.unit("MB/s", lang))
    return _t("probe_item_iops", lang, what=what, value=i18n.number(job.get("measured") or 0),
              declared=i18n.number(job.get("declared") or 0))


def _probe_sentences(system: str, probe: dict | None, lang: str) -> list[str]:
    """What the probe made with the device found: limits out of this host's reach, all reached, or skipped."""
    if not isinstance(probe, dict):
        return []  # a run from before emulated devices were probed: nothing measured, nothing said
    if not probe.get("ran"):
        return [_t("probe_skipped", lang, system=system)] if probe.get("reason") != "no declared limits" else []
    short = [j for j in probe.get("jobs") or [] if isinstance(j, dict) and j.get("reached") is False]
    if not short:
        return [_t("probe_reached", lang, systems=system, n=1)]
    return [_t("probe_short", lang, system=system, held=_held([j.get("held_by") for j in short], lang),
               seconds=f"{float(probe.get('seconds') or 0):g}", figures=i18n.join([_probe_figure(j, lang) for j in short],
                                                                             lang))]


def unknown_limits(results: pd.DataFrame, manifests: pd.DataFrame) -> dict[str, str]:
    """``system -> profile`` for the emulated targets among ``results`` whose limits are not known (a manifest
    without ``declared`` naming a profile iolab no longer ships): nothing can be held against them."""
    if results.empty or "target" not in results.columns:
        return {}
    out = {}
    for (run_id, target), emulated in _targets(manifests).items():
        rows = results[(results["run_id"] == run_id) & (results["target"] == target)]
        if not rows.empty and declared_limits(emulated) is None and emulated.get("profile") != "unthrottled":
            out.setdefault(str(rows["system"].iloc[0]), str(emulated.get("profile")))
    return out


def markdown(results: pd.DataFrame, manifests: pd.DataFrame, *, lang: str = "en", statistic: str = "mean") -> str:
    """"**Emulated devices.** ..." paragraphs for the emulated targets among ``results``, then the real drives'
    figures above the link the run recorded for them (:func:`iolab.report.reasons.above_measured_link`); "" when
    neither applies."""
    from iolab.report import reasons
    links = reasons.markdown(reasons.above_measured_link(results, manifests, statistic=statistic), lang=lang)
    return "\n\n".join(p for p in (_emulated_markdown(results, manifests, lang=lang, statistic=statistic), links) if p)


def _emulated_markdown(results: pd.DataFrame, manifests: pd.DataFrame, *, lang: str, statistic: str) -> str:
    found = against_ceilings(results, manifests, statistic=statistic)
    unknown = [_t("unknown", lang, system=system, profile=profile)
               for system, profile in unknown_limits(results, manifests).items()]
    lead = _t("lead", lang, heading=_t("heading", lang))  # "**Emulated devices.** " / "**エミュレートしたデバイス**："
    if found.empty:
        return lead + (" " if lang == "en" else "").join(unknown) if unknown else ""
    blocks = []
    for i, (intro, *systems) in enumerate(sentences(found, lang=lang)):
        heading = lead if i == 0 else ""  # one heading: the next profiles follow on
        blocks.append(f"{heading}{intro}\n\n" + "\n".join(f"- {s}" for s in systems))
    if unknown:
        blocks.append((" " if lang == "en" else "").join(unknown))
    return "\n\n".join(blocks)
