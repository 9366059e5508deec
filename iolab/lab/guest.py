"""The shell script that runs first inside the lab guest.

The guest's root is the host's, read-only, with small tmpfs overlays (/tmp,
/var): a loop device over a file there cannot use direct I/O and a few hundred
MiB fill it. So the first disk (the scratch disk, virtio serial
``iolab-scratch``) is formatted ext4 and mounted on /var/tmp, where iolab keeps
backing files by default, and $TMPDIR points into it. Result directories shared
from the host under /var/tmp are bound back on top of it. Further disks
(serials ``iolab-disk1``, ...) are left raw and listed, in order, in
$IOLAB_LAB_DISKS. Python writes no bytecode (the checkout is read-only there).
"""
from __future__ import annotations

import shlex
from pathlib import Path

SCRATCH_MOUNT = "/var/tmp"
SCRATCH_SERIAL = "iolab-scratch"
KEEP = "/run/iolab-keep"
NET_MAC = "52:54:00:10:a6:01"  # the lab's network device (vm.network_options), found by this address
NET_ADDRESS = "10.0.2.15"     # qemu's user-mode network: the guest address its forwarding rules reach

_FIND_DISK = r'''disk_by_serial() {
  for b in /sys/block/vd*; do
    [ "$(cat "$b/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${b##*/}"; return 0; }
  done
  echo "lab: no disk with serial $1" >&2; return 1
}'''


def disk_serials(counts: tuple[bool, int]) -> list[str]:
    scratch, n_disks = counts
    return ([SCRATCH_SERIAL] if scratch else []) + [f"iolab-disk{i + 1}" for i in range(n_disks)]


def py_serials(count: int) -> list[str]:
    return [f"iolab-py{i}" for i in range(count)]


def _mount_python(sources: list[Path]) -> list[str]:
    """Mount the read-only python images (see iolab.lab.pyimage) on their source paths."""
    lines = []
    for serial, source in zip(py_serials(len(sources)), sources):
        quoted = shlex.quote(str(source))
        lines.append(f'd=$(disk_by_serial {serial}) && mount -t ext4 -o ro,noload "$d" {quoted} '
                     f'|| echo "lab: python image {serial} not mounted, {quoted} stays on 9p (slow)" >&2')
    return lines


def _network() -> list[str]:
    """Give the lab's network device (found by its MAC) the address qemu's forwarding reaches."""
    return ["ip link set lo up", "net=",
            'for n in /sys/class/net/*; do [ "$(cat "$n/address")" = ' + NET_MAC + ' ] && '
            f'ip addr add {NET_ADDRESS}/24 dev "${{n##*/}}" && ip link set "${{n##*/}}" up && net=1; done',
            '[ -n "$net" ] || { echo "lab: the network device (' + NET_MAC + ') did not come up" >&2; exit 97; }']


def _under_scratch(directory: Path) -> bool:
    return str(directory).startswith(SCRATCH_MOUNT.rstrip("/") + "/")


def _mount_scratch(rwdirs: list[Path]) -> list[str]:
    kept = [d for d in rwdirs if _under_scratch(Path(d))]
    lines = ['scratch=$(disk_by_serial iolab-scratch) || exit 97']
    for index, directory in enumerate(kept):
        lines.append(f"mkdir -p {KEEP}/{index} && mount --bind {shlex.quote(str(directory))} {KEEP}/{index}")
    lines += [
        'mkfs.ext4 -q -F -L iolab-scratch "$scratch" >/dev/null || { echo "lab: cannot format $scratch" >&2; exit 97; }',
        f'mount "$scratch" {SCRATCH_MOUNT} || {{ echo "lab: cannot mount $scratch" >&2; exit 97; }}',
        f"mkdir -p {SCRATCH_MOUNT}/tmp && export TMPDIR={SCRATCH_MOUNT}/tmp",
    ]
    for index, directory in enumerate(kept):
        quoted = shlex.quote(str(directory))
        lines.append(f"mkdir -p {quoted} && mount --bind {KEEP}/{index} {quoted}")
    return lines


