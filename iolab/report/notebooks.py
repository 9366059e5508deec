"""Reports: pick runs, execute a notebook with papermill, export HTML and Markdown.

* :func:`select` reads run directories into a :class:`Selection` (results with
  a ``system`` column naming each run, and the manifests) — what the notebooks
  start from;
* :func:`execute` runs a notebook with parameters (papermill); on failure the
  executed notebook is kept and an :class:`IolabError` names it;
* :func:`export_html` writes one self-contained HTML file: no code cells,
  images embedded as ``data:`` URIs, no external scripts (opens offline);
* :func:`export_markdown` writes Markdown with the figures as files beside it;
* :func:`render` does all three; :func:`report` is what ``iolab report`` calls.

Nothing here prints: progress goes to :mod:`logging`.
"""
from __future__ import annotations

import base64
import copy
import datetime as _dt
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from iolab.report import i18n, tables
from iolab.engine import store
from iolab.core import paths
from iolab.core.errors import IolabError
from iolab.core.notebook_execution import KERNEL, execute  # noqa: F401  (the one papermill executor, used here and by batch runs)

log = logging.getLogger(__name__)

#: Notebooks ``render`` knows by name (files in :func:`notebook_dir`).
NOTEBOOKS = {"report": "report.ipynb", "compare": "compare.ipynb"}

#: The HTML template: JupyterLab's, minus everything fetched from the network
#: (require.js, MathJax, mermaid and widget managers come from CDNs).
_HTML_TEMPLATE = ("""{%- extends "lab/index.html.j2" -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
 alt="{{ (output | get_metadata('alt', 'image/png')) or 'figure' | escape_html }}">
</div>
{%- endblock data_png %}
{% block extra_css %}
<style type="text/css">
  body { max-width: 72rem; margin: 0 auto; padding: 1rem 2rem; }
  /* Latin fonts first, then the CJK fonts of each platform, so Japanese never falls back to boxes */
  body, .jp-RenderedHTMLCommon, .jp-RenderedHTMLCommon table.iolab-table {
      font-family: system-ui, -apple-system, "Segoe UI", "Helvetica Neue", Arial, "Noto Sans",
          "Hiragino Sans", "Hiragino Kaku Gothic ProN", "Yu Gothic", "Meiryo", "Noto Sans CJK JP",
          "Noto Sans JP", "IPAexGothic", "IPAGothic", "TakaoGothic", sans-serif; }
  /* Japanese pages: the Japanese font first, whose Latin letters then share its design and weights, so a bold
     "CPU" beside regular kana ("CPUスレッド数") cannot happen; kinsoku line breaking (no small kana or closing
     bracket at a line's start) */
  html:lang(ja) body, html:lang(ja) .jp-RenderedHTMLCommon, html:lang(ja) .jp-RenderedHTMLCommon table.iolab-table {
      font-family: "Hiragino Sans", "Hiragino Kaku Gothic ProN", "Yu Gothic", "Meiryo", "Noto Sans CJK JP",
          "Noto Sans JP", "IPAexGothic", "IPAGothic", "TakaoGothic", system-ui, sans-serif; line-break: strict; }
  .jp-RenderedHTMLCommon table.iolab-table { font-size: 0.9em; margin: 0.5em 0 0.2em 0; }
  .jp-RenderedHTMLCommon table.iolab-table caption { caption-side: top; text-align: left;
      font-weight: bold; padding-bottom: 0.3em; color: var(--jp-ui-font-color1); }
  /* cells keep one line while the table fits the page; a table wider than the page (six runs'
     settings) wraps its text at spaces and hyphens instead of running past the page's edge */
  .jp-RenderedHTMLCommon table.iolab-table td { font-variant-numeric: tabular-nums; white-space: normal; }
  .jp-RenderedHTMLCommon table.iolab-table th { white-space: normal; word-break: keep-all; } /* not 「エミュレー」/「ト）」 */
  /* a row's label on one line ("ファイルシステム", not "ファイルシス" / "テム"); bold as every bold text is */
  .jp-RenderedHTMLCommon table.iolab-table tbody td:first-child { text-align: left; font-weight: bold;
      white-space: nowrap; }
  /* row labels and the headings over them flush left ("テスト" was set right, over left-aligned labels) */
  .jp-RenderedHTMLCommon table.iolab-table thead th:first-child,
  .jp-RenderedHTMLCommon table.iolab-labels-2 :is(thead th, tbody td):nth-child(2),
  .jp-RenderedHTMLCommon table.iolab-labels-3 :is(thead th, tbody td):nth-child(-n+3) { text-align: left; white-space: nowrap; }
  p.iolab-note { margin-top: 0.1em; color: var(--jp-ui-font-color2); }
</style>
{% endblock extra_css %}
""")


