"""The RunPanel: targets, recipe, isolation, a Start button that runs a benchmark from JupyterLab, and Stop.

The target field takes one target or several (comma- or line-separated), measured one after another as
repeated ``--target``s are; with two or more, a checkbox offers **measure at the same time**
(``iolab run --simultaneous``, :mod:`iolab.engine.simultaneous`), passed on as the same
:class:`~iolab.engine.runoptions.RunOptions` field the command line sets. With fewer than two targets the
checkbox is hidden and the run is not simultaneous, whatever it was left at.

The run goes in a background thread (the notebook stays usable); a watcher
thread moves the progress bar from the run directory's manifest; errors are
shown in the panel, never raised into the kernel.

**Stop** does to the run's thread what Ctrl-C does to ``iolab run``: it raises
:class:`StopRequested` (a ``KeyboardInterrupt``) there, at the next Python
instruction, i.e. within the 0.2 s fio's wait polls at. The engine then stops
fio (SIGINT, SIGKILL after :data:`iolab.engine.runner.STOP_GRACE_S`), keeps
the passes measured, and ends the manifest ``interrupted``; the panel says
where the run directory is. Every string is in the locale's ``explorer.panel``.
"""
from __future__ import annotations

import ctypes
import dataclasses
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
from iolab.report import i18n
from iolab.explorer.widgetkit import error_html, ipywidgets_module, split_list

log = logging.getLogger(__name__)

_t = i18n.scoped("explorer.panel")

#: Isolation choices: value -> its label's key in ``explorer.panel`` (None: the value is its own label).
ISOLATION_CHOICES = (("", "isolation_default"), ("cgroup", None), ("hugepages", None), ("direct", None),
                     ("none", "isolation_none"))


class StopRequested(KeyboardInterrupt):
    """Raised in a run's thread by :meth:`RunPanel.stop`: the engine stops fio and keeps what it measured."""


def _raise_in(thread: threading.Thread, exception: type) -> bool:
    """Raise ``exception`` in ``thread`` at its next Python instruction; False when the thread is gone."""
    if thread.ident is None or not thread.is_alive():
        return False
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exception))
    if done > 1:  # more than one thread state touched: undo, as the C API asks
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), None)
        return False
    return done == 1


