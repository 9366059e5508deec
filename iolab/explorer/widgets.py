"""Interactive exploration in JupyterLab (ipywidgets): choose runs and views, render the report, run a benchmark.

* :class:`Explorer` — data directories, hosts, labels, recipe, tests, metric, hue, statistic, scale (auto,
  linear, log), the recipe's own views (Bonnie++'s and tiobench's tables, queue-depth curves...:
  :mod:`iolab.explorer.views`), a published article's figures beside the runs shown, the language of every
  control and text (en, ja), and **Render the report** (the HTML report of the runs shown). The chart, the
  table and the findings follow every choice. Reads stored runs only (no root, no fio: Binder works).
* :class:`~iolab.explorer.runpanel.RunPanel` (in its own module, reachable here) — target, recipe, isolation,
  label, size, runtime, repeat, tests, **Start** and **Stop**. The benchmark runs in a background thread (the
  notebook stays usable), a progress bar follows the run directory's manifest, errors are shown in the panel,
  never raised.
* :func:`explore` — both in tabs, wired so that a finished run appears in the Explorer and the language
  chosen applies to both; what ``notebooks/explore.ipynb`` displays.

ipywidgets is imported in one place (:mod:`iolab.explorer.widgetkit`), only when a widget is built. Outputs are filled with ``Output.append_display_data`` (PNG figures drawn on a private matplotlib
``Figure`` or closed once drawn, HTML tables, Markdown), so the widgets work the same in a kernel, from a
background thread and headless in tests; what each view shows is kept on the object (``summary``, ``axes``,
``section``, ``overlay``, ``report``). Every visible string is in the locale's ``explorer`` section.
"""
from __future__ import annotations

import contextlib
import html
import logging
import os
import threading
from pathlib import Path
from typing import Sequence

import pandas as pd

from iolab.engine import store
from iolab.core.errors import IolabError
from iolab.explorer import views
from iolab.report import i18n
from iolab.explorer.runpanel import RunPanel
from iolab.explorer.widgetkit import (
    check_choice, error_html, html_view, ipywidgets_module, markdown, png, set_options, show, split_list)

log = logging.getLogger(__name__)

_t = i18n.scoped("explorer")

