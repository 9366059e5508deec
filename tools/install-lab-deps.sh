#!/usr/bin/env bash
# Install what the lab VM needs, only what is missing, so a second run is quick
# and works offline (the lists: sets lab and lab-optional of tools/packages.txt):
#   - Debian packages qemu-system-x86 (qemu), linux-image-amd64 (a stock
#     kernel under /boot, with cgroup v2, md, dm, null_blk as modules) and
#     busybox-static (virtme-ng builds the initramfs that loads the stock
#     kernel's 9p/virtio modules with a statically linked busybox);
#   - virtme-ng from PyPI, in its own venv inside the checkout (.venv-lab/);
#   - optionally open-iscsi (the iSCSI mirror test; without it that test alone skips),
#     its iscsid neither started nor enabled on this host.
# On success it prints nothing (or one line saying open-iscsi could not be had) and exits 0. When the lab cannot be made here it
# prints ONE line saying why (on stderr) and exits 3: the caller skips the lab.
set -uo pipefail
cd "$(dirname "$0")/.."
LAB_VENV=${IOLAB_LAB_VENV:-.venv-lab}
PYTHON=${PYTHON:-python3}

fail() { echo "$*" >&2; exit 3; }

# The Debian packages (sets lab and lab-optional of tools/packages.txt) through the system
# set-up: only what is missing, with every service start denied and the new packages' services
# disabled (open-iscsi's iscsid must not run on this host).
deps_log=$(mktemp)
if ! bash tools/install-system-deps.sh lab >"$deps_log" 2>&1; then
  reason=$(grep -v '^iolab setup: install them with' "$deps_log" | tail -n 1 | sed 's/^iolab setup: //')
  rm -f "$deps_log"; fail "cannot set up the lab: ${reason:-tools/install-system-deps.sh lab failed}"
fi
# open-iscsi (iscsiadm, iscsid) for the iSCSI mirror test: optional. Without it only that
# test skips (naming the package), so a failure here is one line on stdout and exit 0.
if ! bash tools/install-system-deps.sh lab-optional >"$deps_log" 2>&1; then
  echo "open-iscsi not installed ($(grep -v '^iolab setup: install them with' "$deps_log" | tail -n 1 | sed 's/^iolab setup: //')): the lab's iSCSI test will skip"
fi
rm -f "$deps_log"

if [ ! -x "$LAB_VENV/bin/vng" ]; then
  "$PYTHON" -m venv "$LAB_VENV" >/dev/null 2>&1 || fail "cannot create $LAB_VENV (python3 -m venv failed)"
  if ! "$LAB_VENV/bin/python" -m pip install --quiet virtme-ng >/dev/null 2>&1; then
    rm -rf "$LAB_VENV"; fail "cannot install virtme-ng from PyPI into $LAB_VENV (offline?)"
  fi
  [ -x "$LAB_VENV/bin/vng" ] || fail "virtme-ng installed but $LAB_VENV/bin/vng is missing"
fi
exit 0
