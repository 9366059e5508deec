"""Commentary in an article's voice: one short paragraph per recipe, no bullet per row.

* Two systems: "A is 2.1-2.9x as fast as B in <tests>" once per group of tests
  that behave alike (factors within ``spread`` of each other, same leader), the
  largest group first, then the exceptions; ties are named as ties.
* Three or more systems: who leads each group of tests, then the ranking by
  mean rank over the tests (tied results share a rank, :func:`iolab.report.verdicts.ranks`).
* Caveats once, naming the tests they affect (or "all tests").

Factors follow :mod:`iolab.report.verdicts` for both directions (higher or lower is better).
"""
from __future__ import annotations

import pandas as pd

from iolab.report import commentary, commentary_base, i18n, reasons, verdicts

#: Tests whose factors differ by less than this ratio are said together ("2.1-2.9x").
SPREAD = 1.5


_t = i18n.scoped("narrative")


def pair_clusters(summary: pd.DataFrame, a: str, b: str, *, rules=commentary.Rules()) -> list[dict]:
    """Tests of ``a`` against ``b`` in groups that behave alike.

    Each dict: ``leader`` (a system, or None for a tie), ``tests`` (labels in
    data order), ``low``/``high`` (the leader's factor), ``reason`` for ties.
    Largest group first.
    """
    frame = commentary_base.checked_summary(summary)
    rows = []
    for test, direction, group in commentary_base.groups_by_test(frame):
        up = commentary.higher_is_better(str(group["metric"].iloc[0]))
        ra, rb = group[group["system"] == a], group[group["system"] == b]
        if ra.empty or rb.empty or pd.isna(ra["value"].iloc[0]) or pd.isna(rb["value"].iloc[0]):
            continue
        ra, rb = ra.iloc[0], rb.iloc[0]
        tie = verdicts.tie(ra, rb, rules.tolerance)
        f = verdicts.advantage(ra["value"], rb["value"], up)
        rows.append({"test": (test, direction), "tie": tie, "leader": None if tie else (a if f > 1 else b),
                     "factor": 1.0 if tie else (f if f > 1 else 1 / f)})
    clusters: list[dict] = []
    for row in sorted(rows, key=lambda r: (r["leader"] or "", r["factor"])):
        last = clusters[-1] if clusters else None
        if last and last["leader"] == row["leader"] and (row["leader"] is None or row["factor"] / last["low"] <= SPREAD):
            last["tests"].append(row["test"])
            last["high"] = row["factor"]
            last["reasons"].add(row["tie"])
        else:
            clusters.append({"leader": row["leader"], "tests": [row["test"]], "low": row["factor"],
                             "high": row["factor"], "reasons": {row["tie"]}})
    order = [r["test"] for r in rows]
    for cluster in clusters:
        cluster["tests"].sort(key=order.index)
    clusters.sort(key=lambda c: (c["leader"] is None, -len(c["tests"]), order.index(c["tests"][0])))
    return clusters


def _tests(tests, lang: str, total: int) -> str:
    if len(tests) == total and total > 1:
        return _t("every_test", lang)
    return i18n.join([i18n.test_label(t, d, lang) for t, d in tests], lang)




def pair_paragraph(summary: pd.DataFrame, a: str, b: str, *, lang: str, rules=commentary.Rules()) -> str:
    clusters = pair_clusters(summary, a, b, rules=rules)
    total = sum(len(c["tests"]) for c in clusters)
    parts = []
    first_leader = None
    for cluster in clusters:
        tests = _tests(cluster["tests"], lang, total)
        if cluster["leader"] is None:
            key = "tie_ci" if "ci" in cluster["reasons"] else "tie_pct"
            parts.append(_t(key, lang, tests=tests, a=a, b=b, pct=i18n.percent(rules.tolerance)))
            continue
        other = b if cluster["leader"] == a else a
        key = "pair_first" if first_leader is None else "pair_more" if cluster["leader"] == first_leader \
            else "pair_exception"
        first_leader = first_leader or cluster["leader"]
        if key != "pair_more":
            key = i18n.magnitude_key(key, cluster["low"])
        parts.append(_t(key, lang, leader=cluster["leader"], other=other, tests=tests,
                        factor=i18n.times_range(cluster["low"], cluster["high"], lang)))
    return i18n.join_sentences(parts, lang)


