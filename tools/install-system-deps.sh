#!/usr/bin/env bash
# Install the Debian packages a command needs, only those missing, so a second run is quick and
# works offline. The lists, by purpose, are in tools/packages.txt.
#
#   tools/install-system-deps.sh [--check] [SET]
#
# SET is demo (the default: what `make demo` needs), test (demo's and the test suite's), or
# lab / lab-optional (the Debian part of tools/install-lab-deps.sh).
# A package counts as present when its programs are found on PATH or where Debian puts them
# (/usr/sbin, /sbin: not on a normal user's PATH), so a normal user with everything installed
# is asked for nothing. Missing packages are installed as root (or through sudo) with their
# system services held: a temporary /usr/sbin/policy-rc.d (exit 101) denies every start during
# the install, the services of the packages it added are disabled afterwards, and the script
# checks that no new database server or sshd runs (iolab starts its own throwaway servers).
# --check, or a normal user without sudo: name what is missing and exit 1; install nothing.
# Exit 0: everything is there. Exit 1: something is missing or the install failed. Exit 2: usage.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PACKAGES=${IOLAB_PACKAGES:-$HERE/packages.txt}
POLICY=${IOLAB_POLICY_RC_D:-/usr/sbin/policy-rc.d}
POLICY_MARK="# held by iolab's tools/install-system-deps.sh"
SERVICE_PROGRAMS="sshd mariadbd mysqld mysqld_safe postgres iscsid smartd"
# where Debian puts programs; a normal user's PATH lacks the sbin ones
PROGRAM_DIRS="/usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin"

usage() { echo "usage: $0 [--check] [demo|test|lab|lab-optional]" >&2; exit 2; }
say() { echo "iolab setup: $*" >&2; }

check_only=""
set_name=demo
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    demo|test|lab|lab-optional) set_name=$arg ;;
    *) usage ;;
  esac
done
case "$set_name" in
  demo) sets=" demo " ;;
  test) sets=" demo test " ;;
  *) sets=" $set_name " ;;   # lab, lab-optional: tools/install-lab-deps.sh
esac
[ -r "$PACKAGES" ] || { say "cannot read the package list $PACKAGES"; exit 1; }

find_program() {
  local dir
  type -P -- "$1" >/dev/null 2>&1 && return 0
  for dir in $PROGRAM_DIRS; do
    [ -x "$dir/$1" ] && [ ! -d "$dir/$1" ] && return 0
  done
  return 1
}

dpkg_installed() {
  dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'
}

