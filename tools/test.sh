#!/usr/bin/env bash
# Run the whole suite: unit and integration tests, then the notebooks with nbval.
set -uo pipefail
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "iolab test: pytest collected no test; that is a broken suite, not a pass" >&2
  exit 1
fi
exit "$rc"
