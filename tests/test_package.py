"""A built wheel works on its own: installed into a fresh virtual environment, run from outside the
checkout, it finds its recipes, notebooks, locale files and reference figures.

The wheel is built from a copy of the tracked files (what an sdist holds), so the checkout is left
as it was. The fresh environment gets only the wheel; its third-party dependencies are borrowed from
the project's .venv through a path file, which does not bring the checkout's editable iolab along.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from cli_helpers import ROOT

pytestmark = pytest.mark.slow


def tracked_files() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True)
    if listing.returncode != 0:
        pytest.skip(f"not a git checkout: {listing.stderr.strip()}")
    return [name for name in listing.stdout.splitlines() if (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(out), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = out.glob("iolab-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory, wheel) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "-q", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the project's third-party packages, appended after the venv's own site-packages
    Path(purelib, "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def run_outside(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IOLAB_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    # the borrowed packages' data (nbconvert's templates, the kernel spec) live under .venv/share
    env["JUPYTER_PATH"] = str(Path(sys.prefix) / "share" / "jupyter")
    return subprocess.run([str(venv / "bin" / "iolab"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_wheel_carries_the_shipped_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in ("iolab/_shipped/recipes/quick.yaml", "iolab/_shipped/notebooks/compare.ipynb",
                     "iolab/_shipped/reference/articles.yaml", "iolab/report/locale/ja.yaml",
                     "iolab/devices/profiles/emulated.yaml"):
        assert expected in names, expected
    assert not any(name.startswith("tests/") for name in names)


def test_the_installed_wheel_lists_recipes_and_rebuilds_an_article_from_outside_the_checkout(
        fresh_venv, tmp_path):
    where = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import iolab; print(iolab.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(fresh_venv)), f"iolab imported from {where}, not the installed wheel"

    recipes = run_outside(fresh_venv, tmp_path, "recipes")
    assert recipes.returncode == 0, recipes.stderr
    listed = {line.split()[0] for line in recipes.stdout.splitlines() if line.strip()}
    assert {path.stem for path in (ROOT / "recipes").glob("*.yaml")} <= listed

    report = run_outside(fresh_venv, tmp_path, "report", "--reference", "dedicated-server-2013",
                         "--lang", "ja", "--out", str(tmp_path / "out"))
    assert report.returncode == 0, report.stderr[-3000:]
    html = Path(report.stdout.strip().splitlines()[-1])
    assert html.is_file() and html.parent == tmp_path / "out"
    text = html.read_text()
    assert "<html" in text.lower() and "2013" in text