class RunPanel:
    """Target, recipe, isolation, a Start button that runs a benchmark with a progress bar, and Stop.

    ``threaded=False`` runs in the caller's thread (the progress bar still
    moves: a watcher thread reads the run directory's manifest; Stop cannot
    reach a run in the caller's thread).
    ``on_finished(result)`` is called with the :class:`~iolab.engine.runner.RunResult`
    after a run that returned (completed or failed).
    """

    def __init__(self, data_dir: str | os.PathLike = "data", *, target: Sequence[str] | str = "",
                 recipe: str = "quick", isolation: str = "", label: str = "", size: str = "", runtime: str = "",
                 repeat: int = 0, tests: Sequence[str] | str = (), simultaneous: bool = False, threaded: bool = True,
                 on_finished: Callable | None = None, lang: str = "en"):
        w = ipywidgets_module()
        self.lang = i18n.check_lang(lang)
        wide = {"description_width": "9em"}  # the longest label on one line: 「キャッシュの隔離」 was cut at 7em
        names = list(recipes_mod.available())
        if recipe and recipe not in names:
            names.append(recipe)  # a recipe file path
        targets = [target] if isinstance(target, (str, os.PathLike)) else target
        self.target = w.Text(value=", ".join(str(t) for t in targets), style=wide, layout=w.Layout(width="60%"))
        self.simultaneous = w.Checkbox(value=bool(simultaneous), indent=False, layout=w.Layout(display="none"))
        self.recipe = w.Dropdown(options=names, value=recipe or (names[0] if names else None), style=wide)
        self.isolation = w.Dropdown(options=[(v, v) for v, _ in ISOLATION_CHOICES], value=isolation or "",
                                    style=wide)
        self.label = w.Text(value=label, style=wide)
        self.size = w.Text(value=str(size or ""), style=wide)
        self.runtime = w.Text(value=str(runtime or ""), style=wide)
        self.repeat = w.BoundedIntText(value=int(repeat or 0), min=0, max=1000, style=wide)
        self.tests = w.Text(value=", ".join([tests] if isinstance(tests, str) else tests), style=wide)
        self.data_dir = w.Text(value=str(data_dir), style=wide, layout=w.Layout(width="60%"))
        self.start_button = w.Button(button_style="primary", icon="play")
        self.stop_button = w.Button(button_style="danger", icon="stop", disabled=True)
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, description="", bar_style="info",
                                        layout=w.Layout(width="60%"))
        self.status = w.HTML()
        self.widget = w.VBox([
            w.HBox([self.target, self.simultaneous]), w.HBox([self.recipe, self.isolation]), w.HBox([self.label, self.tests]),
            w.HBox([self.size, self.runtime, self.repeat]), self.data_dir,
            w.HBox([self.start_button, self.stop_button, self.progress]), self.status])
        self._ready = True  # no run started yet: the status says Ready in the panel's language
        self.set_lang(self.lang)
        self.threaded = threaded
        self.on_finished = on_finished
        #: the last run: its RunResult (None while running, after an error or a stop), its directory, its
        #: error, whether Stop ended it
        self.result = None
        self.run_dir: Path | None = None
        self.error: str | None = None
        self.stopped = False
        self._stoppable = False  # True only while runner.run runs in this panel's thread
        self._stopping = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._done.set()
        self.start_button.on_click(self.start)
        self.stop_button.on_click(self.stop)
        self.target.observe(lambda _change: self._offer_simultaneous(), names="value")
        self._offer_simultaneous()

    def set_lang(self, lang: str) -> None:
        """Every label, hint and button of the panel in ``lang`` (values kept)."""
        self.lang = lang = i18n.check_lang(lang)
        for control, key in ((self.target, "labels.target"), (self.recipe, "labels.recipe"),
                             (self.isolation, "labels.isolation"), (self.label, "labels.label"),
                             (self.size, "explorer.panel.size"), (self.runtime, "explorer.panel.runtime"),
                             (self.repeat, "explorer.panel.repeat"), (self.tests, "labels.tests"),
                             (self.data_dir, "explorer.panel.store_in")):
            control.description = i18n.text(key, lang)
        self.target.placeholder = _t("target_placeholder", lang, emulated="emulated:hdd")
        self.label.placeholder = _t("label_placeholder", lang)
        self.size.placeholder = _t("size_placeholder", lang)
        self.runtime.placeholder = _t("runtime_placeholder", lang)
        self.repeat.tooltip = _t("repeat_tooltip", lang)
        self.tests.placeholder = _t("tests_placeholder", lang)
        self.target.tooltip = _t("targets_tooltip", lang)
        self.simultaneous.description = _t("simultaneous", lang)
        self.simultaneous.tooltip = _t("simultaneous_tooltip", lang)
        value = self.isolation.value
        self.isolation.options = [(_t(key, lang) if key else v, v) for v, key in ISOLATION_CHOICES]
        self.isolation.value = value
        self.start_button.description = _t("start", lang)
        self.stop_button.description, self.stop_button.tooltip = _t("stop", lang), _t("stop_tooltip", lang)
        if self._ready:
            self._set_status(_t("ready", lang))

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def targets(self) -> list[str]:
        """The targets in the target field (comma- or line-separated), in order."""
        return split_list(self.target.value)

    @property
    def offers_simultaneous(self) -> bool:
        """Whether the field names two or more targets, so the checkbox is shown."""
        return len(self.targets()) >= 2

    def _offer_simultaneous(self) -> None:
        self.simultaneous.layout.display = "" if self.offers_simultaneous else "none"

    def run_options(self):
        """The run's :class:`~iolab.engine.runoptions.RunOptions` from the panel's fields (empty fields: the
        recipe's; checked as the measure notebook's parameters are). The tests field chooses the recipe's
        tests (:func:`iolab.fleet.batch.select_tests`), not an option. ``simultaneous`` is the checkbox's, when it
        is offered (two or more targets)."""
        from iolab.engine.runoptions import RunOptions
        return RunOptions.from_form(label=self.label.value, isolation=self.isolation.value, size=self.size.value,
                                    runtime=self.runtime.value, repeat=self.repeat.value,
                                    data_dir=self.data_dir.value.strip() or "data", progress=False,
                                    simultaneous=self.offers_simultaneous and bool(self.simultaneous.value))

    def start(self, _button=None) -> None:
        """Start a run with the panel's values (what the Start button does); ignored while one runs."""
        if self.running:
            return
        self._done.clear()
        self._ready = False
        self.start_button.disabled = True
        self.stop_button.disabled = not self.threaded  # a run in the caller's thread cannot be reached
        self.result, self.run_dir, self.error, self.stopped, self._stopping = None, None, None, False, False
        self.progress.value, self.progress.bar_style, self.progress.description = 0.0, "info", ""
        self._set_status(_t("checking", self.lang))
        if self.threaded:
            self._thread = threading.Thread(target=self._run, name="iolab-run", daemon=True)
            self._thread.start()
        else:
            self._run()

    def stop(self, _button=None) -> bool:
        """Stop the run going (what the Stop button does): fio ends its test, what was measured is kept and the
        manifest ends ``interrupted``. False when no run of this panel's threads is going."""
        thread = self._thread
        with self._lock:  # never into the thread once runner.run has returned
            if not (self.running and self._stoppable and thread is not None and _raise_in(thread, StopRequested)):
                return False
            self._stoppable, self._stopping = False, True
        self.stop_button.disabled = True
        self._set_status(_t("stopping", self.lang))
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run to end; True if it has."""
        return self._done.wait(timeout)

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status.value = error_html(text, self.lang) if error else html.escape(text)

    def _run(self) -> None:
        from iolab.fleet import batch
        from iolab.engine import runner
        watcher = None
        try:
            targets = self.targets()
            if not targets:
                raise IolabError(_t("enter_target", self.lang), context="Target")
            options = self.run_options()
            # the panel says where a run went, wherever it is read
            options = dataclasses.replace(options, data_dir=options.data_dir.resolve())
            recipe = batch.select_tests(self.recipe.value, split_list(self.tests.value))
            planned, _ = runner.plan(recipe, targets, options)
            watcher = _Watcher(self, options.data_dir, planned)
            watcher.start()
            self._set_status(_t("running_together" if options.simultaneous else "running", self.lang,
                                recipe=planned.name, target=", ".join(targets)))
            with self._lock:
                self._stoppable = self.threaded and threading.current_thread() is self._thread
            result = runner.run(recipe, targets, options)
            with self._lock:
                self._stoppable = False
            self.result, self.run_dir = result, Path(result.path)
            status = result.manifest.get("status")
            reason = result.manifest.get("reason")
            self.progress.value = 1.0
            self.progress.bar_style = "success" if status == "completed" else "warning"
            self.progress.description = i18n.label(status, self.lang, section="status")
            text = _t("finished", self.lang, status=i18n.label(status, self.lang, section="status"),
                      path=result.path) + (i18n.paren(reason, self.lang) if reason else "")
            self._set_status(text, error=status != "completed")
            if status != "completed":
                self.error = reason or status
            if self.on_finished is not None:
                try:
                    self.on_finished(result)
                except Exception as exc:  # the run is done; a display problem must not hide it
                    log.exception("on_finished failed")
                    self._set_status(_t("showing_failed", self.lang, text=text, error=repr(exc)), error=True)
        except StopRequested:
            self._stopped(watcher)
        except KeyboardInterrupt:  # a Stop that reached the thread inside the engine's own interrupt handling
            self._stopped(watcher)
        except IolabError as exc:
            self._fail(str(exc), watcher)
        except Exception as exc:  # shown in the panel: a widget callback must not raise into the kernel
            log.exception("run failed")
            self._fail(_t("internal", self.lang, error=repr(exc)), watcher)
        finally:
            with self._lock:
                self._stoppable = False
            if watcher is not None:
                watcher.stop()
            self.start_button.disabled = False
            self.stop_button.disabled = True
            self._done.set()

    def _stopped(self, watcher) -> None:
        """After Stop: the run directory the engine left (manifest ``interrupted``), said in the panel."""
        self.stopped = True
        if watcher is not None:
            watcher.update_safely()  # a run directory made after the watcher's last look
        self.run_dir = watcher.run_dir if watcher is not None else None
        self.error = _t("stopped_bar", self.lang)
        self.progress.bar_style = "warning"
        self.progress.description = _t("stopped_bar", self.lang)
        self._set_status(_t("stopped", self.lang, run_dir=self.run_dir) if self.run_dir is not None
                         else _t("stopped_early", self.lang))

    def _fail(self, message: str, watcher) -> None:
        self.error = message
        if watcher is not None and watcher.run_dir is not None:
            self.run_dir = watcher.run_dir
            message += _t("kept", self.lang, run_dir=watcher.run_dir)
        self.progress.bar_style = "danger"
        self.progress.description = _t("failed", self.lang)
        self._set_status(message, error=True)


class _Watcher:
    """Moves a RunPanel's progress bar from the manifest of the run directory being written."""

    def __init__(self, panel: RunPanel, data_dir: Path, recipe, interval: float = 0.3):
        self.panel, self.interval = panel, interval
        self.parent = Path(data_dir) / store.hostname()
        self.before = set(self.parent.iterdir()) if self.parent.is_dir() else set()
        self.steps = max(1, len(recipe.steps()))
        runtime = recipe.runtime
        self.step_seconds = (float(runtime) + recipe.ramp_time) * recipe.repeat if runtime else None
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
            self.update_safely()

    def update_safely(self) -> None:
        try:
            self.update()
        except (OSError, ValueError, IolabError):  # a manifest being replaced: next time
            pass

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
            if running is not None and not panel._stopping:
                panel._set_status(_t("running_test", panel.lang, test=running.get("name"), n=done + 1,
                                     total=max(len(tests), self.steps), run_dir=run_dir))
        return value
