"""Interactive exploration in JupyterLab (ipywidgets): choose runs and plots, launch a benchmark.

* :class:`Explorer` — data directories, hosts, labels, recipe, metric, hue and
  statistic; the chart, the article-shaped table and the findings update when
  any of them changes. Reads stored runs only (no root, no fio: Binder works).
* :class:`~iolab.report.runpanel.RunPanel` (in its own module, reachable here) — target, recipe, isolation, label, size, runtime,
  repeat, tests and a **Start** button. The benchmark runs in a background
  thread (the notebook stays usable); the button is disabled while it runs, a
  progress bar follows the run directory's manifest, and errors are shown in
  the panel, never raised.
* :func:`explore` — both, wired so that a finished run appears in the
  Explorer; what ``notebooks/explore.ipynb`` displays.

ipywidgets is imported in one place (:func:`_ipywidgets`) and only when a
widget is built. Outputs are filled with ``Output.append_display_data`` (PNG
figures drawn on a private matplotlib ``Figure``, HTML tables, Markdown), so
the widgets work the same in a kernel, from a background thread and headless
in tests; the numbers behind each view are kept on the object (``summary``,
``axes``, ``result``) for tests and further work.
"""
from __future__ import annotations

import contextlib
import html
import logging
import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from iolab.engine import store
from iolab.core.errors import IolabError
from iolab.report.runpanel import RunPanel
from iolab.report.widgetkit import _error_html, _html, _ipywidgets, _markdown, _png, _show, _split

log = logging.getLogger(__name__)

#: Metrics offered by the Explorer: column -> label.
METRICS = {
    "bw_mbps": "Throughput (MB/s)",
    "iops": "IOPS",
    "lat_mean_us": "Mean latency (ms)",
    "lat_p50_us": "Median latency (ms)",
    "lat_p99_us": "99th percentile latency (ms)",
    "lat_p999_us": "99.9th percentile latency (ms)",
    "lat_max_us": "Maximum latency (ms)",
}
#: What the bars are coloured by: one bar per value of this column.
HUES = {"system": "System (run)", "host": "Host", "label": "Label", "target": "Target",
        "isolation": "Cache isolation", "run_id": "Run ID"}
STATISTICS = ("mean", "median", "best")


# ---------------------------------------------------------------------------
# exploring stored runs


