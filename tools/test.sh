#!/usr/bin/env bash
# Run the whole suite: unit and integration tests and the notebooks with nbval on
# this machine (with arguments: only the tests they name, in one pytest), then the
# lab tier (tests/lab, marker `lab`) inside ONE lab VM with a stock kernel (cgroup
# v2, md, dm): see iolab/lab/. The lab tests are deselected on the host.
# IOLAB_LAB=skip skips the lab tier on purpose.
set -uo pipefail
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg

no_tests() {
  echo "iolab test: $1 collected no test; that is a broken suite, not a pass" >&2
}

# The lab's parts are installed first, so the host tests of the VM itself run too.
lab_skip=""
if [ "${IOLAB_LAB:-}" = skip ]; then
  lab_skip="IOLAB_LAB=skip"
elif ! lab_setup=$(bash tools/install-lab-deps.sh 2>&1); then
  lab_skip="${lab_setup:-tools/install-lab-deps.sh failed}"
elif [ -n "$lab_setup" ]; then
  echo "$lab_setup"
fi

# One pytest; --durations says where the time went, so a suite creeping past its budget shows in the CI
# log. Its exit status, with "no test collected" (5) as a failure.
run_pytest() {
  .venv/bin/python -m pytest --durations=30 "$@"
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    no_tests "pytest $*"
    return 1
  fi
  return "$rc"
}

if [ "$#" -gt 0 ]; then
  run_pytest "$@"  # the tests asked for, as asked
  rc=$?
else
  # The tests that do not measure against time on up to two workers (pytest-xdist; a file's tests on one
  # worker, so they share its fixtures), then those that do (marker `alone`: tests/alone_tests.py) one by one.
  workers=$(nproc)
  [ "$workers" -le 2 ] || workers=2
  echo "iolab test: the tests beside each other ($workers workers), then the tests that measure against time, alone"
  run_pytest -n "$workers" --dist loadfile -m "not alone"
  rc=$?
  # Only passed (0) or failed (1) tests go on, so one log shows both; Ctrl-C (2), an internal (3) or a usage
  # error (4) ends the suite here.
  case "$rc" in 0|1) ;; *) exit "$rc" ;; esac
  run_pytest -m alone
  alone=$?
  [ "$rc" -ne 0 ] || rc=$alone
fi
[ "$rc" -eq 0 ] || exit "$rc"

if [ -n "$lab_skip" ]; then
  echo "iolab test: lab tier skipped: $lab_skip"
  exit 0
fi
echo "iolab test: lab tier (one VM with the stock kernel under TCG; about 15 minutes)"
.venv/bin/python -m iolab.lab.tier
