"""What iolab's JupyterLab widgets share: the one place ipywidgets is imported, filling an Output, error HTML.

ipywidgets is imported only when a widget is built (:func:`ipywidgets_module`), so
``import iolab.explorer.widgets`` works where it is not installed.
"""
from __future__ import annotations

import html
import io

from iolab.core.errors import IolabError


def ipywidgets_module():
    """The ipywidgets module, or an :class:`IolabError` saying how to get it."""
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise IolabError("ipywidgets is not installed: the interactive widgets need it",
                         hint="pip install 'iolab[notebook]'") from exc
    return ipywidgets


def show(output, *objects) -> None:
    """Replace what ``output`` shows with ``objects`` (works without a kernel and from threads)."""
    output.outputs = ()
    for obj in objects:
        output.append_display_data(obj)


def markdown(text: str):
    from IPython.display import Markdown
    return Markdown(text)


def html_view(text: str):
    from IPython.display import HTML
    return HTML(text)


def png(figure):
    from IPython.display import Image
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return Image(data=buffer.getvalue(), format="png")


def error_html(message: str, lang: str = "en") -> str:
    from iolab.report import i18n
    label = html.escape(i18n.text("explorer.error", lang) + i18n.colon(lang).strip())
    return f'<span style="color:#b00020"><b>{label}</b>{" " if lang == "en" else ""}{html.escape(message)}</span>'


def split_list(text: str) -> list[str]:
    return [part.strip() for part in str(text or "").replace("\n", ",").split(",") if part.strip()]


def check_choice(value, choices, what: str) -> None:
    if value not in choices:
        raise IolabError(f"unknown {what} {value!r}", context=what, hint="choose one of " + ", ".join(choices))


def set_options(widget, options) -> None:
    """New options for a chooser, keeping its value where it is still offered (observers fire on the way:
    change several inside ``Explorer._hold``)."""
    value = widget.value
    widget.options = options
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    if isinstance(value, tuple):  # a multiple choice
        widget.value = tuple(v for v in value if v in values)
    elif value in values:
        widget.value = value
