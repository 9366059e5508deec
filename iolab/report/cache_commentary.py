"""What the page cache did: a system measured without cache isolation against the isolated same device.

:func:`cache_pairs` finds the pairs (same ``device``), :func:`cache_effects`
the factor per test and its verdict (inflated, helped, unaffected, worse,
unmeasurable), :func:`cache_sentences` the prose in ``en`` or ``ja``.
"""
from __future__ import annotations

import math

import pandas as pd

from iolab.report import i18n, verdicts
from iolab.report.commentary_base import (Rules, checked_summary, groups_by_test, higher_is_better, is_time,
                                          prose_value)

_t = i18n.scoped("commentary")


def cache_pairs(summary: pd.DataFrame) -> dict[str, str]:
    """Not-isolated system -> the isolated system on the same ``device`` (where known)."""
    frame = checked_summary(summary)
    if "device" not in frame.columns:
        return {}
    pairs = {}
    systems = frame[["system", "device", "cache_isolated"]].drop_duplicates("system")
    for _, row in systems[~systems["cache_isolated"]].iterrows():
        same = systems[(systems["device"] == row["device"]) & systems["cache_isolated"]]
        if not same.empty:
            pairs[row["system"]] = same["system"].iloc[0]
    return pairs


def cache_effects(summary: pd.DataFrame, pairs: dict[str, str] | None = None, *,
                  higher: bool | None = None, rules: Rules = Rules()) -> pd.DataFrame:
    """How far each not-isolated system's results sit from the isolated same device.

    Columns: ``system, reference, test, direction, value, reference_value,
    factor`` (> 1: the cached result looks better) and ``verdict``:
    ``inflated`` (>= rules.inflated), ``helped`` (>= rules.helped), ``unaffected``
    or ``unmeasurable`` (the tool could not time it: too fast); ``higher``: whether the metric is better higher.
    """
    frame = checked_summary(summary)
    pairs = cache_pairs(frame) if pairs is None else pairs
    rows = []
    for test, direction, group in groups_by_test(frame):
        up = higher_is_better(str(group["metric"].iloc[0])) if higher is None else higher
        for cached, isolated in pairs.items():
            c = group[group["system"] == cached]
            i = group[group["system"] == isolated]
            if c.empty or i.empty:
                continue
            c, i = c.iloc[0], i.iloc[0]
            row = {"system": cached, "reference": isolated, "test": test, "direction": direction,
                   "value": c["value"], "reference_value": i["value"], "factor": math.nan, "unit": c["unit"],
                   "higher": up}
            if pd.isna(c["value"]):
                if c["unmeasurable"]:
                    rows.append({**row, "verdict": "unmeasurable"})
                continue
            if pd.isna(i["value"]):
                continue
            f = verdicts.advantage(c["value"], i["value"], up)
            verdict = ("inflated" if f >= rules.inflated else "helped" if f >= rules.helped
                       else "worse" if f <= 1 / rules.helped else "unaffected")
            rows.append({**row, "factor": f, "verdict": verdict})
    return pd.DataFrame(rows, columns=["system", "reference", "test", "direction", "value", "reference_value",
                                       "factor", "unit", "verdict", "higher"])


def cache_sentences(effects: pd.DataFrame, *, lang: str, published: bool = False,
                    rules: Rules = Rules()) -> list[str]:
    """Per not-isolated system: what the page cache did to its numbers."""
    out = []
    for system in dict.fromkeys(effects["system"]):
        part = effects[effects["system"] == system]
        reference = part["reference"].iloc[0]
        parts = [_t("cache_intro", lang, system=system)]
        for verdict in ("inflated", "helped"):
            rows = part[part["verdict"] == verdict]
            if rows.empty:
                continue
            items = [_item("cache_item", r, r["factor"], lang, published) for _, r in rows.iterrows()]
            parts.append(_t(f"cache_{verdict}", lang, items=i18n.join(items, lang), reference=reference,
                            n=len(items)))
        worse = part[part["verdict"] == "worse"]
        if not worse.empty:
            items = [_item("cache_item_worse", r, 1 / r["factor"], lang, published) for _, r in worse.iterrows()]
            parts.append(_t("cache_worse", lang, items=i18n.join(items, lang), reference=reference, n=len(items)))
        too_fast = part[part["verdict"] == "unmeasurable"]
        if not too_fast.empty:
            parts.append(_t("cache_unmeasurable", lang, tests=i18n.join(
                [i18n.test_label(r["test"], r["direction"], lang) for _, r in too_fast.iterrows()], lang)))
        rest = part[part["verdict"] == "unaffected"]
        near = rest["factor"].map(lambda f: verdicts.close(f, rules.par)).astype(bool)
        for key, rows in (("cache_close", rest[near]), ("cache_unaffected", rest[~near])):
            if not rows.empty:
                parts.append(_t(key, lang, tests=i18n.join(
                    [i18n.test_label(r["test"], r["direction"], lang) for _, r in rows.iterrows()], lang),
                    factor=i18n.factor_range(rows["factor"].min(), rows["factor"].max()), reference=reference,
                    helped=i18n.factor(rules.helped), pct=_within_pct(rows), n=len(rows)))
        if len(parts) > 1:
            out.append(" ".join(parts) if lang == "en" else "".join(parts))
    return out


def _within_pct(rows: pd.DataFrame) -> str:
    """The largest difference of ``rows``' cached figures from their isolated ones, in percent of the isolated
    (:func:`iolab.report.verdicts.pct_difference`): a close pair is said "within 6.4%", never "(1.0x)"."""
    diffs = [verdicts.pct_difference(r["value"], r["reference_value"]) for _, r in rows.iterrows()]
    return i18n.percent(max(diffs)) if diffs else ""


def _item(key: str, row, factor: float, lang: str, published: bool) -> str:
    """One test of a cache sentence: the cached figure, by how much and which way it differs from the isolated
    one (``Random seeks at 287,000 µs, 5.3x better`` / 「ランダムシークは5.3倍短い（287,000マイクロ秒）」: the
    Japanese direction word is the metric's, 速い／遅い, 短い／長い for a time, 低い／高い)."""
    higher = bool(row["higher"]) if "higher" in row and not pd.isna(row["higher"]) else True
    kind = "higher" if higher else "time" if is_time(row["unit"]) else "lower"
    return _t(key, lang, test=i18n.test_label(row["test"], row["direction"], lang),
              value=prose_value(row["value"], row["unit"], lang, published=published),
              amount=_t(f"cache_amount.{kind}_{'worse' if key.endswith('_worse') else 'better'}", lang,
                        factor=i18n.times(factor, lang)))