def ranking_paragraph(summary: pd.DataFrame, *, lang: str, rules=commentary.Rules()) -> str:
    frame = commentary_base.checked_summary(summary)
    frame = frame[frame["cache_isolated"] & frame["value"].notna()]
    ranks = []
    leaders: dict[str, list] = {}
    ties = []
    for test, direction, group in commentary_base.groups_by_test(frame):
        up = commentary.higher_is_better(str(group["metric"].iloc[0]))
        r = verdicts.ranks(group.set_index("system")["value"], up, rules.tolerance)
        ranks.append(r)
        first = list(r[r == 1].index)
        if len(first) > 1:
            ties.append(((test, direction), first))
        else:
            leaders.setdefault(first[0], []).append((test, direction))
    if not ranks:
        return ""
    mean = pd.concat(ranks, axis=1).mean(axis=1).sort_values(kind="stable")
    total = len(ranks)
    parts = [_t("leads", lang, system=s, tests=_tests(t, lang, total)) for s, t in leaders.items()]
    for test, systems in ties:
        parts.append(_t("tie_at_top", lang, tests=_tests([test], lang, total), systems=i18n.join(systems, lang)))
    order = i18n.join([f"{i}. {s}" for i, s in enumerate(mean.index, start=1)], lang)
    parts.append(_t("ranking", lang, order=order, n=total))
    return i18n.join_sentences(parts, lang)


def ram_backed(frame: pd.DataFrame) -> list[str]:
    """Systems whose every figure carries ``ram_backed`` (a target on tmpfs or ramfs): memory, not storage."""
    if "flags" not in frame.columns:
        return []
    flagged = frame["flags"].fillna("").astype(str).str.split(";").map(lambda f: "ram_backed" in f)
    measured = frame["value"].notna()
    return [s for s in dict.fromkeys(frame.loc[measured, "system"])
            if flagged[measured & (frame["system"] == s)].all()]


def coverage(frame: pd.DataFrame, systems: list[str], *, lang: str) -> list[str]:
    """What the comparison leaves out, said where it is said: systems in the tables that were not isolated
    from the page cache, and each compared system's tests without a figure (a failed or unrun test)."""
    measured = frame[frame["value"].notna()]
    tests = list(dict.fromkeys(zip(measured["test"], measured["direction"])))
    out = []
    in_ram = ram_backed(frame)
    if in_ram:
        out.append(_t("in_ram", lang, systems=i18n.join(in_ram, lang), n=len(in_ram)))
    cached = [s for s in dict.fromkeys(measured["system"]) if s not in systems and s not in in_ram]
    if cached:
        out.append(_t("not_isolated", lang, systems=i18n.join(cached, lang), n=len(cached)))
    if len(systems) < 2:
        return out
    for system in systems:
        own = measured[measured["system"] == system]
        have = set(zip(own["test"], own["direction"]))
        lacking = [t for t in tests if t not in have]
        if not lacking:
            continue
        compared = [t for t in tests if t in have]
        out.append(_t("partial" if len(lacking) <= len(compared) else "partial_few", lang, system=system, total=len(tests), n=len(compared), missing=len(lacking),
                      measured=i18n.join_capped([i18n.test_label(t, d, lang) for t, d in compared], lang),
                      lacking=i18n.join_capped([i18n.test_label(t, d, lang) for t, d in lacking], lang)))
    return out


def describe(summary: pd.DataFrame, *, lang: str = "en", baseline: str | None = None,
             rules=commentary.Rules()) -> str:
    """One paragraph on ``summary`` (one metric of one recipe), then the caveats once.

    More than ``rules.max_listed`` systems (a fleet of servers): the summarised
    form of :func:`iolab.report.commentary.describe` (the best few named, the rest as a range).
    """
    i18n.check_lang(lang)
    frame = commentary_base.checked_summary(summary)
    if frame.empty or frame["value"].notna().sum() == 0:
        return i18n.text("commentary.no_data", lang)
    in_ram = ram_backed(frame)
    systems = [s for s in dict.fromkeys(frame[frame["cache_isolated"] & frame["value"].notna()]["system"])
               if s not in in_ram]
    if len(systems) > rules.max_listed:
        return commentary.describe(summary, lang=lang, baseline=baseline, rules=rules)
    present = list(dict.fromkeys(frame.loc[frame["value"].notna(), "system"]))
    if len(systems) == 2:
        text = pair_paragraph(frame, systems[0], systems[1], lang=lang, rules=rules)
    elif len(systems) >= 3:
        text = ranking_paragraph(frame, lang=lang, rules=rules)
    elif len(present) > len(systems):  # others fill the tables, but none is isolated from the cache
        text = _t("single_isolated", lang, system=systems[0]) if systems else ""
    else:
        text = _t("single", lang, system=systems[0] if systems else "")
    text = i18n.join_sentences([text, *coverage(frame, systems, lang=lang)], lang)
    why = reasons.why(frame, lang=lang)  # the reasons the data shows, with their evidence
    if why:
        text += "\n\n" + why
    found = commentary.caveats(frame, rules=rules)
    if not found.empty:
        text += "\n\n" + i18n.text("commentary.caveats", lang) + "\n" + "\n".join(
            f"- {s}" for s in commentary.caveat_sentences(found, lang=lang, rules=rules))
    return text