#: Markdown: figures as files, with their alt text.
_MD_TEMPLATE = """{%- extends "markdown/index.md.j2" -%}
{% block data_png %}
![{{ (output | get_metadata('alt', 'image/png')) or 'figure' }}]({{ output.metadata.filenames['image/png'] | path2url }})
{% endblock data_png %}
"""

# ---------------------------------------------------------------------------
# selecting runs


@dataclass
class Selection:
    """Runs chosen for a report.

    ``results``: one row per test x repetition x direction (contract columns,
    plus ``run_dir`` and ``system``, the run's column name in tables, with
    `` · <target>`` added for runs on several targets);
    ``manifests``: one row per run (including runs without results), the
    manifest's fields plus ``run_dir``, ``system_name`` (the same name) and
    ``has_results``.
    """
    results: pd.DataFrame
    manifests: pd.DataFrame
    sources: list[str] = field(default_factory=list)

    @property
    def recipes(self) -> list[str]:
        return list(dict.fromkeys(self.results["recipe"].astype(str))) if not self.results.empty else []

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(self.results["system"].astype(str))) if not self.results.empty else []

    def for_recipe(self, recipe: str) -> "Selection":
        results = self.results[self.results["recipe"] == recipe]
        manifests = self.manifests[self.manifests["run_id"].isin(set(results["run_id"]))]
        return Selection(results.reset_index(drop=True), manifests.reset_index(drop=True), self.sources)


def _as_list(value) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value if v is not None and str(v) != ""]


#: how a run names an emulated device in its label, the kit's ways: ``emulated hdd`` (tools/demo.sh gives it)
#: and ``HDD (emulated)``; the device's name is the group
_EMULATED_LABELS = (re.compile(r"^emulated (?P<name>\S.*)$"), re.compile(r"^(?P<name>.*\S) \(emulated\)$"))


def display_name(label: str, manifest: dict, lang: str = "en") -> str:
    """A run's label as a page in ``lang`` names it: an emulated device's label in the kit's wording
    (``emulated hdd``, ``HDD (emulated)``) in the page's language (``hdd（エミュレート）``) when every target of
    the run was emulated; any other label with the page's brackets (:func:`iolab.report.i18n.page_name`, the one
    bracket rule the article systems follow too: ``ssd (raid0)`` -> ``ssd（raid0）`` on a Japanese page), so
    tables, headings, chart legends and sentences all print it so; every label in English as the run gave it."""
    targets = manifest.get("targets") if isinstance(manifest.get("targets"), list) else []
    emulated = bool(targets) and all(isinstance(t, dict) and t.get("kind") == "emulated" for t in targets)
    if lang == "en":
        return label
    if emulated:
        for pattern in _EMULATED_LABELS:
            match = pattern.match(label)
            if match:
                # inside a name's own closing bracket (my hdd (r1) -> my hdd（r1、エミュレート）), never a second one
                return i18n.with_note(match.group("name"), i18n.text("system_names.emulated", lang), lang)
    return i18n.page_name(label, lang)


