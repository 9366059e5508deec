"""The RunPanel: target, recipe, isolation and a Start button that runs a benchmark from JupyterLab.

The run goes in a background thread (the notebook stays usable); a watcher
thread moves the progress bar from the run directory's manifest; errors are
shown in the panel, never raised into the kernel.
"""
from __future__ import annotations

import html
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from iolab.engine import recipes as recipes_mod
from iolab.engine import store
from iolab.core.errors import IolabError
from iolab.report.widgetkit import _error_html, _ipywidgets, _split

log = logging.getLogger(__name__)

ISOLATION_CHOICES = (("recipe's default", ""), ("cgroup", "cgroup"), ("hugepages", "hugepages"),
                     ("direct", "direct"), ("none (cached)", "none"))


class RunPanel:
    """Target, recipe, isolation and a Start button that runs a benchmark with a progress bar.

    ``threaded=False`` runs in the caller's thread (the progress bar still
    moves: a watcher thread reads the run directory's manifest).
    ``on_finished(result)`` is called with the :class:`~iolab.engine.runner.RunResult`
    after a run that returned (completed or failed).
    """

    def __init__(self, data_dir: str | os.PathLike = "data", *, target: str = "", recipe: str = "quick",
                 isolation: str = "", label: str = "", size: str = "", runtime: str = "", repeat: int = 0,
                 tests: Sequence[str] | str = (), threaded: bool = True,
                 on_finished: Callable | None = None):
        w = _ipywidgets()
        wide = {"description_width": "7em"}
        names = list(recipes_mod.available())
        if recipe and recipe not in names:
            names.append(recipe)  # a recipe file path
        self.target = w.Text(value=str(target), description="Target", style=wide, layout=w.Layout(width="60%"),
                             placeholder="a directory on the file system to test, a file, /dev/sdX or emulated:hdd")
        self.recipe = w.Dropdown(description="Recipe", options=names, value=recipe or (names[0] if names else None),
                                 style=wide)
        self.isolation = w.Dropdown(description="Isolation", options=list(ISOLATION_CHOICES), value=isolation or "",
                                    style=wide)
        self.label = w.Text(value=label, description="Label", placeholder="default: the host name", style=wide)
        self.size = w.Text(value=str(size or ""), description="Size", placeholder="recipe's, e.g. 1G", style=wide)
        self.runtime = w.Text(value=str(runtime or ""), description="Runtime (s)", placeholder="recipe's",
                              style=wide)
        self.repeat = w.BoundedIntText(value=int(repeat or 0), min=0, max=1000, description="Repeat",
                                       tooltip="0: the recipe's", style=wide)
        self.tests = w.Text(value=", ".join([tests] if isinstance(tests, str) else tests), description="Tests",
                            placeholder="all; or e.g. SEQ1M-Q8T1, RND4K-Q1T1", style=wide)
        self.data_dir = w.Text(value=str(data_dir), description="Store in", style=wide, layout=w.Layout(width="60%"))
        self.start_button = w.Button(description="Start", button_style="primary", icon="play")
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, description="", bar_style="info",
                                        layout=w.Layout(width="60%"))
        self.status = w.HTML(value="Ready.")
        self.widget = w.VBox([
            self.target, w.HBox([self.recipe, self.isolation]), w.HBox([self.label, self.tests]),
            w.HBox([self.size, self.runtime, self.repeat]), self.data_dir,
            w.HBox([self.start_button, self.progress]), self.status])
        self.threaded = threaded
        self.on_finished = on_finished
        #: the last run: its RunResult (None while running or after an error), its directory, its error
        self.result = None
        self.run_dir: Path | None = None
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._done.set()
        self.start_button.on_click(self.start)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def options(self) -> dict:
        """The run's arguments as :func:`iolab.engine.runner.run` takes them (empty fields: the recipe's)."""
        return {"label": self.label.value.strip() or None, "isolation": self.isolation.value or None,
                "size": self.size.value.strip() or None, "runtime": self.runtime.value.strip() or None,
                "repeat": self.repeat.value or None, "data_dir": self.data_dir.value.strip() or "data"}

    def start(self, _button=None) -> None:
        """Start a run with the panel's values (what the Start button does); ignored while one runs."""
        if self.running:
            return
        self._done.clear()
        self.start_button.disabled = True
        self.result, self.run_dir, self.error = None, None, None
        self.progress.value, self.progress.bar_style, self.progress.description = 0.0, "info", ""
        self._set_status("Checking the recipe and the target…")
        if self.threaded:
            self._thread = threading.Thread(target=self._run, name="iolab-run", daemon=True)
            self._thread.start()
        else:
            self._run()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run to end; True if it has."""
        return self._done.wait(timeout)

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status.value = _error_html(text) if error else html.escape(text)

    def _run(self) -> None:
        from iolab.fleet import batch
        from iolab.engine import runner
        watcher = None
        try:
            target = self.target.value.strip()
            if not target:
                raise IolabError("enter a target: a directory on the file system to test", context="Target")
            options = self.options()
            recipe = batch.select_tests(self.recipe.value, _split(self.tests.value))
            planned, _ = runner.plan(recipe, [target], size=options["size"], runtime=options["runtime"],
                                     repeat=options["repeat"], isolation=options["isolation"])
            data_dir = Path(options.pop("data_dir"))
            watcher = _Watcher(self, data_dir, planned)
            watcher.start()
            self._set_status(f"Running {planned.name} on {target}…")
            result = runner.run(recipe, [target], data_dir=data_dir, progress=False, **options)
            self.result, self.run_dir = result, Path(result.path)
            status = result.manifest.get("status")
            reason = result.manifest.get("reason")
            self.progress.value = 1.0
            self.progress.bar_style = "success" if status == "completed" else "warning"
            self.progress.description = status or ""
            text = f"Run {status}: {result.path}" + (f" ({reason})" if reason else "")
            self._set_status(text, error=status != "completed")
            if status != "completed":
                self.error = reason or status
            if self.on_finished is not None:
                try:
                    self.on_finished(result)
                except Exception as exc:  # the run is done; a display problem must not hide it
                    log.exception("on_finished failed")
                    self._set_status(f"{text}; showing it failed: {exc!r}", error=True)
        except IolabError as exc:
            self._fail(str(exc), watcher)
        except Exception as exc:  # shown in the panel: a widget callback must not raise into the kernel
            log.exception("run failed")
            self._fail(f"internal error: {exc!r}", watcher)
        finally:
            if watcher is not None:
                watcher.stop()
            self.start_button.disabled = False
            self._done.set()

    def _fail(self, message: str, watcher) -> None:
        self.error = message
        if watcher is not None and watcher.run_dir is not None:
            self.run_dir = watcher.run_dir
            message += f" — what was measured is kept in {watcher.run_dir}"
        self.progress.bar_style = "danger"
        self.progress.description = "failed"
        self._set_status(message, error=True)


class _Watcher:
    """Moves a RunPanel's progress bar from the manifest of the run directory being written."""

    def __init__(self, panel: RunPanel, data_dir: Path, recipe, interval: float = 0.3):
        self.panel, self.interval = panel, interval
        self.parent = Path(data_dir) / store.hostname()
        self.before = set(self.parent.iterdir()) if self.parent.is_dir() else set()
        self.steps = max(1, len(recipe.steps()))
        runtime = recipe.defaults.get("runtime")
        self.step_seconds = (float(runtime) + float(recipe.defaults.get("ramp_time") or 0)) * recipe.repeat \
            if runtime else None
        self.run_dir: Path | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iolab-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _find(self) -> Path | None:
        if self.run_dir is None and self.parent.is_dir():
            new = [p for p in self.parent.iterdir() if p not in self.before and (p / store.MANIFEST).is_file()]
            if new:
                self.run_dir = max(new, key=lambda p: p.stat().st_mtime)
        return self.run_dir

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.update()
            except (OSError, ValueError, IolabError):  # a manifest being replaced: next time
                continue

    def update(self) -> float | None:
        run_dir = self._find()
        if run_dir is None:
            return None
        tests = store.read_manifest(run_dir).get("tests") or []
        done = sum(1 for t in tests if t.get("status") in ("completed", "failed"))
        running = next((t for t in tests if t.get("status") == "running"), None)
        fraction = done
        if running is not None and self.step_seconds:
            started = running.get("started")
            try:
                import datetime as _dt
                elapsed = time.time() - _dt.datetime.fromisoformat(started).timestamp()
                fraction += min(0.95, max(0.0, elapsed / self.step_seconds))
            except (TypeError, ValueError):
                pass
        value = min(1.0, fraction / max(len(tests), self.steps))
        panel = self.panel
        if panel.running:
            panel.progress.value = max(panel.progress.value, value)
            panel.progress.description = f"{done}/{max(len(tests), self.steps)}"
            if running is not None:
                panel._set_status(f"Running {running.get('name')} ({done + 1}/{max(len(tests), self.steps)}) "
                                  f"in {run_dir}…")
        return value
