#!/usr/bin/env bash
# Install the distro packages iolab needs, only those missing, so a second run is
# quick and works offline. Debian/Ubuntu (apt). Run as root, or with sudo available.
set -euo pipefail

# command -> Debian package
declare -A NEED=(
  [fio]=fio
  [losetup]=mount
  [findmnt]=util-linux
  [wipefs]=util-linux
  [mkfs.ext4]=e2fsprogs
  [mkfs.xfs]=xfsprogs
  [sgdisk]=gdisk
  [sfdisk]=fdisk   # the tests make an MBR disk image with it (a partition over a loop device)
  [mdadm]=mdadm
  [hdparm]=hdparm
  [bonnie++]=bonnie++
  [chromium]=chromium
  [ssh]=openssh-client
  [sshd]=openssh-server
  [ip]=iproute2
  [mariadbd]=mariadb-server  # the sqlbench recipe's server (Debian: /usr/sbin/mariadbd, mariadb-install-db)
)
missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
# python3 -m venv needs ensurepip (python3-venv on Debian) unless python3 already has it
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
# PostgreSQL's server programs are not on PATH on Debian (/usr/lib/postgresql/N/bin)
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# Japanese reports: a CJK font for the browser (HTML) and for the charts' fallback
if command -v fc-list >/dev/null 2>&1 && [ -z "$(fc-list :lang=ja family 2>/dev/null)" ]; then
  missing+=(fonts-ipaexfont-gothic)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "iolab setup: these packages are missing and I am not root: ${missing[*]}" >&2
  echo "install them with: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "iolab setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