def _overlay_cwd(cwd: Path, rwdirs: list[Path]) -> list[str]:
    """Make ``cwd`` writable in the guest only: an overlay whose upper layer is on the
    scratch disk (so `iolab setup` can write its state file beside a plan; gone at power
    off). Result directories under ``cwd`` are bound back on top of it."""
    kept = [d for d in rwdirs if str(d).startswith(str(cwd).rstrip("/") + "/")]
    quoted = shlex.quote(str(cwd))
    lines = [f"mkdir -p {SCRATCH_MOUNT}/.iolab-overlay/upper {SCRATCH_MOUNT}/.iolab-overlay/work"]
    for index, directory in enumerate(kept):
        lines.append(f"mkdir -p {KEEP}/o{index} && mount --bind {shlex.quote(str(directory))} {KEEP}/o{index}")
    lines.append(f"mount -t overlay iolab-cwd -o lowerdir={quoted},upperdir={SCRATCH_MOUNT}/.iolab-overlay/upper,"
                 f"workdir={SCRATCH_MOUNT}/.iolab-overlay/work {quoted} "
                 f'|| {{ echo "lab: cannot make {quoted} writable in the guest" >&2; exit 97; }}')
    for index, directory in enumerate(kept):
        lines.append(f"mount --bind {KEEP}/o{index} {shlex.quote(str(directory))}")
    return lines


def _unmount_scratch(rwdirs: list[Path]) -> list[str]:
    lines = ["cd / && sync"]
    for directory in reversed([d for d in rwdirs if _under_scratch(Path(d))]):
        lines.append(f"umount {shlex.quote(str(directory))} 2>/dev/null")
    return lines + [f"umount {SCRATCH_MOUNT} 2>/dev/null"]


def script(command: str, *, scratch: bool, n_disks: int, env: dict[str, str] | None = None,
           cwd: Path | str = "/", rwdirs: list[Path] | None = None, py_mounts: list[Path] | None = None,
           overlay_cwd: bool = False, network: bool = False) -> str:
    """The guest script: prepare disks, run ``command`` in ``cwd``, exit with its status."""
    rwdirs = list(rwdirs or [])
    serials = disk_serials((False, n_disks))
    lines = ["#!/bin/sh", "# iolab lab guest prelude", _FIND_DISK,
             "export PYTHONDONTWRITEBYTECODE=1 IOLAB_LAB=1", "IOLAB_LAB_DISKS=",
             # loop now, with 16 devices: /dev/loop-control and /dev/loop0..15 at once (virtme-ng's udevd also
             # runs and probes new block devices with blkid: byte-exact tests hold a BSD lock, see test_blockstat);
             # md and dm loaded as a distribution with mdadm and lvm2 has them (/proc/mdstat exists)
             "modprobe loop max_loop=16 2>/dev/null", "modprobe -a md_mod raid0 raid1 dm_mod 2>/dev/null",
             # /mnt writable as on any machine (plans mount under /mnt/iolab); the rest of / stays read-only
             "mount -t tmpfs -o mode=0755,size=1M iolab-mnt /mnt"]
    for serial in serials:
        lines.append(f'd=$(disk_by_serial {serial}) || exit 97; IOLAB_LAB_DISKS="${{IOLAB_LAB_DISKS:+$IOLAB_LAB_DISKS }}$d"')
    lines.append("export IOLAB_LAB_DISKS")
    if network:
        lines += _network()
    if scratch:
        lines += _mount_scratch(rwdirs)
        if overlay_cwd:
            lines += _overlay_cwd(Path(cwd), rwdirs)
    lines += _mount_python(list(py_mounts or []))  # last: an overlay on cwd would hide a .venv under it
    for key, value in (env or {}).items():
        lines.append(f"export {key}={shlex.quote(value)}")
    lines += [f"cd {shlex.quote(str(cwd))} || exit 97", "( " + command + "\n)", "rc=$?"]
    if scratch:
        lines += _unmount_scratch(rwdirs)
    lines += ["exit $rc", ""]
    return "\n".join(lines)