class Explorer:
    """Choose runs, recipe, metric and hue; the chart, table and findings follow.

    ``sources``: data directories (or run directories); those that do not
    exist or hold no runs are skipped with a note, so a list like
    ``["../data", "../tests/fixtures/data"]`` works everywhere.
    """

    def __init__(self, sources: Sequence[str | os.PathLike] | str = ("data",), *, recipe: str | None = None,
                 metric: str = "bw_mbps", hue: str = "system", statistic: str = "mean", lang: str = "en"):
        w = _ipywidgets()
        from iolab.report import i18n, plot
        i18n.check_lang(lang)
        if metric not in METRICS:
            raise IolabError(f"unknown metric {metric!r}", context="metric", hint="choose one of " + ", ".join(METRICS))
        if hue not in HUES:
            raise IolabError(f"unknown hue {hue!r}", context="hue", hint="choose one of " + ", ".join(HUES))
        if statistic not in STATISTICS:
            raise IolabError(f"unknown statistic {statistic!r}", context="statistic",
                             hint="choose one of " + ", ".join(STATISTICS))
        plot.setup(lang)
        self.lang = lang
        sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
        wide = {"description_width": "7em"}
        self.sources = w.Text(value=", ".join(str(s) for s in sources), description="Data",
                              placeholder="data directories, comma-separated", style=wide, continuous_update=False,
                              layout=w.Layout(width="60%"))
        self.reload_button = w.Button(description="Reload", icon="refresh", tooltip="read the data directories again")
        self.hosts = w.SelectMultiple(description="Hosts", rows=4, style=wide, tooltip="none selected: all")
        self.labels = w.SelectMultiple(description="Labels", rows=4, style=wide, tooltip="none selected: all")
        self.recipe = w.Dropdown(description="Recipe", style=wide)
        self.metric = w.Dropdown(description="Metric", options=[(v, k) for k, v in METRICS.items()], value=metric,
                                 style=wide)
        self.hue = w.Dropdown(description="Bars by", options=[(v, k) for k, v in HUES.items()], value=hue, style=wide)
        self.statistic = w.Dropdown(description="Statistic", options=list(STATISTICS), value=statistic, style=wide)
        self.message = w.HTML()
        self.chart = w.Output()
        self.table = w.Output()
        self.findings = w.Output()
        self.widget = w.VBox([
            w.HBox([self.sources, self.reload_button]),
            w.HBox([self.hosts, self.labels]),
            w.HBox([self.recipe, self.metric]),
            w.HBox([self.hue, self.statistic]),
            self.message, self.chart, self.table, self.findings])
        #: what is shown: the selection read, the rows plotted, the summary behind chart and table
        self.selection = None
        self.data = pd.DataFrame()
        self.summary = pd.DataFrame()
        self.axes = None
        #: the chart (PNG), table (HTML) and findings (Markdown) last shown, for display without widgets
        self.views: list = []
        self.renders = 0
        self._quiet = False
        self._wanted_recipe = recipe
        self.reload_button.on_click(lambda _: self.reload())
        self.sources.observe(lambda change: self.reload(), names="value")
        for control in (self.hosts, self.labels):
            control.observe(self._on_filter, names="value")
        for control in (self.recipe, self.metric, self.hue, self.statistic):
            control.observe(self._on_view, names="value")
        self.reload()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- reading -------------------------------------------------------------------
    def source_list(self) -> list[str]:
        return _split(self.sources.value)

    def add_source(self, path: str | os.PathLike) -> None:
        """Show runs from ``path`` too (reloads)."""
        path = str(path)
        current = self.source_list()
        if path not in current and str(Path(path).resolve()) not in {str(Path(p).resolve()) for p in current}:
            self.sources.value = ", ".join(current + [path])  # the observer reloads
        else:
            self.reload()

    def reload(self) -> None:
        """Read the runs under the data directories again and refresh every choice."""
        from iolab.report import notebooks as report
        notes, usable = [], []
        for source in self.source_list():
            if not Path(source).exists():
                notes.append(f"{source}: does not exist (skipped)")
                continue
            try:
                found = store.run_dirs(source)
            except IolabError as exc:
                notes.append(str(exc))
                continue
            if not found:
                notes.append(f"{source}: no runs (skipped)")
                continue
            usable.append(source)
        self.selection = None
        if usable:
            try:
                self.selection = report.select(runs=usable, with_results=True)
            except IolabError as exc:
                notes.append(str(exc))
        with self._hold():
            manifests = self.selection.manifests if self.selection is not None else pd.DataFrame()
            hosts = sorted(dict.fromkeys(manifests["host"].astype(str))) if not manifests.empty else []
            labels = sorted(dict.fromkeys(manifests["label"].astype(str))) if not manifests.empty else []
            chosen_hosts, chosen_labels = self.hosts.value, self.labels.value
            self.hosts.options = hosts
            self.hosts.value = tuple(h for h in chosen_hosts if h in hosts)
            self.labels.options = labels
            self.labels.value = tuple(lab for lab in chosen_labels if lab in labels)
            self._update_recipes()
        if self.selection is None:
            notes.append("no runs with results to show: set Data to a directory of runs (e.g. data or "
                         "tests/fixtures/data) and press Reload")
        self._notes = notes
        self.refresh()

    @contextlib.contextmanager
    def _hold(self):
        """Change several controls without a redraw for each."""
        before, self._quiet = self._quiet, True
        try:
            yield
        finally:
            self._quiet = before

    def _filtered(self) -> pd.DataFrame:
        if self.selection is None:
            return pd.DataFrame()
        results = self.selection.results
        if self.hosts.value:
            results = results[results["host"].astype(str).isin(self.hosts.value)]
        if self.labels.value:
            results = results[results["label"].astype(str).isin(self.labels.value)]
        return results

    def _update_recipes(self) -> None:
        results = self._filtered()
        names = list(dict.fromkeys(results["recipe"].astype(str))) if not results.empty else []
        current = self.recipe.value
        self.recipe.options = names
        wanted = self._wanted_recipe if self._wanted_recipe in names else current if current in names else None
        self.recipe.value = wanted if wanted is not None else (names[0] if names else None)
        self._wanted_recipe = None

    def _on_filter(self, change) -> None:
        if self._quiet:
            return
        with self._hold():
            self._update_recipes()
        self.refresh()

    def _on_view(self, change) -> None:
        if not self._quiet:
            self.refresh()

    # -- drawing -------------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw chart, table and findings for the current choices."""
        from matplotlib.figure import Figure

        from iolab.report import commentary, i18n, plot, tables
        notes = list(getattr(self, "_notes", []))
        data = self._filtered()
        if self.recipe.value is not None and not data.empty:
            data = data[data["recipe"].astype(str) == self.recipe.value]
        self.data = data
        self.renders += 1
        if data.empty:
            self.summary, self.axes, self.views = pd.DataFrame(), None, []
            self.message.value = "<br>".join(html.escape(n) for n in notes) or "No results for these choices."
            for output in (self.chart, self.table, self.findings):
                _show(output)
            return
        metric, hue, statistic, lang = self.metric.value, self.hue.value, self.statistic.value, self.lang
        try:
            summary = tables.summarize(data, value=metric, system=hue, statistic=statistic)
        except IolabError as exc:
            self.message.value = _error_html(str(exc))
            return
        summary["system"] = summary["system"].astype(str)
        summary["x"] = [i18n.test_label(t, d, lang) for t, d in zip(summary["test"], summary["direction"])]
        self.summary = summary
        unit = tables.metric_unit(metric)
        caption = tables.caption_for(metric, unit, lang)
        figure = Figure(figsize=(10, 4))
        ax = figure.subplots()
        plotted = summary.dropna(subset=["value"])
        plot.bars(plotted, x="x", y="value", hue="system", low="ci_low", high="ci_high", ax=ax, xlabel="",
                  ylabel=caption, legend_title=HUES[hue], title=f"{self.recipe.value}: {statistic}")
        self.axes = ax
        runs = data["run_id"].nunique()
        self.message.value = html.escape(
            f"{runs} run(s) of {self.recipe.value}; {len(summary)} bars, one per test and "
            f"{HUES[hue].lower()} ({summary['system'].nunique()})"
            + (f" — {'; '.join(notes)}" if notes else ""))
        table = tables.pivot(summary, lang=lang, caption=f"{self.recipe.value}: {caption}")
        try:
            text = commentary.describe(summary, lang=lang)
        except IolabError as exc:
            text = f"(no findings: {exc})"
        # the runs shown: each failed test with fio's reason, the tests never reached, each emulated test against
        # its ceiling -- the same sentences as the compare notebook's
        from iolab.report import ceilings, failures
        shown = self.selection.manifests[self.selection.manifests["run_id"].isin(set(data["run_id"]))]
        extra = [failures.coverage_markdown(shown, lang=lang, names=shown["system_name"], level=4),
                 ceilings.markdown(data, shown, lang=lang)]
        text = "\n\n".join([text, *(e for e in extra if e)])
        self.views = [_png(figure), _html(table._repr_html_()), _markdown("**Findings**\n\n" + text)]
        for output, view in zip((self.chart, self.table, self.findings), self.views):
            _show(output, view)

    def describe(self) -> str:
        """What is shown, in one line (for notebooks and tests)."""
        if self.summary.empty:  # say why: a missing data directory, no runs, no results
            notes = getattr(self, "_notes", None) or []
            return "nothing shown" + (": " + "; ".join(notes) if notes else "")
        systems = ", ".join(dict.fromkeys(self.summary["system"]))
        return f"{self.recipe.value} | {self.metric.value} by {self.hue.value} ({self.statistic.value}) | {systems}"