# present PACKAGE CHECK...: every check holds
present() {
  local package=$1 check
  shift
  for check in "$@"; do
    case "$check" in
      @venv) python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || return 1 ;;
      @font-ja)
        if find_program fc-list; then
          [ -n "$(fc-list :lang=ja family 2>/dev/null)" ] || return 1
        else
          dpkg_installed "$package" || return 1
        fi ;;
      @dpkg) dpkg_installed "$package" || return 1 ;;
      /*) compgen -G "$check" >/dev/null || return 1 ;;
      *) find_program "$check" || return 1 ;;
    esac
  done
}

find_missing() {
  local set package rest checks
  missing=()
  while read -r set package rest; do
    case "$set" in ''|'#'*) continue ;; esac
    case "$sets" in *" $set "*) ;; *) continue ;; esac
    case "$package" in pypi:*) continue ;; esac   # from PyPI, by the set's own installer
    read -r -a checks <<<"$rest"   # words, globs not expanded
    present "$package" "${checks[@]}" || missing+=("$package")
  done <"$PACKAGES"
}
find_missing

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] && [ -z "$check_only" ]; then
  # sudo when it can ask (a terminal) or needs no password; the whole script runs as root then
  if command -v sudo >/dev/null 2>&1 && { [ -t 0 ] || sudo -n true 2>/dev/null; }; then
    say "installing ${missing[*]} with sudo"
    exec sudo -- bash "$0" "$@"
  fi
fi
if [ "$(id -u)" -ne 0 ]; then
  say "these packages are missing and I am not root: ${missing[*]}"
  say "install them with: sudo apt-get install --no-install-recommends ${missing[*]}"
  exit 1
fi
if [ -n "$check_only" ]; then
  say "these packages are missing: ${missing[*]}"
  exit 1
fi
command -v apt-get >/dev/null 2>&1 || { say "no apt-get to install ${missing[*]}"; exit 1; }

# ---- install with every service start denied, then disable what the new packages enabled
service_pids() {
  local comm pid
  for comm in /proc/[0-9]*/comm; do
    case " $SERVICE_PROGRAMS " in *" $(cat "$comm" 2>/dev/null) "*)
      pid=${comm#/proc/}; echo "${pid%/comm}:$(cat "$comm" 2>/dev/null)" ;;
    esac
  done | sort
}
installed_packages() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1 == "ii" {print $2}' | sort
}
held=""
release_services() {
  # only the file this script wrote: one that was there before (or replaced since) stays
  if [ -n "$held" ] && [ -f "$POLICY" ] && grep -qxF "$POLICY_MARK" "$POLICY"; then
    rm -f "$POLICY"
  fi
  held=""
}
hold_services() {
  local owner
  if [ -f "$POLICY" ] && [ ! -L "$POLICY" ] && grep -qxF "$POLICY_MARK" "$POLICY"; then
    # ours: another set-up's, or one a killed set-up left behind
    owner=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$POLICY")
    if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
      say "another set-up (pid $owner) is installing packages: try again when it has finished"
      exit 1
    fi
    rm -f "$POLICY"   # left by a set-up that was killed: made afresh below, removed at the end
  fi
  if [ -e "$POLICY" ] || [ -L "$POLICY" ]; then
    say "$POLICY exists: it decides whether the packages' services start (the check afterwards still runs)"
    return 0
  fi
  held=1
  trap 'release_services' EXIT
  trap 'release_services; exit 130' INT TERM HUP
  # noclobber: created, never written through a file that appeared meanwhile
  ( set -o noclobber; printf '#!/bin/sh\n%s\n# pid %s\n# no service starts while iolab installs packages\nexit 101\n' \
      "$POLICY_MARK" "$$" >"$POLICY" ) || { held=""; say "cannot create $POLICY"; exit 1; }
  chmod 0755 "$POLICY"
}
disable_services() {
  local package units scripts
  for package in "$@"; do
    units=$(dpkg -L "$package" 2>/dev/null | grep -E '^(/usr)?/lib/systemd/system/[^/@]+\.(service|socket|timer)$' \
              | xargs -r -n1 basename | sort -u) || true
    scripts=$(dpkg -L "$package" 2>/dev/null | grep -E '^/etc/init\.d/[^/]+$' | xargs -r -n1 basename) || true
    for unit in $units; do
      if command -v deb-systemd-helper >/dev/null 2>&1; then
        deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
      elif command -v systemctl >/dev/null 2>&1; then
        systemctl disable --quiet "$unit" >/dev/null 2>&1 || true
      fi
    done
    for script in $scripts; do
      command -v update-rc.d >/dev/null 2>&1 && { update-rc.d "$script" disable >/dev/null 2>&1 || true; }
    done
    [ -z "$units$scripts" ] || say "$package: services not started and disabled: $(echo $units $scripts)"
  done
}

before_pids=$(service_pids)
before_packages=$(installed_packages)
say "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
hold_services
log=$(mktemp)
rc=0
if ! apt-get update -qq >"$log" 2>&1 \
   || ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  rc=1
  say "apt-get failed: $(grep -m1 -E '^E:' "$log" || tail -n 1 "$log")"
fi
rm -f "$log"
# shellcheck disable=SC2046  # package names are words
disable_services $(comm -13 <(echo "$before_packages") <(installed_packages))
release_services
trap - EXIT INT TERM HUP
new_pids=$(comm -13 <(echo "$before_pids") <(service_pids))
if [ -n "$new_pids" ]; then
  say "the install started service processes (pid:program): $(echo $new_pids); stop them with kill"
  exit 1
fi
[ "$rc" -eq 0 ] || exit "$rc"
find_missing
if [ ${#missing[@]} -gt 0 ]; then
  say "installed, but still not found where Debian puts them: ${missing[*]}"
  exit 1
fi
exit 0
