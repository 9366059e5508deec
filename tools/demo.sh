#!/usr/bin/env bash
# `make demo`: benchmark something that every machine has and write the HTML report.
# As root: two emulated devices with known limits (an HDD-like and a SATA-SSD-like
# throttled loop device), so the first report already compares two systems.
# Otherwise: a scratch directory in this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
IOLAB=.venv/bin/iolab
DATA=${IOLAB_DEMO_DATA:-data}
RECIPE=${IOLAB_DEMO_RECIPE:-quick}
OUT=${IOLAB_DEMO_OUT:-reports/demo}
runs=()
if [ "$(id -u)" -eq 0 ] && [ -z "${IOLAB_DEMO_NO_EMULATION:-}" ]; then
  # labelled in the kit's own wording, which a Japanese page says in Japanese (HDD（エミュレート）)
  for profile in hdd:HDD sata-ssd:"SATA SSD"; do
    echo "== $RECIPE on emulated:${profile%%:*}" >&2
    runs+=("$($IOLAB run "$RECIPE" --target "emulated:${profile%%:*}" --label "${profile#*:} (emulated)" \
      --data "$DATA" | tail -n 1)")
  done
else
  mkdir -p scratch
  echo "== $RECIPE on ./scratch (not root: no emulated devices)" >&2
  runs+=("$($IOLAB run "$RECIPE" --target scratch --label "scratch directory" --data "$DATA" | tail -n 1)")
fi
echo "== report" >&2
report_path=$($IOLAB report "${runs[@]}" --notebook compare --out "$OUT")
# JupyterLab (the `lab` extra) for the explorer; installed once, quietly
if [ ! -x .venv/bin/jupyter-lab ]; then
  echo "== JupyterLab (pip install -e '.[lab]')" >&2
  .venv/bin/python -m pip install --quiet -e '.[lab]'
fi
explore_data=$(cd "$DATA" && pwd)
echo "== explore the runs in JupyterLab: open the explorer with the command below, then Run > Run All Cells" >&2
echo "   and type $explore_data in its Data field to see these runs beside the fixture runs:" >&2
echo "   .venv/bin/jupyter lab notebooks/explore.ipynb" >&2
echo "$report_path"  # the last line: the HTML report
