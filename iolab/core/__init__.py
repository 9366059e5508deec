"""The foundation every layer stands on: the one error type, units, subprocess helpers,
YAML reading, optional imports, progress, notebook execution (papermill), the result columns and the ownership ledger
(which process made which kernel object).

It stands on the standard library and third-party packages only.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ()
