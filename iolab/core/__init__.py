"""The foundation every layer stands on: the one error type, units, subprocess helpers,
YAML reading, optional imports, progress, notebook execution (papermill), the result columns and the ownership ledger
(which process made which kernel object).

May import: the standard library and third-party packages only; nothing else of iolab.
"""
