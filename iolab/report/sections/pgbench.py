"""pgbench: transactions per second against clients per mode, and whether the commit rate is what fio's write
latency allows."""
from __future__ import annotations

import math

import pandas as pd

from iolab.core import optional
from iolab.report import i18n, reasons
from iolab.report.tables import Table
from iolab.report.sections.common import (
    Figure, Section, plot_labels, numeric, usable_rows, with_system, unique_in_order, about,
    number_or_dash, winner_lines, without_aggregates, merge_legends)

_t = i18n.scoped("sections")


def pgbench_results(data: pd.DataFrame) -> pd.DataFrame:
    """pgbench per system, mode (test) and client count: ``n, tps`` (mean), ``lat_avg_ms``, ``p99_ms``,
    ``sync_commit``, ``fsync``, and ``host``/``label`` (to find the same system's fio runs)."""
    data = usable_rows(with_system(data))
    rows = []
    clients = numeric(data, "clients").where(numeric(data, "clients").notna(), numeric(data, "numjobs"))
    for (system, test, n), sub in data.groupby([data["system"], data["test"], clients], sort=False):
        lat = numeric(sub, "lat_avg_ms")
        lat = lat.where(lat.notna(), numeric(sub, "lat_mean_us") / 1000)
        rows.append({"system": system, "test": test, "clients": int(n), "n": len(sub),
                     "tps": float(numeric(sub, "tps").mean()), "lat_avg_ms": float(lat.mean()),
                     "p99_ms": float(numeric(sub, "lat_p99_us").mean()) / 1000,
                     "sync_commit": str(sub["sync_commit"].iloc[0]) if "sync_commit" in sub.columns else None,
                     "fsync": str(sub["fsync"].iloc[0]) if "fsync" in sub.columns else None,
                     "host": str(sub["host"].iloc[0]) if "host" in sub.columns else None,
                     "label": str(sub["label"].iloc[0]) if "label" in sub.columns else None})
    frame = pd.DataFrame(rows, columns=["system", "test", "clients", "n", "tps", "lat_avg_ms", "p99_ms",
                                        "sync_commit", "fsync", "host", "label"])
    tests = {t: i for i, t in enumerate(unique_in_order(frame["test"]))}
    systems = {s: i for i, s in enumerate(unique_in_order(frame["system"]))}
    return frame.sort_values(["test", "clients", "system"], key=lambda s: s.map(tests) if s.name == "test" else
                             s.map(systems) if s.name == "system" else s, kind="stable").reset_index(drop=True)


def _is_random_4k_qd1_write(data: pd.DataFrame) -> pd.Series:
    test = data["test"].astype(str) if "test" in data.columns else pd.Series("", index=data.index)
    sequential = test.str.match(r"(?i)^(seq|mix)")
    return ((data.get("direction", pd.Series("", index=data.index)).astype(str) == "write")
            & (numeric(data, "bs") == 4096) & (numeric(data, "iodepth") == 1)
            & (numeric(data, "numjobs").fillna(1) == 1)
            & ~sequential)


def fio_write_latency(data: pd.DataFrame) -> pd.DataFrame:
    """Random 4 KiB QD1 write latency per system, from fio runs (CrystalDiskMark's RND4K-Q1T1, CDM 3's 4K...).

    Columns: ``host, label, system, recipe, test, n, lat_ms`` (mean of the
    repetitions' mean latency). Runs not isolated from the page cache
    (isolation ``none``) are left out.
    """
    columns = ["host", "label", "system", "recipe", "test", "n", "lat_ms"]
    if data is None or data.empty:
        return pd.DataFrame(columns=columns)
    data = usable_rows(with_system(without_aggregates(data)))
    if "tool" in data.columns:
        data = data[data["tool"].isna() | (data["tool"].astype(str) == "fio")]
    if "isolation" in data.columns:
        data = data[data["isolation"].astype(str) != "none"]
    data = data[_is_random_4k_qd1_write(data)]
    rows = []
    for key, sub in data.groupby(["host", "label", "system", "recipe", "test"], sort=False):
        lat = numeric(sub, "lat_mean_us").dropna()
        if len(lat):
            rows.append(dict(zip(["host", "label", "system", "recipe", "test"], key), n=len(lat),
                             lat_ms=float(lat.mean()) / 1000))
    return pd.DataFrame(rows, columns=columns)


def _clients(n: int, lang: str) -> str:
    return _t("pg.clients_1", lang) if n == 1 else _t("pg.clients_n", lang, n=n)


def _sync_on(results: pd.DataFrame) -> pd.Series:
    by_settings = (results["sync_commit"] == "on") & (results["fsync"] == "on")
    return by_settings | results["test"].astype(str).str.contains("sync_on")


