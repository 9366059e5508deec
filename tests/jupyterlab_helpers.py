"""JupyterLab and headless Chromium for tests: a server on 127.0.0.1 over a temporary directory, and a page of
Debian's ``chromium`` driven through the DevTools protocol (a small client on websocket-client).

Both run in their own process group and are stopped (SIGTERM, then SIGKILL) when their ``with`` block ends,
whatever happened in it; :func:`lab_root` removes its temporary directory the same way. Nothing here goes
beyond 127.0.0.1: Chromium resolves no host name (``--host-resolver-rules``) and JupyterLab's extension manager
is read-only (no PyPI queries).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import websocket  # websocket-client, in the test extra

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _wait(check, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    """Poll ``check()`` until it returns something true; fail naming ``what`` (and the process's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    ended = f" (it exited with {proc.returncode})" if proc is not None and proc.poll() is not None else ""
    raise AssertionError(f"{what}: not within {timeout:.0f} s{ended}\n{tail}")


def _stop_group(proc: subprocess.Popen, grace: float = 15) -> None:
    """SIGTERM to the process group ``proc`` leads (JupyterLab and its kernels, Chromium and its helpers),
    SIGKILL to what is left after ``grace``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # helpers of a leader that has gone
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


@contextlib.contextmanager
def lab_root(prefix: str = "iolab-jupyterlab-"):
    """A temporary directory, removed afterwards (also after a failure)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Lab:
    url: str  # http://127.0.0.1:PORT/
    token: str
    root: Path

    def open_url(self, path: str) -> str:
        """The URL that opens ``path`` (relative to the root) in JupyterLab, logged in by the token."""
        return f"{self.url}lab/tree/{path}?reset&token={self.token}"


@contextlib.contextmanager
def jupyterlab(root: Path, state: Path, timeout: float = 90):
    """``jupyter lab`` serving ``root`` on 127.0.0.1 (a free port, a random token); its configuration, runtime
    files and log in ``state``. Stopped with its kernels when the block ends."""
    token = secrets.token_hex(16)
    runtime = state / "runtime"
    for sub in ("runtime", "config", "data", "ipython"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(state / "config"),
           "JUPYTER_DATA_DIR": str(state / "data"), "IPYTHONDIR": str(state / "ipython"),
           "JUPYTER_PLATFORM_DIRS": "1", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    argv = [str(Path(sys.executable).with_name("jupyter-lab")), "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", "--port=0", f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
            "--LabApp.extension_manager=readonly", "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
            "jupyterlab.NeverCheckForUpdate"]
    log = state / "jupyterlab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root,
                                start_new_session=True)
    try:
        info = runtime / f"jpserver-{proc.pid}.json"
        _wait(lambda: info.is_file() and info.stat().st_size > 0, timeout, "JupyterLab's server file", proc, log)
        server = json.loads(info.read_text())
        lab = Lab(url=server["url"], token=token, root=root)
        status = f"{lab.url}api/status?token={token}"
        _wait(lambda: _get(status) is not None, timeout, "JupyterLab answering", proc, log)
        yield lab
    finally:
        _stop_group(proc)


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.read()
    except OSError:
        return None


class DevTools:
    """One page of Chromium through the DevTools protocol: ``call`` a method, ``evaluate`` JavaScript."""

    def __init__(self, ws_url: str, timeout: float = 120):
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self._ids = itertools.count(1)

    def call(self, method: str, **params) -> dict:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:  # events in between are not needed
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (promises awaited); a thrown exception fails the test."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise AssertionError(f"JavaScript failed: {details.get('exception', {}).get('description') or details}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float, what: str):
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.25)
        text = self.evaluate("document.body ? document.body.innerText.slice(-3000) : ''")
        raise AssertionError(f"{what}: not within {timeout:.0f} s; the page ends with:\n{text}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


@contextlib.contextmanager
def chromium_page(state: Path, timeout: float = 60, size: str = "1400,2400"):
    """Headless Chromium with a fresh profile in ``state``, its DevTools on a free port; yields its first page.
    Stopped with its helper processes when the block ends."""
    profile = state / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
            f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--window-size={size}", "about:blank"]
    log = state / "chromium.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HOME": str(state)},
                                start_new_session=True)
    page = None
    try:
        active = profile / "DevToolsActivePort"
        _wait(lambda: active.is_file() and len(active.read_text().split()) >= 2, timeout,
              "Chromium's DevToolsActivePort", proc, log)
        port = int(active.read_text().split()[0])

        def first_page():
            listed = _get(f"http://127.0.0.1:{port}/json/list")
            pages = [t for t in json.loads(listed) if t.get("type") == "page"] if listed else []
            return pages[0]["webSocketDebuggerUrl"] if pages else None
        page = DevTools(_wait(first_page, timeout, "Chromium's first page", proc, log))
        yield page
    finally:
        if page is not None:
            page.close()
        _stop_group(proc)
