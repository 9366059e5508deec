"""Prose from numbers: who wins each test and by how much, what is a tie, what the cache did.

The rules work on a *summary* frame, one row per (system, test, direction)
for one metric, as made by :func:`iolab.report.tables.summarize` (measured runs) or
:func:`iolab.analysis.reference.as_summary` (published figures). Columns used:
``system, test, direction, metric, unit, value, n, ci_low, ci_high, flags``
and, where known, ``cov``, ``unmeasurable`` and ``cache_isolated``.

Computation (:func:`winners`, :func:`versus`, :func:`group_ranges`,
:func:`cache_effects`, :func:`caveats`) returns DataFrames with the numbers;
:func:`describe` turns them into Markdown in ``en`` or ``ja``. The rules:

* **Winner**: best ``value`` among cache-isolated, measured systems; the lead is
  stated as a factor over the runner-up (as a percentage when under 1.2x).
* **Close**: two results are a tie when both have >= 2 repetitions and their 95%
  confidence intervals overlap, or when they differ by at most ``tolerance``
  (default 3%).
* **Against a baseline**: per group of tests, the range of each system's factor
  over the baseline (``2.1-2.9x``); factors all within ``tolerance`` (a tie) are "on par".
* **Cache**: a system marked not cache-isolated is compared with the isolated
  system on the same device; a factor >= ``inflated`` (10x) cannot come from the
  device and is reported as inflated by the page cache, >= ``helped`` (2x) as
  probably helped by it.
* **Caveats**: engine flags (``cache_suspect``, ``cpu_bound``, ...) and a CoV
  above ``max_cov`` (:data:`iolab.analysis.stats.HIGH_VARIANCE_COV`, the threshold of the stored
  flag) across repetitions; a CoV above ``severe_cov`` (20%) is worded as such.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.core.errors import IolabError
from iolab.report import i18n, reasons, verdicts
from iolab.report.cache_commentary import cache_effects, cache_pairs, cache_sentences
from iolab.report.commentary_base import (KNOWN_FLAGS, Rules, checked_summary, groups_by_test, higher_is_better,
                                          is_time, prose_value)

_t = i18n.scoped("commentary")

#: The commentary's names, those of :mod:`iolab.report.commentary_base` and
#: :mod:`iolab.report.cache_commentary` included (one place to import from).
__all__ = ["KNOWN_FLAGS", "Rules", "cache_effects", "cache_pairs",
           "cache_sentences", "caveat_sentences", "caveats", "default_groups", "describe", "group_ranges",
           "group_sentences", "higher_is_better", "is_close", "pick_baseline", "versus", "winner_sentences", "winners", "coverage_note"]


def is_close(a: pd.Series, b: pd.Series, tolerance: float = verdicts.TIE_TOLERANCE) -> str | None:
    """``"ci"`` if both have CIs that overlap, ``"pct"`` if within ``tolerance``, else None
    (:func:`iolab.report.verdicts.tie`)."""
    return verdicts.tie(a, b, tolerance)


def winners(summary: pd.DataFrame, *, higher: bool | None = None, rules: Rules = Rules()) -> pd.DataFrame:
    """The winner of every (test, direction) among cache-isolated, measured systems.

    Columns: ``test, direction, winner, value, unit, runner_up, runner_value,
    factor`` (winner over runner-up), ``close`` (``"ci"``, ``"pct"`` or ``""``),
    ``tied`` (systems tied with the winner, winner included), ``ci_pct`` (half
    width of the winner's 95% CI relative to its value, NaN without repeats),
    ``low``/``high`` (range of the tied values), ``unmeasurable`` (systems the
    tool could not time).
    """
    frame = checked_summary(summary)
    rows = []
    for test, direction, group in groups_by_test(frame):
        metric = str(group["metric"].iloc[0])
        up = higher_is_better(metric) if higher is None else higher
        pool = group[group["cache_isolated"] & group["value"].notna()]
        too_fast = list(group[group["cache_isolated"] & group["unmeasurable"]]["system"])
        if pool.empty:
            continue
        pool = pool.sort_values("value", ascending=not up, kind="stable")
        best = pool.iloc[0]
        row = {"test": test, "direction": direction, "metric": metric, "unit": best["unit"],
               "winner": best["system"], "value": best["value"], "runner_up": None,
               "runner_value": math.nan, "factor": math.nan, "close": "", "tied": [best["system"]],
               "low": best["value"], "high": best["value"], "ci_pct": math.nan,
               "unmeasurable": too_fast, "higher": up, "n_systems": len(pool),
               # systems with a figure here that is not cache-isolated: in the tables, never a runner-up
               "cached": list(group[~group["cache_isolated"] & group["value"].notna()]["system"])}
        if best.get("n", 1) >= 2 and not pd.isna(best["ci_high"]) and best["value"]:
            row["ci_pct"] = (best["ci_high"] - best["ci_low"]) / 2 / abs(best["value"])
        if len(pool) >= 2:
            second = pool.iloc[1]
            row.update(runner_up=second["system"], runner_value=second["value"],
                       factor=verdicts.advantage(best["value"], second["value"], up))
            tied = [best["system"]]
            reasons = []
            for _, other in pool.iloc[1:].iterrows():
                reason = is_close(best, other, rules.tolerance)
                if reason:
                    tied.append(other["system"])
                    reasons.append(reason)
            if len(tied) > 1:
                values = pool[pool["system"].isin(tied)]["value"]
                row.update(tied=tied, low=values.min(), high=values.max(),
                           close="ci" if "ci" in reasons else "pct")
        rows.append(row)
    return pd.DataFrame(rows)


def versus(summary: pd.DataFrame, baseline: str, *, higher: bool | None = None) -> pd.DataFrame:
    """Each system's factor over ``baseline`` per (test, direction); > 1 means better.

    Columns: ``test, direction, system, value, baseline_value, factor``. Only
    cache-isolated systems with a number on both sides are compared.
    """
    frame = checked_summary(summary)
    if baseline not in set(frame["system"]):
        raise IolabError(f"no system {baseline!r} to compare with", context="baseline",
                         hint="systems: " + ", ".join(sorted(set(frame["system"]))))
    rows = []
    for test, direction, group in groups_by_test(frame):
        up = higher_is_better(str(group["metric"].iloc[0])) if higher is None else higher
        base = group[group["system"] == baseline]
        if base.empty or pd.isna(base["value"].iloc[0]):
            continue
        base_value = base["value"].iloc[0]
        for _, row in group.iterrows():
            if row["system"] == baseline or not row["cache_isolated"] or pd.isna(row["value"]):
                continue
            rows.append({"test": test, "direction": direction, "system": row["system"],
                         "value": row["value"], "baseline_value": base_value,
                         "factor": verdicts.advantage(row["value"], base_value, up), "higher": up})
    return pd.DataFrame(rows, columns=["test", "direction", "system", "value", "baseline_value", "factor", "higher"])


def default_groups(summary: pd.DataFrame) -> dict[str, list[str]]:
    """``SEQ*`` tests as "sequential", ``RND*`` as "random", every other test on its own."""
    groups: dict[str, list[str]] = {}
    for test in dict.fromkeys(summary["test"].astype(str)):
        prefix = ""
        for char in test:
            if char.isdigit() or char in "-_ ":
                break
            prefix += char
        key = {"SEQ": "sequential", "RND": "random"}.get(prefix.upper(), test)
        groups.setdefault(key, []).append(test)
    return groups


def group_ranges(vs: pd.DataFrame, groups: dict[str, list[str]], *, rules: Rules = Rules()) -> pd.DataFrame:
    """Per group and system: the lowest and highest factor over the baseline.

    Columns: ``group, tests, system, low, high, on_par`` (all factors within
    ``rules.tolerance`` of 1: the tie rule of :mod:`iolab.report.verdicts`), ``spread`` (largest distance from 1, as a fraction).
    """
    rows = []
    for group, tests in groups.items():
        part = vs[vs["test"].isin(tests)]
        if part.empty:
            continue
        present = [t for t in tests if t in set(part["test"])]
        for system in dict.fromkeys(part["system"]):
            factors = part[part["system"] == system]["factor"]
            spread = float((factors - 1).abs().max())
            rows.append({"group": group, "tests": present, "system": system, "low": float(factors.min()),
                         "high": float(factors.max()), "on_par": spread <= rules.tolerance, "spread": spread})
    return pd.DataFrame(rows, columns=["group", "tests", "system", "low", "high", "on_par", "spread"])


def caveats(summary: pd.DataFrame, *, rules: Rules = Rules()) -> pd.DataFrame:
    """One row per (flag, system) with the tests it concerns (``all_tests``: every test of that
    system shown, so the prose says "all tests" instead of listing them).

    Flags come from the ``flags`` column (engine flags, ';'-joined) plus
    ``high_variance`` where the CoV exceeds ``rules.max_cov``.
    """
    frame = checked_summary(summary)
    found: dict[tuple[str, str], list[str]] = {}
    worst: dict[tuple[str, str], float] = {}
    for _, row in frame.iterrows():
        flags = [f for f in str(row["flags"]).split(";") if f]
        cov = row.get("cov")
        if cov is not None and not pd.isna(cov) and cov > rules.max_cov and "high_variance" not in flags:
            flags.append("high_variance")
        for flag in flags:
            found.setdefault((flag, row["system"]), []).append(
                (row["test"], row["direction"]))
            if flag == "high_variance" and cov is not None and not pd.isna(cov):
                worst[(flag, row["system"])] = max(worst.get((flag, row["system"]), 0.0), float(cov))
    shown = {system: set(zip(part["test"], part["direction"])) for system, part in frame.groupby("system")}
    rows = [{"flag": flag, "system": system, "tests": list(dict.fromkeys(tests)),
             "cov": worst.get((flag, system), math.nan),
             "all_tests": len(shown[system]) >= 2 and set(tests) >= shown[system]}
            for (flag, system), tests in found.items()]
    return pd.DataFrame(rows, columns=["flag", "system", "tests", "cov", "all_tests"])


def pick_baseline(summary: pd.DataFrame) -> str | None:
    """The isolated system that is worst on most tests (the natural "1x" of an article)."""
    frame = checked_summary(summary)
    pool = frame[frame["cache_isolated"] & frame["value"].notna()]
    if pool.empty or pool["system"].nunique() < 2:
        return None
    ranks = []
    for test, direction, group in groups_by_test(pool):
        up = higher_is_better(str(group["metric"].iloc[0]))
        ranks.append(group.set_index("system")["value"].rank(ascending=not up, pct=True))
    score = pd.concat(ranks, axis=1).mean(axis=1)
    # highest average rank = worst; ties: first system in data order
    order = list(dict.fromkeys(pool["system"]))
    score = score.reindex(order)
    return str(score.idxmax())


# ---------------------------------------------------------------------------
# prose


def lone_results(win: pd.DataFrame, lang: str) -> dict[str, list[str]]:
    """Tests only one system has a result for, per system: a coverage fact, not a finding."""
    alone: dict[str, list[str]] = {}
    for system, _cached, tests in _lone(win, lang):
        alone.setdefault(system, []).extend(tests)
    return alone


def _lone(win: pd.DataFrame, lang: str) -> list[tuple[str, bool, list[str]]]:
    """``(system, others have a cached figure there, tests)`` for the tests only one isolated system has."""
    found: dict[tuple[str, bool], list[str]] = {}
    for _, row in win.iterrows():
        if (row["runner_up"] is None or pd.isna(row["runner_up"])) and row["close"] == "":
            cached = bool(row.get("cached")) if isinstance(row.get("cached"), list) else False
            found.setdefault((row["winner"], cached), []).append(i18n.test_label(row["test"], row["direction"], lang))
    return [(system, cached, tests) for (system, cached), tests in found.items()]


def coverage_note(win: pd.DataFrame, *, lang: str) -> str:
    """One sentence on the tests only one system has results for ('' when every test has two or more);
    where another system has a figure there that is not cache-isolated, it says "cache-isolated result"
    (the other system fills the table: "only X has results" would be false)."""
    lone = _lone(win, lang)
    if not lone:
        return ""
    items = [_t("coverage_item_isolated" if cached else "coverage_item", lang, system=system,
                tests=i18n.join(tests, lang)) for system, cached, tests in lone]
    return _t("coverage", lang, items=i18n.join(items, lang) if lang == "en" else "、".join(items))


def winner_sentences(win: pd.DataFrame, *, lang: str, published: bool = False,
                     rules: Rules = Rules()) -> list[str]:
    """One sentence per compared test: the winner and its lead, or the tie.

    A test only one system has a result for is no finding: :func:`coverage_note` says so, once; a test with the
    very figures of one said before (tiobench's 'Total' maximum is its worst test's) points back to it.
    """
    out = []
    said: dict = {}
    for _, row in win.iterrows():
        if row["runner_up"] is None or pd.isna(row["runner_up"]):
            continue
        test = i18n.test_label(row["test"], row["direction"], lang)
        figures = (row["winner"], row["value"], row["runner_up"], row["runner_value"], row["close"])
        if figures in said:
            out.append(_t("lead_same", lang, test=test, other=said[figures]))
            continue
        said[figures] = test
        value = prose_value(row["value"], row["unit"], lang, published=published)
        up = bool(row["higher"])
        # with two systems the other one is not a "runner-up": name it
        against = _t("runner_two" if row.get("n_systems", 3) == 2 else "runner_many", lang, runner=row["runner_up"])
        if row["close"]:
            spread = (row["high"] - row["low"]) / row["high"] if row["high"] else 0.0
            key = "tie_ci" if row["close"] == "ci" else "tie_pct" if spread > 0 else "tie_equal"
            sentence = _t(key, lang, test=test, systems=i18n.join_capped(row["tied"], lang, rules.max_listed),
                          pct=i18n.percent(spread),
                          low=prose_value(row["low"], "", lang, published=published),
                          high=prose_value(row["high"], row["unit"], lang, published=published))
        else:
            f = row["factor"]
            direction = "higher" if up else "time" if is_time(row["unit"]) else "lower"  # a time: quickest, as long
            if f < rules.pct_below:
                sentence = _t(f"lead_pct_{direction}", lang, test=test, winner=row["winner"], value=value,
                              runner=row["runner_up"], against=against,
                              pct=i18n.percent(verdicts.pct_difference(row["value"], row["runner_value"])))
            else:
                sentence = _t(i18n.magnitude_key(f"lead_factor_{direction}", f), lang, test=test,
                              winner=row["winner"], value=value, runner=row["runner_up"], factor=i18n.times(f, lang),
                              against=against,
                              runner_value=prose_value(row["runner_value"], row["unit"], lang, published=published))
        if not pd.isna(row["ci_pct"]) and not row["close"]:
            sentence += _t("ci", lang, pct=i18n.percent(row["ci_pct"]))
        if row["unmeasurable"]:
            sentence += _t("too_fast", lang, systems=i18n.join(row["unmeasurable"], lang))
        out.append(sentence)
    return out


def _pct_range(a: float, b: float) -> str:
    """Two shares (0.064, 0.1) as a percent range for prose, ``6.4–10``; one when they round alike."""
    lo, hi = sorted((i18n.percent(a), i18n.percent(b)), key=float)
    return lo if lo == hi else f"{lo}–{hi}"


def _versus_item(system: str, low: float, high: float, *, higher: bool, lang: str, rules: Rules,
                 time: bool = False) -> str:
    """One system against the baseline over a group of tests, from its advantage factors ``low``-``high``
    (above 1: better than the baseline; for a lower-is-better metric the baseline's value over the system's).
    Better everywhere, worse everywhere or mixed, each said as such ("slower", "higher"), in percent when
    every factor either way is below ``rules.pct_below`` (the winners' rule: never "0.9-1.0x as fast" or
    "1.0x as high"), else as a factor. A range one way whose near end would print as "1.0" (near end first) and a
    mixed range (worse end first) are said end by end, each with its
    direction and a near end as "on par" / 「同等」: never "1.0x", never 「1.3倍から2.5分の1まで」. ``time``: the
    metric is a time (latency, seconds), which Japanese says short or long (短い／長い), not low or high."""
    kind = "higher" if higher else "time" if time else "lower"
    if low >= 1 and high < rules.pct_below:  # better in every test, by less than pct_below
        pct = _pct_range(low - 1, high - 1) if higher else _pct_range(1 - 1 / low, 1 - 1 / high)
        return _t("vs_item", lang, system=system, amount=_t(f"vs_amount.{kind}_better_pct", lang, factor=pct))
    if low >= 1 and not _near_one(low):  # better in every test
        return _t("vs_item", lang, system=system, amount=_amount("vs_amount", kind, "better", low, high, lang))
    if high <= 1 and 1 / low < rules.pct_below:  # worse in every test, by less than pct_below
        pct = _pct_range(1 - high, 1 - low) if higher else _pct_range(1 / high - 1, 1 / low - 1)
        return _t("vs_item", lang, system=system, amount=_t(f"vs_amount.{kind}_worse_pct", lang, factor=pct))
    if high <= 1 and not _near_one(1 / high):  # worse in every test
        return _t("vs_item", lang, system=system,
                  amount=_amount("vs_amount", kind, "worse", 1 / high, 1 / low, lang))
    # mixed: end by end, worse end first, all in percent when every factor is below pct_below (each end said
    # exactly, a near one too); one way with a near end that would print as 1.0: near end first
    in_pct = max(1 / low, high) < rules.pct_below
    ends = [_range_end(f, kind, lang, rules, in_pct=in_pct) for f in (low, high)]
    if high <= 1:
        ends.reverse()
    return _t("vs_item_mixed", lang, system=system, start=ends[0], end=ends[1])


def _near_one(factor: float) -> bool:
    """True when a factor (1 or more) prints as ``1.0`` (:func:`iolab.report.i18n.factor`): no range starts there."""
    return i18n.factor(factor) == i18n.factor(1.0)


def _amount(table: str, kind: str, way: str, low: float, high: float, lang: str) -> str:
    """How much and which way (``table``: ``vs_amount`` or ``vs_end``) for factors ``low``-``high`` (each 1 or
    more) in the form the language says it for ``kind`` and ``way`` (the locale's ``factor_forms``: ``2.5x`` /
    ``2.5倍`` or ``by a factor of 2.5`` / ``2.5分の1``); from :data:`i18n.MAGNITUDE_FROM` up as orders of
    magnitude."""
    fraction = _t(f"factor_forms.{kind}_{way}", lang) == "by"
    key = i18n.magnitude_key(f"{table}.{kind}_{way}", low)
    return _t(key, lang, factor=i18n.times_range(low, high, lang, fraction=fraction))


def _range_end(factor: float, kind: str, lang: str, rules: Rules, *, in_pct: bool = False) -> str:
    """One end of a range said with its direction: "on par" / 「同等の…」 within ``rules.tolerance`` of 1 (the tie
    rule of :mod:`iolab.report.verdicts`, which ``vs_par`` and the findings' "no clear winner" use too), in percent
    below ``rules.pct_below`` (``in_pct``: in percent whatever its size), else as a factor ("slower by a factor
    of 2.5" / 「2.5分の1の速さ」, "1.3x as high" / 「1.3倍長い値」)."""
    way = "better" if factor > 1 else "worse"
    size = factor if factor > 1 else 1 / factor
    if verdicts.within(factor, 1.0, rules.tolerance) and not in_pct:
        return _t(f"vs_end.{kind}_par", lang)
    if size < rules.pct_below or in_pct:
        if kind == "higher":
            pct = factor - 1 if factor > 1 else 1 - factor
        else:
            pct = 1 - 1 / factor if factor > 1 else 1 / factor - 1
        return _t(f"vs_end.{kind}_{way}_pct", lang, factor=i18n.percent(pct))
    return _amount("vs_end", kind, way, size, size, lang)


def group_sentences(ranges: pd.DataFrame, baseline: str, *, lang: str, higher: bool = True,
                    rules: Rules = Rules(), time: bool = False) -> list[str]:
    """Per group: each system's factor range over the baseline (``time``: the metric is a time, see
    :func:`_versus_item`)."""
    out = []
    for group in dict.fromkeys(ranges["group"]):
        part = ranges[ranges["group"] == group]
        tests = part["tests"].iloc[0]
        title = i18n.label(group, lang, section="groups")
        test_names = i18n.join([i18n.label(t, lang, section="tests") for t in tests], lang)
        items = []
        on_par = part[part["on_par"]]
        apart = part[~part["on_par"]]
        rest = None
        if len(apart) > rules.max_listed:  # dozens of servers: the best few by name, the rest as a range
            apart = apart.sort_values("high", ascending=False, kind="stable")
            apart, rest = apart.head(rules.top), apart.iloc[rules.top:]
        for _, row in apart.iterrows():
            items.append(_versus_item(row["system"], row["low"], row["high"], higher=higher, lang=lang, rules=rules,
                                      time=time))
        if rest is not None:
            factors = pd.concat([rest["low"], rest["high"]])
            items.append(_t("vs_rest", lang, n=len(rest), factor=i18n.times_range(factors.min(), factors.max(), lang),
                            median=i18n.times(float(((rest["low"] + rest["high"]) / 2).median()), lang)))
        if not on_par.empty:
            spread = float(on_par["spread"].max())
            items.append(_t("vs_par" if i18n.percent(spread) not in ("0.0", "0") else "vs_equal", lang,
                            systems=i18n.join_capped(on_par["system"], lang, rules.max_listed),
                            pct=i18n.percent(max(spread, 0.0)), n=len(on_par)))
        key = "vs_group_single" if test_names == title else "vs_group"
        out.append(_t(key, lang, group=title, tests=test_names, baseline=baseline,
                      items=i18n.join(items, lang) if lang == "en" else "、".join(items)))
    return out


def caveat_sentences(found: pd.DataFrame, *, lang: str, rules: Rules = Rules(), over: str = "flags") -> list[str]:
    """One sentence per flag and set of tests, naming every system it concerns once ("**A** and **B**");
    ``over="rounds"``: the rows are a steady-state run's rounds, not repetitions (the ``rounds`` words of a flag)."""
    merged: dict[tuple, list[str]] = {}
    for _, row in found.iterrows():
        flag = row["flag"]
        tests = (_t("all_tests", lang) if row.get("all_tests", False)
                 else i18n.join([i18n.test_label(t, d, lang) for t, d in row["tests"]], lang))
        key = f"flags.{flag}" if i18n.has(f"flags.{flag}", lang) else "flags.other"
        cov = row.get("cov", math.nan)
        cov = "" if cov is None or pd.isna(cov) else cov
        if flag == "high_variance" and cov != "" and cov > rules.severe_cov:
            key = "flags.high_variance_severe"
        if i18n.has(key.replace("flags.", f"{over}.", 1), lang):
            key = key.replace("flags.", f"{over}.", 1)
        else:
            cov = ""  # only the graded sentence states a CoV: systems with the same sentence share it
        merged.setdefault((key, flag, tests, cov), []).append(str(row["system"]))
    # the templates bold {system} ("**{system}**"): each name bold, the template's outer ** kept
    return [i18n.text(key, lang, system=i18n.group([f"**{name}**" for name in systems], lang)[2:-2],
                      tests=tests, flag=flag, threshold=i18n.percent(rules.max_cov),
                      cov=i18n.percent(cov) if cov != "" else "")
            for (key, flag, tests, cov), systems in merged.items()]


def _said_by_winners(ranges: pd.DataFrame, win: pd.DataFrame, baseline: str) -> pd.Series:
    """Rows of a one-test group whose system against ``baseline`` a winner's sentence already gives (the winner
    and its runner-up, or a tie, one of them the baseline: sql-bench's 'alter-table' said the runner-up's 5.0x
    twice). The group line keeps the systems the winner's sentence does not name (each fact once)."""
    if ranges.empty or win.empty:
        return pd.Series(False, index=ranges.index)
    said = set()
    for _, w in win.iterrows():
        named = set(w["tied"]) if w["close"] else {w["winner"], w["runner_up"]}
        if baseline in named:
            said |= {(w["test"], s) for s in named - {baseline}}
    per_test = win.groupby("test").size()
    return pd.Series([len(tests) == 1 and per_test.get(tests[0], 0) == 1 and (tests[0], system) in said
                      for tests, system in zip(ranges["tests"], ranges["system"])], index=ranges.index, dtype=bool)


def describe(summary: pd.DataFrame, *, lang: str = "en", baseline: str | None = None,
             groups: dict[str, list[str]] | None = None, pairs: dict[str, str] | None = None,
             published: bool = False, rules: Rules = Rules()) -> str:
    """Markdown commentary on one metric of ``summary``.

    ``baseline`` (default: :func:`pick_baseline`) is the "1x" system; ``groups``
    (default: :func:`default_groups`) the tests summarised together; ``pairs``
    (default: :func:`cache_pairs`) maps not-isolated systems to the isolated
    system on the same device; ``published`` prints values as the article did.
    """
    i18n.check_lang(lang)
    frame = checked_summary(summary)
    if frame.empty:
        return _t("no_data", lang)
    higher = higher_is_better(str(frame["metric"].iloc[0]))
    paragraphs = []
    win = winners(frame, rules=rules)
    findings = winner_sentences(win, lang=lang, published=published, rules=rules) if not win.empty else []
    if findings:
        paragraphs.append("\n".join(f"- {s}" for s in findings))
    baseline = baseline if baseline is not None else pick_baseline(frame)
    if baseline and baseline in set(frame["system"]):
        vs = versus(frame, baseline)
        if not vs.empty:
            ranges = group_ranges(vs, groups or default_groups(frame), rules=rules)
            ranges = ranges[~_said_by_winners(ranges, win, baseline)]
            # two systems compared (measured and isolated from the cache; a +++++ or a cached system is said
            # apart) and one test per group: each sentence would repeat a finding above word for word
            compared = frame.loc[frame["cache_isolated"] & frame["value"].notna(), "system"].nunique()
            repeats = compared <= 2 and not ranges.empty and ranges["tests"].map(len).max() <= 1
            if not ranges.empty and not repeats:
                sentences = group_sentences(ranges, baseline, lang=lang, higher=higher, rules=rules,
                                            time=is_time(frame["unit"].iloc[0]))
                paragraphs.append(i18n.join_sentences(sentences, lang))
    pairs = cache_pairs(frame) if pairs is None else pairs
    effects = cache_effects(frame, pairs, rules=rules)
    if not effects.empty:
        paragraphs.extend(cache_sentences(effects, lang=lang, published=published, rules=rules))
    # a cached system with no isolated run of its device: left out of the findings, and the reader is told why
    for system in dict.fromkeys(frame.loc[~frame["cache_isolated"] & frame["value"].notna(), "system"]):
        if system not in pairs:
            paragraphs.append(_t("cache_unpaired", lang, system=system))
    # the reasons the data shows, with their evidence; alone (one system, no comparison): under the findings'
    # heading itself, not an empty "Findings" followed by "Why"
    why = reasons.why(frame, lang=lang, heading=bool(paragraphs))
    if why:
        paragraphs.append(why)
    note = coverage_note(win, lang=lang) if not win.empty else ""
    if note:
        paragraphs.append(f"*{note}*")
    found = caveats(frame, rules=rules)
    if not found.empty:
        paragraphs.append(_t("caveats", lang) + "\n" + "\n".join(
            f"- {s}" for s in caveat_sentences(found, lang=lang, rules=rules)))
    return "\n\n".join(paragraphs)
