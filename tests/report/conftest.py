"""Pages several report test files read, rendered once per session (a render is 5-15 s of papermill)."""
import matplotlib
import matplotlib.pyplot as plt
import pytest

from iolab.report import notebooks as report
from iolab.report import plot


@pytest.fixture(autouse=True)
def report_fonts_and_closed_figures():
    """Every test draws with the fonts a report has (Japanese as the fallback: :func:`iolab.report.plot.setup`),
    whichever tests ran before it in its process (pytest-xdist shares tests out among workers); no figure of
    one test is left open for the next (matplotlib keeps them until closed)."""
    with matplotlib.rc_context({"font.family": plot.font_families("en")}):
        yield
    plt.close("all")


@pytest.fixture
def japanese():
    """Plot labels in Japanese need IPAexGothic (matplotlib-fontja), for this test only."""
    # (inside the context: importing matplotlib_fontja sets font.family for the whole process)
    with matplotlib.rc_context():
        matplotlib.rcParams["font.family"] = plot.font_families("ja")
        yield


@pytest.fixture(scope="session")
def render_once(tmp_path_factory):
    """``render_once(**kwargs)``: :func:`iolab.report.notebooks.report` with ``kwargs``, rendered the first time
    and shared after (the 2013 rebuild is read by the article tests and by the headless-Chromium tests)."""
    pages = {}

    def render(**kwargs):
        key = repr(sorted(kwargs.items()))
        if key not in pages:
            pages[key] = report.report(out=tmp_path_factory.mktemp("shared-page"), **kwargs)
        return pages[key]
    return render