def pgbench_section(data: pd.DataFrame, *, lang: str = "en", fio: pd.DataFrame | None = None) -> Section | None:
    """The database section: tps against clients per system and mode, a table, and the tie to fio.

    Table: rows = mode x clients, columns = tps and p99 latency per system.
    Chart: one :func:`iolab.report.curveplots.scaling_plot` per mode (tps, p99 dashed).
    Findings: the fastest system per mode at the most clients; what skipping
    the flush buys; and, where ``fio`` (every selected result) holds a random
    4 KiB QD1 write latency of the same system (same host and label), whether
    the commit rate at 1 client is what that latency allows; and why, where the
    kernel counted a cache flush per commit (:func:`iolab.report.reasons.commit_flushes`).
    """
    from iolab.report import curveplots
    i18n.check_lang(lang)
    data = usable_rows(with_system(data))
    results = pgbench_results(data)
    if results.empty:
        return None
    section = Section("pgbench", _t("pg.heading", lang), lang, intro=_t("pg.intro", lang))
    systems = unique_in_order(results["system"])
    levels = results[["test", "clients"]].drop_duplicates()
    index = pd.MultiIndex.from_frame(levels.rename(columns={"test": _t("pg.mode", lang),
                                                            "clients": _t("pg.clients", lang)}))
    shown, numbers = {}, {}
    for column, head in (("tps", _t("pg.col_tps", lang)), ("p99_ms", _t("pg.col_p99", lang))):
        for system in systems:
            mine = results[results["system"] == system].set_index(["test", "clients"])[column]
            values = [float(mine.get((t, c), math.nan)) for t, c in levels.itertuples(index=False)]
            numbers[(head, system)] = values
            shown[(head, system)] = [number_or_dash(v) for v in values]
    section.tables.append(Table(pd.DataFrame(shown, index=index), data=pd.DataFrame(numbers, index=index),
                                caption=_t("pg.caption", lang), notes=[_t("pg.note", lang)]))
    plt = optional.pyplot()
    modes = unique_in_order(results["test"])
    fig, axes = plt.subplots(1, len(modes), figsize=(5.4 * len(modes), 4.0), squeeze=False)
    labels = plot_labels("scaling", lang)
    labels.update(x=_t("pg.clients", lang), y=_t("pg.col_tps", lang))
    # numjobs is the client count (curves.scaling names its own count of rows "clients")
    clients = numeric(data, "clients")
    chart = data.assign(numjobs=clients.where(clients.notna(), numeric(data, "numjobs")))
    for ax, mode in zip(axes[0], modes):
        curveplots.scaling_plot(chart[chart["test"] == mode], x="numjobs", y="tps", hue="system", ax=ax,
                                labels=labels)
        ax.set_title(mode)
        merge_legends(ax, curveplots.twin_of(ax), below=True)
    fig.tight_layout()
    section.figures.append(Figure(fig, alt=_t("pg.alt", lang)))
    if len(systems) >= 2:
        top = results.groupby("test")["clients"].transform("max") == results["clients"]
        best = results[top]
        section.sentences += winner_lines(pd.DataFrame({
            "system": best["system"],
            "test": [_t("pg.test_at", lang, mode=m, clients=c) for m, c in zip(best["test"], best["clients"])],
            "direction": "", "metric": "tps", "unit": "tps", "value": best["tps"], "n": 1}), lang)
    one = results[results["clients"] == results["clients"].min()]
    for system in systems:
        mine = one[one["system"] == system]
        on = mine[_sync_on(mine)]
        off = mine[(mine["sync_commit"] == "off") & (mine["fsync"] == "on")]
        if len(on) and len(off) and on["tps"].iloc[0] > 0:
            ratio = off["tps"].iloc[0] / on["tps"].iloc[0]
            key = i18n.magnitude_key("pg.flush_bound", ratio) if ratio >= 2 else "pg.flush_free"
            section.sentences.append(_t(key, lang, system=system, mode=off["test"].iloc[0],
                                        factor=i18n.times(ratio, lang),
                                        pct=f"{(ratio - 1) * 100:.0f}",
                                        clients=_clients(int(mine["clients"].iloc[0]), lang)))
    section.sentences += reasons.sentences(reasons.commit_flushes(data), lang=lang)
    section.sentences += _fio_sentences(one, systems, fio if fio is not None else data.iloc[0:0], lang)
    return section


def _fio_sentences(one: pd.DataFrame, systems: list, fio: pd.DataFrame, lang: str) -> list[str]:
    """Whether each system's commit rate at 1 client is what its fio random 4 KiB QD1 write latency allows."""
    said = []
    latency = fio_write_latency(fio)
    for system in systems:
        mine = one[(one["system"] == system) & _sync_on(one)]
        if mine.empty or mine["clients"].iloc[0] != 1:
            continue
        row = mine.iloc[0]
        match = latency[(latency["host"] == row["host"]) & (latency["label"] == row["label"])]
        if match.empty:
            continue
        lat = float(match["lat_ms"].mean())
        ceiling = 1000.0 / lat
        writes = ceiling / row["tps"]
        key = "pg.fio_consistent" if 0.8 <= writes <= 4 else "pg.fio_below" if writes > 4 else "pg.fio_above"
        said.append(_t(key, lang, system=system, tps=about(row["tps"]), lat=number_or_dash(lat),
                       ceiling=about(ceiling), writes=i18n.factor(writes),
                       source=f"{match['recipe'].iloc[0]}, {match['test'].iloc[0]}"))
    return said
