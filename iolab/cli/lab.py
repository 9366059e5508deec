"""``iolab lab [--disk SIZE]... -- COMMAND ...``"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

HELP = "boot a throwaway VM with the distribution's kernel (cgroup v2, md, dm) and run a command inside"
DESCRIPTION = (
    "Rehearse a recipe or a setup plan on a real modern kernel before touching real disks: boot the "
    "installed stock kernel under qemu (TCG: no KVM needed) with this machine's root shared read-only, "
    "run COMMAND inside (e.g. `iolab lab --disk 2G --disk 2G -- iolab setup "
    "examples/plans/raid0-loops.yaml`), print its output and exit with its status. Each --disk is an "
    "empty raw virtio disk, listed in order in $IOLAB_LAB_DISKS inside; a scratch disk holds /var/tmp "
    "(backing files). The current directory is writable inside the VM only (an overlay, gone at power "
    "off), except the data directory, which is shared: run directories written there come back. "
    "TCG's CPU is 5-10x slower than this one's: keep throttled rates in the tens of MB/s and thousands "
    "of IOPS and check the cpu_bound flag. Needs qemu-system-x86, linux-image-amd64, busybox-static "
    "and virtme-ng: tools/install-lab-deps.sh (make lab-deps) installs them.")

EPILOG = """examples:
  iolab lab -- iolab recipes
  iolab lab --disk 2G --disk 2G -- iolab setup examples/plans/raid0-loops.yaml
  iolab lab -- iolab run quick --target emulated:sata-ssd --size 256M
  iolab lab --disk 1G -- sh -c 'lsblk; cat /sys/fs/cgroup/cgroup.controllers'"""

MIN_DISK = 16 * 1024**2
MAX_DISK = 64 * 1024**4


def add_arguments(parser) -> None:
    import argparse
    import textwrap
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the examples' lines
    parser.description = textwrap.fill(DESCRIPTION, 79)
    parser.epilog = EPILOG
    parser.add_argument("--disk", metavar="SIZE", action="append", default=[],
                        help="attach an empty raw disk of SIZE (sparse file on this machine; repeat for more)")
    parser.add_argument("--nvme", metavar="SIZE", action="append", default=[],
                        help="attach an emulated NVMe drive of SIZE (qemu's, with a SMART log, behind a PCIe Gen3 x4 "
                             "port; serial iolab-nvme1, ...)")
    parser.add_argument("--sata", metavar="SIZE", action="append", default=[],
                        help="attach an emulated SATA SSD of SIZE (qemu's ATA disk on the AHCI controller, with "
                             "SMART; serial iolab-sata1, ...; up to 6)")
    parser.add_argument("--scratch", metavar="SIZE", default="4G",
                        help="scratch disk formatted ext4 on /var/tmp inside (default 4G)")
    parser.add_argument("--memory", metavar="SIZE", default="2G", help="the VM's memory (default 2G)")
    parser.add_argument("--cpus", metavar="N", type=int, default=2, help="the VM's CPUs (default 2)")
    parser.add_argument("--data", metavar="DIR", default="data",
                        help="data directory shared read-write with the VM (default: ./data)")
    parser.add_argument("--rwdir", metavar="DIR", action="append", default=[],
                        help="another directory the VM may write (same path inside; repeat)")
    parser.add_argument("--ssh-port", metavar="PORT", type=int, default=None,
                        help="give the VM one network device: this machine's 127.0.0.1:PORT reaches the guest's "
                             "port 22 (start an sshd there), and the guest reaches nothing (default: no network)")
    parser.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                        help="kill the VM after this many seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="what to run inside (a program and its arguments; `iolab` is this iolab)")


def _sizes(args) -> None:
    from iolab.core.errors import IolabError
    from iolab.core.units import parse_size
    from iolab.lab.vm import check_sata_count
    for option, value in [("--scratch", args.scratch), ("--memory", args.memory)] + \
            [("--disk", value) for value in args.disk] + [("--nvme", value) for value in args.nvme] + \
            [("--sata", value) for value in args.sata]:
        nbytes = parse_size(value, context=f"{option} {value}")
        if option in ("--disk", "--nvme", "--sata") and not MIN_DISK <= nbytes <= MAX_DISK:
            raise IolabError("a lab disk must be between 16M and 64T", context=f"{option} {value}")
    if args.cpus < 1:
        raise IolabError(f"must be at least 1, got {args.cpus}", context="--cpus")
    check_sata_count(len(args.sata))


def _config(args, command: list[str]):
    from iolab.core.errors import IolabError
    from iolab.lab import LabConfig
    from iolab.lab.vm import CHECKOUT, hidden_in_guest
    cwd = Path.cwd()
    if cwd == Path("/tmp"):
        raise IolabError("the VM has its own /tmp: run iolab lab from a directory below it or on disk",
                         context=f"cwd {cwd}")
    # the guest's /tmp is its own: share what it must see from the host's /tmp explicitly
    rodirs = [d for d in dict.fromkeys([CHECKOUT.resolve(), cwd]) if hidden_in_guest(d)]
    data = (cwd / args.data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    rwdirs = [data] + [Path(d).resolve() for d in args.rwdir]
    for directory in rwdirs:
        if not directory.is_dir():
            raise IolabError("no such directory", context=f"--rwdir {directory}")
    venv_bin = Path(sys.prefix) / "bin"
    return LabConfig(memory=args.memory, cpus=args.cpus, scratch=args.scratch, disks=list(args.disk), nvme=list(args.nvme),
                     sata=list(args.sata), rwdirs=rwdirs, rodirs=rodirs, cwd=cwd, timeout=args.timeout, overlay_cwd=True,
                     ssh_port=args.ssh_port,
                     env={"PATH": f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})


def run(args) -> int:
    from iolab.core.errors import IolabError
    from iolab.lab import availability, run_in_vm
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise IolabError("no command to run inside the VM", context="iolab lab",
                         hint="e.g. iolab lab -- iolab recipes")
    _sizes(args)
    why_not = availability()
    if why_not:
        raise IolabError(why_not, context="iolab lab",
                         hint="install the lab's parts with tools/install-lab-deps.sh (or make lab-deps)")
    config = _config(args, command)
    print(f"iolab lab: booting the stock kernel under TCG (~1 min), then: {shlex.join(command)}",
          file=sys.stderr, flush=True)
    rc = run_in_vm(shlex.join(command), config)
    print(f"iolab lab: the command exited with {rc}; shared back: {', '.join(map(str, config.rwdirs))}",
          file=sys.stderr, flush=True)
    return rc if 0 <= rc < 256 else 1