def system_names(manifests: pd.DataFrame, lang: str = "en") -> list[str]:
    """A column name per run: its label (:func:`display_name` in ``lang``), made unique within a recipe.

    Two runs of one recipe with the same label get the host added, then the
    run ID (``label @ host``, ``label @ host (run_id)``, in the page's brackets) so no two runs share a column.
    """
    names = [display_name(str(m.get("label") or m.get("host") or m.get("run_id")), m, lang)
             for m in manifests.to_dict("records")]
    recipes = manifests["recipe"].astype(str).tolist() if "recipe" in manifests else [""] * len(names)
    hosts = manifests["host"].astype(str).tolist() if "host" in manifests else [""] * len(names)
    run_ids = manifests["run_id"].astype(str).tolist() if "run_id" in manifests else [""] * len(names)
    for attempt in ("host", "run_id"):
        keys = list(zip(recipes, names))
        dup = {k for k in keys if keys.count(k) > 1}
        if not dup:
            break
        for i, key in enumerate(keys):
            if key in dup:
                # the run ID in the page's brackets ('db @ b (r2)', 'db @ b（r2）'), inside a name's own closing
                # bracket when it ends in one (i18n.with_note: never a second bracket right after the first)
                names[i] = (f"{names[i]} @ {hosts[i]}" if attempt == "host"
                            else i18n.with_note(names[i], run_ids[i], lang))
    return names


#: The host name of a fleet's aggregate runs and rows (iolab.fleet.inventory).
FLEET_HOST = "all"


def select(data_dir: str | os.PathLike | None = None, runs: Iterable[str | os.PathLike] = (), *,
           host=None, label=None, recipe=None, with_results: bool = False,
           aggregates: bool = True, lang: str = "en") -> Selection:
    """Read the runs under ``runs`` (run directories or directories of runs), else under ``data_dir``.

    ``host``, ``label`` and ``recipe`` (a string or a list) keep matching runs
    only. ``with_results`` drops runs that measured nothing. ``aggregates=False``
    leaves out a fleet's own runs (``data/_fleet/``, host ``all``): they sum the
    hosts that ran together and are no system of their own. ``lang``: the page's
    language, in which the systems are named (:func:`display_name`). Raises
    :class:`IolabError` naming the directory or the filter when nothing is found.
    """
    sources = _as_list(runs) or _as_list(data_dir)
    if not sources:
        raise IolabError("no run directory or data directory given", context="report")
    records, seen = [], set()
    for source in sources:
        if not store.run_dirs(source):  # raises for a missing path
            raise IolabError("no runs found (no manifest.json at or below it)", context=str(source))
        # a damaged manifest: refused when that run was named, else logged once and skipped
        for run_dir, manifest in store.readable_runs(source, named=True):
            if run_dir not in seen:
                seen.add(run_dir)
                records.append({**manifest, "run_dir": str(run_dir)})
    if not records:
        raise IolabError("no readable runs (every manifest.json is damaged)", context=", ".join(sources))
    manifests = pd.DataFrame(records)
    for column in ("run_id", "host", "label", "recipe", "status"):
        if column not in manifests.columns:
            manifests[column] = None
    if not aggregates:
        manifests = manifests[manifests["host"].astype(str) != FLEET_HOST]
    filters = {"host": _as_list(host), "label": _as_list(label), "recipe": _as_list(recipe)}
    for column, wanted in filters.items():
        if wanted:
            manifests = manifests[manifests[column].astype(str).isin(wanted)]
    if manifests.empty:
        described = ", ".join(f"{k}={'|'.join(v)}" for k, v in filters.items() if v)
        raise IolabError(f"no runs match {described}", context=", ".join(sources))
    frames = []
    for run_dir in manifests["run_dir"]:
        frame = store.load(run_dir)
        if not frame.empty:
            frames.append(frame)
    results = pd.concat(frames, ignore_index=True) if frames else store.load(manifests["run_dir"].iloc[0]).iloc[0:0]
    manifests = manifests.reset_index(drop=True)
    manifests["has_results"] = manifests["run_id"].isin(set(results["run_id"]))
    if with_results:
        manifests = manifests[manifests["has_results"]].reset_index(drop=True)
        if manifests.empty:
            raise IolabError("none of the selected runs has results", context=", ".join(sources))
    manifests["system_name"] = system_names(manifests, lang)
    names = dict(zip(manifests["run_id"], manifests["system_name"]))
    results = results[results["run_id"].isin(names)].copy()
    results["system"] = results["run_id"].map(names)
    if "target" in results.columns and not results.empty:
        # a run on several targets measured several systems: one column each
        targets = results.groupby("run_id")["target"].transform("nunique")
        several = targets > 1
        results.loc[several, "system"] = results.loc[several, "system"] + " · " + \
            results.loc[several, "target"].astype(str)
    return Selection(results.reset_index(drop=True), manifests, sources)


