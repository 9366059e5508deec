"""A fleet: hosts side by side, aggregate throughput against the number of hosts, per-host tail latency."""
from __future__ import annotations

import pandas as pd

from iolab.core import optional
from iolab.report import i18n, plot, tables
from iolab.report.tables import DASH, Table
from iolab.report.sections.common import (
    Figure, Section, plot_labels, as_numbers, usable_rows, with_system, unique_in_order, about, us_as_ms,
    number_or_dash, without_aggregates, is_aggregate, ALL_HOSTS)

_t = i18n.scoped("sections")


def fleet_hosts(data: pd.DataFrame) -> pd.DataFrame:
    """A fleet's per-host rows (aggregates left out) with ``fleet_base`` (the id without ``-n<N>``)."""
    rows = data[data["fleet_id"].notna()] if "fleet_id" in data.columns else data.iloc[0:0]
    rows = without_aggregates(rows)
    return rows.assign(fleet_base=rows["fleet_id"].astype(str).str.replace(r"-n\d+$", "", regex=True))


def fleet_section(data: pd.DataFrame, *, lang: str = "en") -> Section | None:
    """Hosts side by side, aggregate throughput against the number of hosts, per-host tail latency.

    Uses :func:`iolab.fleet.scaling.scaling_table` and :func:`iolab.fleet.scaling.tail_latency`
    on the per-host rows (the aggregate rows, host ``all``, become the
    "all hosts" column, never one more system), and
    :func:`iolab.report.fleetplots.scaling_plot` / :func:`iolab.report.fleetplots.tail_latency_plot`.
    """
    from iolab.fleet import scaling as fleet
    i18n.check_lang(lang)
    data = with_system(data)
    hosts = usable_rows(fleet_hosts(data))
    if hosts.empty:
        return None
    aggregates = usable_rows(data[(data["fleet_id"].notna()) & is_aggregate(data)])
    section = Section("fleet", _t("fleet.heading", lang), lang, intro=_t("fleet.intro", lang))
    for base, rows in hosts.groupby("fleet_base", sort=False):
        largest = int(as_numbers(rows["n_hosts"]).max())
        at_max = rows[as_numbers(rows["n_hosts"]) == largest]
        agg = aggregates[aggregates["fleet_id"].isin(set(at_max["fleet_id"]))] if len(aggregates) else aggregates
        section.tables += _side_by_side(at_max, agg, largest, lang)
        scaling = fleet.scaling_table(rows, metric="bw_mbps")
        if scaling["n_hosts"].nunique() > 1:
            _add_scaling(section, scaling, lang)
        _add_tails(section, fleet.tail_latency(rows), largest, lang)
    return section


def _side_by_side(at_max: pd.DataFrame, agg: pd.DataFrame, largest: int, lang: str) -> list[Table]:
    """The largest fleet's hosts side by side with their sum ("all N hosts"), a table per metric."""
    hosts_label = _t("fleet.all_hosts", lang, n=largest)
    out = []
    for metric in ("bw_mbps", "iops"):
        per_host = tables.summarize(at_max.assign(system=at_max["label"].astype(str)), value=metric)
        if len(agg):
            # (the aggregate has no target: pandas 3 keeps NaN through astype(str), which summarize joins)
            total = tables.summarize(agg.assign(system=hosts_label, target=ALL_HOSTS), value=metric)
        else:
            total = per_host.groupby(["test", "direction"], sort=False, as_index=False)["value"].sum().assign(
                system=hosts_label, metric=metric, unit=tables.metric_unit(metric), n=1)
        summary = pd.concat([per_host, total], ignore_index=True)
        out.append(tables.pivot(summary, lang=lang, caption=_t(
            "fleet.side_caption", lang, n=largest, metric=tables.caption_for(metric, tables.metric_unit(metric),
                                                                             lang))))
    return out