# ---------------------------------------------------------------------------
# both together


class Explore:
    """The Explorer and the RunPanel in tabs; a finished run shows up in the Explorer."""

    def __init__(self, explorer: Explorer, panel: RunPanel):
        w = _ipywidgets()
        self.explorer, self.panel = explorer, panel
        self.widget = w.Tab(children=[explorer.widget, panel.widget])
        self.widget.set_title(0, "Explore runs")
        self.widget.set_title(1, "Run a benchmark")
        previous = panel.on_finished

        def finished(result):
            if previous is not None:
                previous(result)
            # the store holding the new run joins the Explorer's sources (and the Explorer reloads)
            self.explorer.add_source(panel.data_dir.value.strip() or "data")
        panel.on_finished = finished

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def explore(data_dir: Sequence[str | os.PathLike] | str = ("data",), *, run_data_dir: str | os.PathLike = "data",
            recipe: str | None = None, metric: str = "bw_mbps", hue: str = "system", statistic: str = "mean",
            lang: str = "en", target: str = "", run_recipe: str = "quick", threaded: bool = True) -> Explore:
    """The exploration UI: :class:`Explorer` over ``data_dir`` plus a :class:`RunPanel` storing in ``run_data_dir``."""
    explorer = Explorer(data_dir, recipe=recipe, metric=metric, hue=hue, statistic=statistic, lang=lang)
    panel = RunPanel(run_data_dir, target=target, recipe=run_recipe, threaded=threaded)
    return Explore(explorer, panel)