def recipe_statistic(run_dir: str | os.PathLike) -> str | None:
    """How the tool a run's recipe emulates combines its passes (``best`` for CrystalDiskMark, ``mean``,
    ``median``): the ``statistic`` the run's manifest recorded when the run was made.

    Runs made before the manifest recorded it (no ``statistic`` field) fall back to the recipe as it
    was run (``recipe.yaml`` in the run directory); None when neither says."""
    try:
        given = store.read_manifest(run_dir).get("statistic")
    except (OSError, ValueError, IolabError):
        given = None
    return str(given) if given else _statistic_of_recipe_yaml(run_dir)


def _statistic_of_recipe_yaml(run_dir) -> str | None:
    """The fallback for runs older than the manifest's ``statistic``: the recipe as run says it."""
    import yaml
    path = Path(run_dir) / "recipe.yaml"
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    value = recipe.get("statistic") if isinstance(recipe, dict) else None
    return str(value) if value else None


def run_statistics(manifests: pd.DataFrame) -> pd.Series:
    """Each selected run's statistic (:func:`recipe_statistic`) by ``run_id``: the manifest's field as
    :func:`select` read it, ``recipe.yaml`` for older runs, None where neither says."""
    values = {}
    for row in manifests.to_dict("records"):
        given = row.get("statistic")
        if isinstance(given, str) and given:
            values[row["run_id"]] = given
        else:
            values[row["run_id"]] = _statistic_of_recipe_yaml(row["run_dir"]) if row.get("run_dir") else None
    return pd.Series(values, dtype=object, name="statistic")


def tool_statistic(manifests: pd.DataFrame, lang: str = "en") -> tuple[str | None, str]:
    """The statistic the selected runs' tool reports, and what to say when they disagree.

    ``(statistic, "")`` when every run that records one records the same (None when none does);
    ``(None, note)`` when they differ: the note (Markdown in ``lang``) names each statistic and its
    systems (both sorted), and the tables then show every run by the report's own statistic, none
    picked silently.
    """
    by_run = run_statistics(manifests).dropna()
    found = sorted(set(by_run))
    if len(found) <= 1:
        return (found[0] if found else None), ""
    names = dict(zip(manifests["run_id"], manifests["system_name"] if "system_name" in manifests
                     else manifests["run_id"]))
    parts = [i18n.text("statistic.each", lang, statistic=i18n.label(value, lang, section="cdm_notes_statistics"),
                       systems=i18n.join(sorted({names[r] for r in by_run.index if by_run[r] == value}), lang))
             for value in found]
    return None, i18n.text("statistic.disagree", lang, each=i18n.join(parts, lang))


@dataclass(frozen=True)
class StatisticChoice:
    """Which statistic a recipe's tables and chart show (:func:`statistic_choice`)."""
    #: what the chart and the first table show: the tool's ``best`` (of ``passes``) or the report's own
    shown: str
    #: the statistic every selected run recorded, None when they disagree or none did
    tool: str | None
    #: the most passes one run made of one test
    passes: int
    #: the runs disagree on the statistic: said in the report's language ("" when they agree)
    note: str = ""


def statistic_choice(part: pd.DataFrame, manifests: pd.DataFrame, statistic: str, lang: str = "en") -> StatisticChoice:
    """The statistic a recipe's results ``part`` are shown by: the tool's own best-of-N first when every
    selected run (``manifests``) recorded ``best`` (CrystalDiskMark) and there were several passes,
    else the report's ``statistic``; runs that disagree are said to (:func:`tool_statistic`)."""
    tool, note = tool_statistic(manifests, lang)
    passes = int(part.groupby(["run_id", "test", "direction"])["rep"].nunique().max()) \
        if "rep" in part and not part.empty else 1
    shown = "best" if tool == "best" and passes > 1 else statistic
    return StatisticChoice(shown=shown, tool=tool, passes=passes, note=note)