def _add_scaling(section: Section, scaling: pd.DataFrame, lang: str) -> None:
    """Aggregate throughput against the number of hosts: table, a chart per direction, a sentence per test."""
    from iolab.report import fleetplots
    shown, numbers = [], []
    for _, r in scaling.iterrows():
        numbers.append([r["total"], r["per_host"], r["speedup"], r["efficiency"] * 100])
        shown.append([number_or_dash(r["total"]), number_or_dash(r["per_host"]), i18n.factor(r["speedup"]),
                      f"{r['efficiency'] * 100:.0f}"])
    index = pd.MultiIndex.from_arrays(
        [[i18n.label(t, lang, section="tests") for t in scaling["test"]],
         [i18n.label(d, lang, section="directions") for d in scaling["direction"]],
         scaling["n_hosts"].astype(int)],
        names=[i18n.text("labels.test", lang), i18n.text("labels.direction", lang), _t("fleet.hosts", lang)])
    heads = [_t("fleet.col_total", lang), _t("fleet.col_per_host", lang), _t("fleet.col_speedup", lang),
             _t("fleet.col_eff", lang)]
    section.tables.append(Table(pd.DataFrame(shown, index=index, columns=heads),
                                data=pd.DataFrame(numbers, index=index, columns=heads),
                                caption=_t("fleet.scaling_caption", lang)))
    directions = unique_in_order(scaling["direction"])
    fig, axes = optional.pyplot().subplots(1, len(directions), figsize=(5.6 * len(directions), 4.0), squeeze=False)
    for ax, direction in zip(axes[0], directions):
        fleetplots.scaling_plot(scaling[scaling["direction"] == direction], hue="test", ax=ax,
                                labels=plot_labels("fleet_scaling", lang))
        ax.set_title(i18n.label(direction, lang, section="directions"))
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("fleet.scaling_alt", lang)))
    for (test, direction), sub in scaling.groupby(["test", "direction"], sort=False):
        sub = sub.sort_values("n_hosts")
        last = sub.iloc[-1]
        section.sentences.append(_t(
            "fleet.scales", lang, test=i18n.test_label(test, direction, lang), n=int(last["n_hosts"]),
            total=about(last["total"]), speedup=i18n.factor(last["speedup"]),
            n0=int(sub.iloc[0]["n_hosts"]), eff=f"{last['efficiency'] * 100:.0f}"))


def _add_tails(section: Section, tails: pd.DataFrame, largest: int, lang: str) -> None:
    """Per-host p99 at the largest fleet: a chart for the worst test, a sentence per test (beside one host alone)."""
    from iolab.report import fleetplots
    p99 = tails[tails["percentile"] == "p99"]
    if p99.empty:
        return
    # the chart: every host's tail at the largest fleet, for the test with the worst p99
    worst = p99[p99["n_hosts"] == largest].sort_values("latency_us").iloc[-1]
    one = tails[(tails["n_hosts"] == largest) & (tails["test"] == worst["test"])
                & (tails["direction"] == worst["direction"])]
    one = one.assign(latency_ms=one["latency_us"] / 1000.0)
    fig, ax = optional.pyplot().subplots(figsize=(7.0, 3.8))
    # a log axis only where the tail spans more than 100x, as every other chart
    fleetplots.tail_latency_plot(one, y="latency_ms", ax=ax, labels=plot_labels("fleet_tail", lang),
                                 log=plot.wants_log(one["latency_ms"]))
    what = i18n.test_label(worst["test"], worst["direction"], lang)
    ax.set_title(_t("fleet.tail_title", lang, test=what, n=largest))
    section.figures.append(Figure(fig, alt=_t("fleet.tail_alt", lang, test=what, n=largest)))
    for (test, direction), sub in p99.groupby(["test", "direction"], sort=False):
        now = sub[sub["n_hosts"] == largest].sort_values("latency_us")
        if now.empty:
            continue
        alone = sub[sub["n_hosts"] == sub["n_hosts"].min()]
        lo, hi = now.iloc[0], now.iloc[-1]
        section.sentences.append(_t(
            "fleet.tail", lang, test=i18n.test_label(test, direction, lang), n=largest,
            lo=us_as_ms(lo["latency_us"]), lo_host=lo["host"], hi=us_as_ms(hi["latency_us"]), hi_host=hi["host"],
            n0=int(alone["n_hosts"].min()) if len(alone) else largest,
            alone=us_as_ms(float(alone["latency_us"].median())) if len(alone) else DASH))