#: Metrics offered by the Explorer (their labels: :func:`iolab.report.tables.caption_for`).
METRICS = ("bw_mbps", "iops", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us")
#: What the bars are coloured by (one bar per value of this column): its label's key in ``labels``.
HUES = {h: h for h in ("system", "host", "label", "target", "isolation", "run_id")}
STATISTICS = ("mean", "median", "best")
#: The value axis: as the chart decides (log past a 100x spread), or always linear, or always log.
SCALES = ("auto", "linear", "log")
LANGUAGES = (("English", "en"), ("日本語", "ja"))


# ---------------------------------------------------------------------------
# exploring stored runs


class Explorer:
    """Choose runs, recipe, tests, view, metric, hue, scale, article and language; what is shown follows.

    ``sources``: data directories (or run directories); those that do not exist or hold no runs are skipped
    with a note, so a list like ``["../data", "../tests/fixtures/data"]`` works everywhere. ``report_dir``: where
    **Render the report** writes (a new time-stamped directory each time).
    """

    def __init__(self, sources: Sequence[str | os.PathLike] | str = ("data",), *, recipe: str | None = None,
                 metric: str = "bw_mbps", hue: str = "system", statistic: str = "mean", lang: str = "en",
                 scale: str = "auto", view: str = views.BARS, reference: str = "",
                 report_dir: str | os.PathLike = "reports", threaded: bool = True):
        w = ipywidgets_module()
        from iolab.report import plot
        i18n.check_lang(lang)
        check_choice(metric, METRICS, "metric")
        check_choice(hue, HUES, "hue")
        check_choice(statistic, STATISTICS, "statistic")
        check_choice(scale, SCALES, "scale")
        plot.setup(lang)
        self.lang = lang
        sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
        wide = {"description_width": "7em"}
        self.sources = w.Text(value=", ".join(str(s) for s in sources), style=wide, continuous_update=False,
                              layout=w.Layout(width="60%"))
        self.reload_button = w.Button(icon="refresh")
        self.hosts = w.SelectMultiple(rows=4, style=wide)
        self.labels = w.SelectMultiple(rows=4, style=wide)
        self.tests = w.SelectMultiple(rows=4, style=wide)
        self.recipe = w.Dropdown(style=wide)
        self.view = w.Dropdown(options=[("", views.BARS)], value=views.BARS, style=wide)
        self.metric = w.Dropdown(options=list(METRICS), value=metric, style=wide)
        self.hue = w.Dropdown(options=list(HUES), value=hue, style=wide)
        self.statistic = w.Dropdown(options=list(STATISTICS), value=statistic, style=wide)
        self.scale = w.ToggleButtons(options=list(SCALES), value=scale, style={"button_width": "6em",
                                                                                **wide})
        self.language = w.Dropdown(options=list(LANGUAGES), value=lang, style=wide)
        self.reference = w.Dropdown(options=[("", "")], value="", style=wide, layout=w.Layout(width="60%"))
        self.render_button = w.Button(icon="file")
        self.render_status = w.HTML()
        self.message = w.HTML()
        self.chart = w.Output()
        self.overlay_output = w.Output()
        self.table = w.Output()
        self.findings = w.Output()
        self.widget = w.VBox([
            w.HBox([self.sources, self.reload_button]),
            w.HBox([self.hosts, self.labels, self.tests]),
            w.HBox([self.recipe, self.view]),
            w.HBox([self.metric, self.hue]),
            w.HBox([self.statistic, self.scale]),
            w.HBox([self.language, self.reference]),
            w.HBox([self.render_button, self.render_status]),
            self.message, self.chart, self.overlay_output, self.table, self.findings])
        #: what is shown: the selection read, the rows plotted, the summary behind the bars, the section or
        #: article overlay shown, the last report rendered
        self.selection = None
        self.data = pd.DataFrame()
        self.summary = pd.DataFrame()
        self.axes = None
        self.section = None
        self.overlay = None
        self.report = None
        self.render_error: str | None = None
        #: the chart (PNG), table (HTML) and findings (Markdown) last shown, for display without widgets
        self.views: list = []
        self.renders = 0
        self.threaded = threaded
        self.report_dir = Path(report_dir)
        self._quiet = False
        self._notes: list = []
        self._idle = threading.Event()  # no report being rendered
        self._idle.set()
        self._wanted_recipe, self._wanted_view, self._wanted_reference = recipe, view, reference
        with self._hold():
            self._relabel()
        self.reload_button.on_click(lambda _: self.reload())
        self.render_button.on_click(lambda _: self.render())
        self.sources.observe(lambda change: self.reload(), names="value")
        for control in (self.hosts, self.labels):
            control.observe(self._on_filter, names="value")
        self.recipe.observe(self._on_recipe, names="value")
        for control in (self.tests, self.view, self.metric, self.hue, self.statistic, self.scale, self.reference):
            control.observe(self._on_view, names="value")
        self.language.observe(lambda change: self.set_lang(change["new"]), names="value")
        self.reload()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- language --------------------------------------------------------------------
    def set_lang(self, lang: str) -> None:
        """Every control, chart and text in ``lang`` (what the Language chooser does)."""
        from iolab.report import plot
        i18n.check_lang(lang)
        self.lang = lang
        plot.setup(lang)
        with self._hold():
            self.language.value = lang
            self._relabel()
        self.reload()  # the systems named in the language too (report.select), then refreshed

    def _relabel(self) -> None:
        """The controls' descriptions, hints and option labels in the current language (values kept)."""
        from iolab.report import tables
        lang = self.lang
        for control, key in ((self.sources, "data"), (self.hosts, "hosts"), (self.labels, "labels"),
                             (self.tests, "tests"), (self.recipe, "recipe"), (self.view, "view"),
                             (self.metric, "metric"), (self.hue, "bars_by"), (self.statistic, "statistic"),
                             (self.scale, "scale"), (self.language, "language"), (self.reference, "reference")):
            control.description = _t(key, lang)
        self.sources.placeholder = _t("data_placeholder", lang)
        self.reload_button.description, self.reload_button.tooltip = _t("reload", lang), _t("reload_tooltip", lang)
        for control in (self.hosts, self.labels, self.tests):
            control.tooltip = _t("filter_tooltip", lang)
        self.render_button.description, self.render_button.tooltip = _t("render", lang), _t("render_tooltip", lang)
        set_options(self.metric, [(tables.caption_for(m, tables.metric_unit(m), lang), m) for m in METRICS])
        set_options(self.hue, [(i18n.text(f"labels.{k}", lang), h) for h, k in HUES.items()])
        set_options(self.statistic, [(i18n.text(f"labels.{s}", lang), s) for s in STATISTICS])
        set_options(self.scale, [(_t(f"scale_{s}", lang), s) for s in SCALES])
        wanted = self._wanted_reference if self._wanted_reference is not None else self.reference.value
        set_options(self.reference, [(_t("reference_none", lang), "")] + views.articles(lang))
        self.reference.value = wanted if wanted in {v for _, v in self.reference.options} else ""
        self._wanted_reference = None
        self._update_tests_and_views()

    # -- reading -------------------------------------------------------------------
    def source_list(self) -> list[str]:
        return split_list(self.sources.value)

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
        from iolab.report import notebooks as report, palette
        notes, usable, before = [], [], getattr(self.selection, "results", None)
        for source in self.source_list():
            if not Path(source).exists():
                notes.append(("missing", {"source": source}))
                continue
            try:
                found = store.run_dirs(source)
            except IolabError as exc:
                notes.append((None, {"text": str(exc)}))
                continue
            if not found:
                notes.append(("empty", {"source": source}))
                continue
            usable.append(source)
        self.selection = None
        if usable:
            try:
                self.selection = report.select(runs=usable, with_results=True, lang=self.lang)  # named as the page
            except IolabError as exc:
                notes.append((None, {"text": str(exc)}))
        palette.carry(before, getattr(self.selection, "results", None))  # renamed (a language): colours kept
        with self._hold():
            manifests = self.selection.manifests if self.selection is not None else pd.DataFrame()
            for control, column in ((self.hosts, "host"), (self.labels, "label")):
                set_options(control, sorted(set(manifests[column].astype(str))) if not manifests.empty else [])
            self._update_recipes()
        if self.selection is None:
            notes.append(("no_runs", {}))
        self._notes = notes
        self.refresh()

    def notes(self) -> list[str]:
        """What reading the data directories had to say, in the current language."""
        return [_t(key, self.lang, **fields) if key else fields["text"] for key, fields in self._notes]

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

    def _recipe_rows(self) -> pd.DataFrame:
        data = self._filtered()
        if self.recipe.value is not None and not data.empty:
            data = data[data["recipe"].astype(str) == self.recipe.value]
        return data

    def _update_recipes(self) -> None:
        results = self._filtered()
        names = list(dict.fromkeys(results["recipe"].astype(str))) if not results.empty else []
        current = self.recipe.value
        self.recipe.options = names
        wanted = self._wanted_recipe if self._wanted_recipe in names else current if current in names else None
        self.recipe.value = wanted if wanted is not None else (names[0] if names else None)
        self._wanted_recipe = None
        self._update_tests_and_views()

    def _update_tests_and_views(self) -> None:
        """The test picker and the views offered follow the recipe's rows (choices kept where still offered)."""
        data = self._recipe_rows()
        tests = list(dict.fromkeys(data["test"].astype(str))) if not data.empty else []
        set_options(self.tests, [(i18n.label(t, self.lang, section="tests"), t) for t in tests])
        offered = views.views(data)
        wanted = self._wanted_view if self._wanted_view in offered else self.view.value
        set_options(self.view, [(views.view_label(v, self.lang), v) for v in offered])
        self.view.value = wanted if wanted in offered else views.BARS
        if self._wanted_view in offered:
            self._wanted_view = None

    def _on_filter(self, change) -> None:
        if self._quiet:
            return
        with self._hold():
            self._update_recipes()
        self.refresh()

    def _on_recipe(self, change) -> None:
        if self._quiet:
            return
        with self._hold():
            self._update_tests_and_views()
        self.refresh()

    def _on_view(self, change) -> None:
        if not self._quiet:
            self.refresh()

    # -- drawing -------------------------------------------------------------------
    def _log_scale(self) -> bool | None:
        return {"auto": None, "linear": False, "log": True}[self.scale.value]

    def shown_rows(self) -> pd.DataFrame:
        """The rows behind the view: the filters, the recipe and the tests picked (none picked: all)."""
        data = self._recipe_rows()
        if self.tests.value and not data.empty:
            data = data[data["test"].astype(str).isin(self.tests.value)]
        return data

    def shown_manifests(self) -> pd.DataFrame:
        if self.selection is None or self.data.empty:
            return pd.DataFrame()
        manifests = self.selection.manifests
        return manifests[manifests["run_id"].isin(set(self.data["run_id"]))]

    def refresh(self) -> None:
        """Redraw chart, article overlay, table and findings for the current choices."""
        notes = self.notes()
        data = self.shown_rows()
        self.data = data
        self.renders += 1
        self.summary, self.axes, self.section, self.views = pd.DataFrame(), None, None, []
        if data.empty:
            self.message.value = "<br>".join(html.escape(n) for n in notes) or html.escape(_t("no_results", self.lang))
            for output in (self.chart, self.table, self.findings):
                show(output)
        else:
            try:
                if self.view.value == views.BARS:
                    text = self._draw_bars(data)
                else:
                    text = self._draw_section(data)
            except IolabError as exc:
                self.message.value = error_html(str(exc), self.lang)
                text = None
            if text is not None:
                self.message.value = html.escape(text + (f" — {'; '.join(notes)}" if notes else ""))
        self._draw_overlay(data)

    def _findings_heading(self) -> str:
        return f"**{i18n.text('headings.commentary', self.lang)}**\n\n"

    def _draw_bars(self, data: pd.DataFrame) -> str:
        from matplotlib.figure import Figure

        from iolab.report import ceilings, failures, narrative, plot, tables
        metric, hue, statistic, lang = self.metric.value, self.hue.value, self.statistic.value, self.lang
        summary = tables.summarize(data, value=metric, system=hue, statistic=statistic)
        summary["system"] = summary["system"].astype(str)
        summary["x"] = [i18n.test_label(t, d, lang) for t, d in zip(summary["test"], summary["direction"])]
        self.summary = summary
        caption = tables.caption_for(metric, tables.metric_unit(metric), lang)
        hue_label = i18n.text(f"labels.{HUES[hue]}", lang)
        figure = Figure(figsize=(10, 4))
        ax = figure.subplots()
        scale = self._log_scale()
        plot.bars(summary.dropna(subset=["value"]), x="x", y="value", hue="system", low="ci_low", high="ci_high",
                  ax=ax, xlabel="", ylabel=caption, legend_title=hue_label,
                  log="auto" if scale is None else scale,
                  title=f"{self.recipe.value}{i18n.colon(lang)}{i18n.text(f'labels.{statistic}', lang)}")
        plot.tight(figure)
        self.axes = ax
        table = tables.pivot(summary, lang=lang, caption=f"{self.recipe.value}{i18n.colon(lang)}{caption}")
        try:
            text = narrative.describe(summary, lang=lang)  # the compare report's own wording
        except IolabError as exc:
            text = _t("no_findings", lang, error=str(exc))
        # the runs shown: each failed test with fio's reason, the tests never reached, each emulated test
        # against its ceiling -- the same sentences as the compare notebook's
        shown = self.shown_manifests()
        extra = [failures.coverage_markdown(shown, lang=lang, names=shown["system_name"], level=4),
                 ceilings.markdown(data, shown, lang=lang)]
        text = "\n\n".join([text, *(e for e in extra if e)])
        self.views = [png(figure), html_view(table._repr_html_()), markdown(self._findings_heading() + text)]
        for output, view in zip((self.chart, self.table, self.findings), self.views):
            show(output, view)
        return _t("shown", lang, runs=data["run_id"].nunique(), recipe=self.recipe.value, bars=len(summary),
                  hue=hue_label.lower() if lang == "en" else hue_label, n=summary["system"].nunique())

    def _draw_section(self, data: pd.DataFrame) -> str:
        """A recipe's own view (its section of the report): its figures, tables and findings."""
        lang, view = self.lang, self.view.value
        label = views.view_label(view, lang)
        section = views.section(data, view, lang=lang, context=self.selection.results)
        self.section = section
        if section is None:
            for output in (self.chart, self.table, self.findings):
                show(output)
            return _t("no_view", lang, view=label)
        images = []
        for fig in section.figures:
            views.apply_scale(fig.figure, self._log_scale())
            images.append(png(fig.figure))
        self.axes = section.figures[0].axes[0] if section.figures else None
        section.close()
        tables_html = [html_view(t._repr_html_()) for t in section.tables]
        text = section.findings + ("\n\n" + section.caveats_markdown() if section.caveats else "")
        self.views = images + tables_html + ([markdown(self._findings_heading() + text)] if text.strip() else [])
        show(self.chart, markdown(f"#### {section.title}"), *images)
        show(self.table, *tables_html)
        show(self.findings, *self.views[len(images) + len(tables_html):])
        return _t("shown_view", lang, runs=data["run_id"].nunique(), recipe=self.recipe.value, view=label)

    def _draw_overlay(self, data: pd.DataFrame) -> None:
        """The chosen article's figures, with the runs shown beside them where the article has their tests."""
        self.overlay = None
        article = self.reference.value
        if not article:
            show(self.overlay_output)
            return
        try:
            self.overlay, shown = views.overlay_outputs(article, data, self.shown_manifests(), lang=self.lang,
                                                                log_scale=self._log_scale())
        except IolabError as exc:
            shown = [html_view(error_html(str(exc), self.lang))]
        show(self.overlay_output, *shown)

    def describe(self) -> str:
        """What is shown, in one line (for notebooks and tests)."""
        if self.section is not None:
            systems = ", ".join(dict.fromkeys(self.data["system"].astype(str)))
            return f"{self.recipe.value} | {self.view.value} | {systems}"
        if self.summary.empty:  # say why: a missing data directory, no runs, no results
            notes = self.notes()
            return "nothing shown" + (": " + "; ".join(notes) if notes else "")
        systems = ", ".join(dict.fromkeys(self.summary["system"]))
        return f"{self.recipe.value} | {self.metric.value} by {self.hue.value} ({self.statistic.value}) | {systems}"

    # -- the report ----------------------------------------------------------------
    @property
    def rendering(self) -> bool:
        return not self._idle.is_set()

    def render(self) -> None:
        """Write the HTML report of the runs shown (beside the chosen article): the Render button.
        Runs in a thread when the Explorer is threaded; :meth:`wait_render` waits for it."""
        if self.rendering:
            return
        runs = list(dict.fromkeys(self.shown_manifests().get("run_dir", pd.Series(dtype=str)).astype(str)))
        if not runs:
            self.render_status.value = error_html(_t("render_nothing", self.lang), self.lang)
            return
        self._idle.clear()
        self.render_button.disabled = True
        self.report, self.render_error = None, None
        self.render_status.value = html.escape(_t("rendering", self.lang, runs=len(runs)))
        args = (runs, self.lang, self.reference.value or None)
        if self.threaded:
            threading.Thread(target=self._render, args=args, name="iolab-render", daemon=True).start()
        else:
            self._render(*args)

    def _render(self, runs, lang, article) -> None:
        from iolab.report import notebooks
        try:
            self.report = views.render(runs, lang=lang, reference=article,
                                               out=notebooks.default_out_dir(self.report_dir))
            self.render_status.value = html.escape(_t("rendered", lang, path=str(self.report.html)))
        except IolabError as exc:
            self.render_error = str(exc)
            self.render_status.value = error_html(str(exc), lang)
        except Exception as exc:  # shown beside the button: a widget callback must not raise into the kernel
            log.exception("rendering the report failed")
            self.render_error = repr(exc)
            self.render_status.value = error_html(i18n.text("explorer.panel.internal", lang, error=repr(exc)), lang)
        finally:
            self.render_button.disabled = False
            self._idle.set()

    def wait_render(self, timeout: float | None = None) -> bool:
        """Wait for a report being rendered; True when none is (any more)."""
        return self._idle.wait(timeout)

# ---------------------------------------------------------------------------
# both together


class Explore:
    """The Explorer and the RunPanel in tabs; a finished run shows up in the Explorer, the language in both."""

    def __init__(self, explorer: Explorer, panel: RunPanel):
        w = ipywidgets_module()
        self.explorer, self.panel = explorer, panel
        self.widget = w.Tab(children=[explorer.widget, panel.widget])
        self._titles()
        previous = panel.on_finished

        def finished(result):
            if previous is not None:
                previous(result)
            # the store holding the new run joins the Explorer's sources (and the Explorer reloads)
            self.explorer.add_source(panel.data_dir.value.strip() or "data")
        panel.on_finished = finished
        panel.set_lang(explorer.lang)
        explorer.language.observe(lambda change: self._language(change["new"]), names="value")

    def _titles(self) -> None:
        lang = self.explorer.lang
        self.widget.set_title(0, _t("tab_explore", lang))
        self.widget.set_title(1, _t("tab_run", lang))

    def _language(self, lang: str) -> None:
        self.panel.set_lang(lang)
        self._titles()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def explore(data_dir: Sequence[str | os.PathLike] | str = ("data",), *, run_data_dir: str | os.PathLike = "data",
            recipe: str | None = None, metric: str = "bw_mbps", hue: str = "system", statistic: str = "mean",
            lang: str = "en", scale: str = "auto", view: str = views.BARS, reference: str = "",
            report_dir: str | os.PathLike = "reports", target: str = "", run_recipe: str = "quick",
            threaded: bool = True) -> Explore:
    """The exploration UI: :class:`Explorer` over ``data_dir`` plus a :class:`RunPanel` storing in ``run_data_dir``."""
    explorer = Explorer(data_dir, recipe=recipe, metric=metric, hue=hue, statistic=statistic, lang=lang,
                        scale=scale, view=view, reference=reference, report_dir=report_dir, threaded=threaded)
    panel = RunPanel(run_data_dir, target=target, recipe=run_recipe, threaded=threaded, lang=lang)
    return Explore(explorer, panel)
