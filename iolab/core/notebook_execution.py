"""Executing a parameterised notebook with papermill: the one executor reports and batch runs share.

:func:`execute` runs a notebook with parameters into an output notebook. If a cell raises,
papermill has already written the executed notebook (with the traceback) to the output, and
:class:`NotebookFailed` says which cell failed and how: the report stops with it, a batch records
it for the entry and goes on with the next.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

#: Kernel the notebooks run in (jupyter_client maps "python3" to this Python).
KERNEL = "python3"


class NotebookFailed(IolabError):
    """A cell raised; the executed notebook with its traceback is kept at ``output``."""

    def __init__(self, output: Path, *, cell: int | None, ename: str, evalue: str):
        self.output, self.cell, self.ename, self.evalue = output, cell, ename, evalue
        super().__init__(f"the notebook failed in cell {cell}: {ename}: {evalue}", context=str(output),
                         hint="open the executed notebook to see the traceback")


def execute(notebook: str | os.PathLike, output: str | os.PathLike, *, parameters: dict | None = None,
            cwd: str | os.PathLike | None = None, kernel_name: str = KERNEL, timeout: float | None = 600) -> Path:
    """Execute ``notebook`` with ``parameters`` into ``output`` (papermill); returns ``output``.

    ``cwd`` defaults to the notebook's directory so that its default parameters (paths
    relative to it) work; ``timeout`` bounds each cell in seconds (``None``: no bound). If a
    cell fails, the executed notebook (with the traceback) is kept at ``output`` and
    :class:`NotebookFailed` names the cell and the error. Anything else papermill raises (the
    kernel died, a cell timed out, an unreadable notebook) goes through unchanged.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    notebook, output = Path(notebook), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    log.info("executing %s -> %s with %s", notebook, output, parameters)
    try:
        papermill.execute_notebook(
            str(notebook), str(output), parameters=parameters or {}, cwd=str(cwd or notebook.parent),
            kernel_name=kernel_name, progress_bar=False, log_output=False, execution_timeout=timeout,
            report_mode=False, extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except PapermillExecutionError as exc:
        raise NotebookFailed(output, cell=exc.exec_count, ename=exc.ename, evalue=exc.evalue) from exc
    return output