# ---------------------------------------------------------------------------
# executing and exporting


def notebook_dir() -> Path:
    """The shipped ``notebooks/`` directory (``IOLAB_NOTEBOOKS`` overrides it)."""
    return paths.shipped("notebooks")


def notebook_path(name: str) -> Path:
    """A notebook by name (``report``, ``compare``) or path."""
    path = notebook_dir() / NOTEBOOKS[name] if name in NOTEBOOKS else Path(name)
    if not path.is_file():
        raise IolabError("notebook not found", context=str(path),
                         hint="known notebooks: " + ", ".join(NOTEBOOKS) + " (set IOLAB_NOTEBOOKS to their directory)")
    return path


def _for_export(nb):
    """A copy without stderr streams and without parameter cells (they stay in the .ipynb)."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & {"parameters", "injected-parameters", "remove-cell", "remove_cell"}:
            continue
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            if not cell.outputs:
                continue
        cells.append(cell)
    nb.cells = cells
    return nb


def _publish(path: Path) -> Path:
    """Reports are for reading: rw-r--r-- (the atomic writer creates files 0600)."""
    try:
        os.chmod(path, 0o644)
    except OSError:  # pragma: no cover - e.g. a file system without modes
        pass
    return path


def _read(notebook) -> "object":
    import nbformat
    try:
        return nbformat.read(str(notebook), as_version=4)
    except (OSError, ValueError) as exc:
        raise IolabError(f"unreadable notebook: {exc}", context=str(notebook)) from exc


def _title(nb, fallback: str) -> str:
    return str(nb.metadata.get("title") or nb.metadata.get("iolab", {}).get("title") or fallback)


def export_html(notebook: str | os.PathLike, html_path: str | os.PathLike) -> Path:
    """One self-contained HTML file: outputs only, images as data: URIs, no external scripts."""
    import jinja2
    from nbconvert import HTMLExporter

    nb = _for_export(_read(notebook))
    nb.metadata["title"] = _title(nb, Path(html_path).stem)
    lang = nb.metadata.get("iolab", {}).get("lang", "en")
    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"iolab_article.html.j2": _HTML_TEMPLATE})],
        template_file="iolab_article.html.j2", exclude_input=True, exclude_input_prompt=True,
        exclude_output_prompt=True, embed_images=True, theme="light", language_code=lang)
    body, _ = exporter.from_notebook_node(nb)
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write(html_path, body)
    return _publish(html_path)


def export_markdown(notebook: str | os.PathLike, md_path: str | os.PathLike) -> tuple[Path, list[Path]]:
    """Markdown (tables as pipe tables) with figures in ``<name>_files/`` beside it."""
    from nbconvert import MarkdownExporter

    md_path = Path(md_path)
    nb = _for_export(_read(notebook))
    import jinja2
    from traitlets.config import Config
    config = Config()
    # tables as Markdown pipe tables (iolab.report.tables.Table has both), not raw HTML
    config.NbConvertBase.display_data_priority = ["text/markdown", "image/svg+xml", "image/png", "image/jpeg",
                                                  "text/html", "text/latex", "text/plain"]
    exporter = MarkdownExporter(
        config=config, extra_loaders=[jinja2.DictLoader({"iolab_article.md.j2": _MD_TEMPLATE})],
        template_file="iolab_article.md.j2", exclude_input=True, exclude_input_prompt=True,
        exclude_output_prompt=True)
    files_dir = f"{md_path.stem}_files"
    body, resources = exporter.from_notebook_node(
        nb, resources={"output_files_dir": files_dir, "unique_key": md_path.stem})
    title = _title(nb, md_path.stem)
    if not body.lstrip().startswith("#"):
        body = f"# {title}\n\n{body}"
    md_path.parent.mkdir(parents=True, exist_ok=True)
    figures = []
    for name, data in (resources.get("outputs") or {}).items():
        target = md_path.parent / name
        if isinstance(data, str):
            data = base64.b64decode(data) if not name.endswith(".svg") else data.encode()
        store.atomic_write(target, data)
        figures.append(_publish(target))
    store.atomic_write(md_path, re.sub(r"\n{3,}", "\n\n", body))  # one blank line between blocks, as by hand
    return _publish(md_path), figures


@dataclass
class ReportFiles:
    """What :func:`render` wrote."""
    notebook: Path
    html: Path
    markdown: Path
    figures: list[Path]


def default_out_dir(root: str | os.PathLike = "reports") -> Path:
    """``reports/<UTC timestamp>/`` (a new directory each time)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = Path(root) / stamp
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{stamp}-{n}"
    return path


