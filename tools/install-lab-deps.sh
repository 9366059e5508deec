#!/usr/bin/env bash
# Install what the lab VM needs, only what is missing, so a second run is quick
# and works offline:
#   - Debian packages qemu-system-x86 (qemu), linux-image-amd64 (a stock
#     kernel under /boot, with cgroup v2, md, dm, null_blk as modules) and
#     busybox-static (virtme-ng builds the initramfs that loads the stock
#     kernel's 9p/virtio modules with a statically linked busybox);
#   - virtme-ng from PyPI, in its own venv inside the checkout (.venv-lab/).
# On success it prints nothing and exits 0. When the lab cannot be made here it
# prints ONE line saying why (on stderr) and exits 3: the caller skips the lab.
set -uo pipefail
cd "$(dirname "$0")/.."
LAB_VENV=${IOLAB_LAB_VENV:-.venv-lab}
PYTHON=${PYTHON:-python3}

fail() { echo "$*" >&2; exit 3; }

have_kernel() { ls /boot/vmlinuz-*-amd64 >/dev/null 2>&1 || ls /boot/vmlinuz-* >/dev/null 2>&1; }

missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
have_kernel || missing+=(linux-image-amd64)
have_static_busybox() { dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; }
have_static_busybox || missing+=(busybox-static)

if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || fail "no apt-get to install ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    fail "not root, cannot install ${missing[*]}"
  fi
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  if ! "${SUDO[@]}" apt-get update -qq >"$log" 2>&1; then
    rm -f "$log"; fail "apt-get update failed (offline?), cannot install ${missing[*]}"
  fi
  if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    reason=$(grep -m1 -E '^E:' "$log" || echo "apt-get install failed")
    rm -f "$log"; fail "cannot install ${missing[*]}: $reason"
  fi
  rm -f "$log"
  command -v qemu-system-x86_64 >/dev/null 2>&1 || fail "qemu-system-x86 installed but no qemu-system-x86_64 on PATH"
  have_kernel || fail "linux-image-amd64 installed but no kernel under /boot"
  have_static_busybox || fail "busybox-static did not install"
fi

if [ ! -x "$LAB_VENV/bin/vng" ]; then
  "$PYTHON" -m venv "$LAB_VENV" >/dev/null 2>&1 || fail "cannot create $LAB_VENV (python3 -m venv failed)"
  if ! "$LAB_VENV/bin/python" -m pip install --quiet virtme-ng >/dev/null 2>&1; then
    rm -rf "$LAB_VENV"; fail "cannot install virtme-ng from PyPI into $LAB_VENV (offline?)"
  fi
  [ -x "$LAB_VENV/bin/vng" ] || fail "virtme-ng installed but $LAB_VENV/bin/vng is missing"
fi
exit 0
