"""The one user-facing error type.

Library code raises :class:`IolabError` with enough context for a one-line
message; only :func:`iolab.cli.main` turns it into an exit code.
"""
from __future__ import annotations


class IolabError(Exception):
    """A problem the user can act on (bad input, missing tool, refused device).

    ``context`` names what the message is about (a file, a field, a device) and
    is prefixed to the message, papermill-style, so every error reads
    ``<context>: <what is wrong>``.
    """

    def __init__(self, message: str, *, context: str | None = None, hint: str | None = None):
        self.message = message
        self.context = context
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.context}: {self.message}" if self.context else self.message
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


def run_option(*names: str) -> str:
    """How an error's context names run options, as the command line spells them: ``run option --mem-limit``,
    ``run options --max-rounds, --max-time`` (from ``mem_limit``, ``max_rounds``...; the CLI, papermill's
    parameters and the run panel all reach the engine as the same options)."""
    flags = ", ".join("--" + name.lstrip("-").replace("_", "-") for name in names)
    return ("run options " if len(names) > 1 else "run option ") + flags