def render(notebook: str = "report", *, parameters: dict, out_dir: str | os.PathLike,
           basename: str | None = None, title: str | None = None, timeout: float = 600) -> ReportFiles:
    """Execute ``notebook`` with ``parameters`` and write ``.ipynb``, ``.html``, ``.md`` into ``out_dir``."""
    import nbformat

    source = notebook_path(notebook)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IolabError(f"cannot create the output directory: {exc.strerror}", context=str(out_dir)) from exc
    stem = basename or source.stem
    executed = execute(source, out_dir / f"{stem}.ipynb", parameters=parameters, timeout=timeout)
    nb = nbformat.read(str(executed), as_version=4)
    lang = parameters.get("lang", "en")
    nb.metadata.setdefault("iolab", {})["lang"] = lang
    nb.metadata["title"] = title or nb.metadata.get("iolab", {}).get("title") or i18n.text(
        "headings.compare_title" if source.stem == "compare" else "headings.report_title", lang)
    nbformat.write(nb, str(executed))
    html = export_html(executed, out_dir / f"{stem}.html")
    md, figures = export_markdown(executed, out_dir / f"{stem}.md")
    return ReportFiles(executed, html, md, figures)


def report(runs: Sequence[str | os.PathLike] = (), *, data: str | os.PathLike | None = None, lang: str = "en",
           out: str | os.PathLike | None = None, notebook: str = "report", reference: str | None = None,
           title: str | None = None, host=None, label=None, recipe=None) -> ReportFiles:
    """Check the input, then render ``notebook`` for the chosen runs (absolute paths passed on).

    ``runs`` (run directories, or directories holding runs) win over ``data``
    (default ``data``). ``reference`` renders a published article (compare
    notebook only); ``runs`` given with it are put beside the article's systems.
    """
    i18n.check_lang(lang)
    parameters: dict = {"lang": lang, "title": title or ""}  # the notebook's own default when empty
    if reference:
        from iolab.analysis import reference as reference_mod
        info = reference_mod.article_info(reference)  # unknown article: error before papermill starts
        title = title or (info.get("title") or {}).get(lang)
        if notebook == "report":
            notebook = "compare"
        # runs given too: they are put beside the article's systems (iolab.report.beside)
        sources = [str(Path(r).resolve()) for r in _as_list(runs)]
        if sources:
            select(None, sources, host=host, label=label, recipe=recipe, with_results=True)
        parameters.update(reference=reference, data_dir="", runs=sources,
                          host=_as_list(host), label=_as_list(label), recipe=_as_list(recipe))
    else:
        sources = [str(Path(r).resolve()) for r in _as_list(runs)]
        data_dir = str(Path(data if data is not None else "data").resolve())
        # fail here, with a one-line error, rather than inside the notebook
        select(data_dir if not sources else None, sources, host=host, label=label, recipe=recipe,
               with_results=True)
        parameters.update(data_dir="" if sources else data_dir, runs=sources,
                          host=_as_list(host), label=_as_list(label), recipe=_as_list(recipe))
    out_dir = Path(out) if out is not None else default_out_dir()
    return render(notebook, parameters=parameters, out_dir=out_dir.resolve(), title=title)
