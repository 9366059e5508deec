#!/usr/bin/env bash
# Install what the lab VM needs, only what is missing, so a second run is quick
# and works offline:
#   - Debian packages qemu-system-x86 (qemu), linux-image-amd64 (a stock
#     kernel under /boot, with cgroup v2, md, dm, null_blk as modules) and
#     busybox-static (virtme-ng builds the initramfs that loads the stock
#     kernel's 9p/virtio modules with a statically linked busybox);
#   - virtme-ng from PyPI, in its own venv inside the checkout (.venv-lab/);
#   - optionally open-iscsi (the iSCSI mirror test; without it that test alone skips).
# On success it prints nothing (or one line saying open-iscsi could not be had) and exits 0. When the lab cannot be made here it
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

# open-iscsi (iscsiadm, iscsid) for the iSCSI mirror test: optional. Without it only that
# test skips (naming the package), so a failure here is one line on stdout and exit 0.
# The package must not leave iscsid running on this host: on sysvinit its scripts are
# installed disabled; where systemd runs, the sockets/services it starts are stopped and
# disabled again (only when this script installed it: a user's own iSCSI set-up is not touched).
have_program() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
have_iscsi() { have_program iscsiadm && have_program iscsid; }
iscsid_pids() { for c in /proc/[0-9]*/comm; do [ "$(cat "$c" 2>/dev/null)" = iscsid ] && { d=${c%/comm}; echo "${d#/proc/}"; }; done; }
install_iscsi() {
  local before log
  before=" $(iscsid_pids | tr '\n' ' ') "
  log=$(mktemp)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends open-iscsi >"$log" 2>&1; then
    "${SUDO[@]}" apt-get update -qq >"$log" 2>&1
    if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends open-iscsi >"$log" 2>&1; then
      echo "open-iscsi not installed ($(grep -m1 -E '^E:' "$log" || echo 'apt-get install failed')): the lab's iSCSI test will skip"
      rm -f "$log"; return 0
    fi
  fi
  rm -f "$log"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    "${SUDO[@]}" systemctl disable --now iscsid.socket iscsid.service open-iscsi.service >/dev/null 2>&1 || true
  fi
  for pid in $(iscsid_pids); do   # an iscsid the install started (none ran before it)
    case "$before" in *" $pid "*) ;; *) "${SUDO[@]}" kill "$pid" 2>/dev/null || true ;; esac
  done
  have_iscsi || echo "open-iscsi installed but iscsiadm/iscsid not found: the lab's iSCSI test will skip"
}
if ! have_iscsi; then
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n); else SUDO=(false); fi
  fi
  if [ "${SUDO[*]}" = false ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "open-iscsi not installed (not root or no apt-get): the lab's iSCSI test will skip"
  else
    install_iscsi
  fi
fi

if [ ! -x "$LAB_VENV/bin/vng" ]; then
  "$PYTHON" -m venv "$LAB_VENV" >/dev/null 2>&1 || fail "cannot create $LAB_VENV (python3 -m venv failed)"
  if ! "$LAB_VENV/bin/python" -m pip install --quiet virtme-ng >/dev/null 2>&1; then
    rm -rf "$LAB_VENV"; fail "cannot install virtme-ng from PyPI into $LAB_VENV (offline?)"
  fi
  [ -x "$LAB_VENV/bin/vng" ] || fail "virtme-ng installed but $LAB_VENV/bin/vng is missing"
fi
exit 0
