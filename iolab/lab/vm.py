"""Boot the lab VM, run one command inside, return its exit status.

The VM is virtme-ng (``vng``) over qemu with TCG (``--disable-kvm``: a stock
kernel hangs under this host's nested KVM) and ``-cpu Nehalem`` (no AVX: numpy's
AVX2 paths crash under TCG's default CPU model). Scratch disks are sparse files
in a temporary directory on disk (never tmpfs), attached with ``--disk`` and
removed afterwards. The whole process group of ``vng`` (its ``virtme-run`` and
qemu) is killed on timeout, Ctrl-C or SIGTERM, so no qemu is left behind; a
:class:`~iolab.lab.guard.Guard` does both if iolab itself is killed (see there).
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from iolab.core import mountinfo, processes
from iolab.core.errors import IolabError
from iolab.core.signals import sigterm_raises
from iolab.core.units import parse_size
from iolab.lab import guest, pyimage
from iolab.lab.guard import Guard, held_signals

log = logging.getLogger(__name__)

CHECKOUT = Path(__file__).resolve().parents[2]
LAB_VENV_ENV = "IOLAB_LAB_VENV"
KERNEL_ENV = "IOLAB_LAB_KERNEL"
DEFAULT_DISK_DIR = "/var/tmp"


@dataclass
class LabConfig:
    """What the VM gets.

    ``scratch`` is the size of the first disk, which the guest formats (ext4) and
    mounts on /var/tmp (iolab's default place for backing files, and $TMPDIR);
    ``disks`` are further raw disks, visible in the guest as $IOLAB_LAB_DISKS in
    order. ``rwdirs`` are host directories the guest may write (same path inside);
    ``rodirs`` are host directories it may read that the shared root does not show
    (the guest's /tmp is its own: a checkout under the host's /tmp is shared this way).
    """
    memory: str = "2G"
    cpus: int = 2
    scratch: str | None = "4G"
    disks: list[str] = field(default_factory=list)
    rwdirs: list[Path] = field(default_factory=list)
    rodirs: list[Path] = field(default_factory=list)
    cwd: Path = CHECKOUT
    timeout: float | None = None
    kernel: Path | None = None
    disk_dir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    nvme: list[str] = field(default_factory=list)  # emulated NVMe drives (sizes): serial iolab-nvmeN, /dev/nvme*
    sata: list[str] = field(default_factory=list)  # emulated SATA SSDs (sizes) on q35's AHCI: serial iolab-sataN, /dev/sd*
    python_images: bool = True  # stdlib and .venv from ext4 images, not 9p (see pyimage)
    overlay_cwd: bool = False   # cwd writable inside the guest only (needs the scratch disk)
    ssh_port: int | None = None  # this machine's 127.0.0.1:ssh_port reaches the guest's port 22 (see network_options)


def lab_venv() -> Path:
    return Path(os.environ.get(LAB_VENV_ENV) or CHECKOUT / ".venv-lab")


def find_vng() -> Path | None:
    candidate = lab_venv() / "bin" / "vng"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("vng")
    return Path(found) if found else None


def find_kernel() -> Path | None:
    """The stock kernel to boot: $IOLAB_LAB_KERNEL, else the newest /boot/vmlinuz-*."""
    env = os.environ.get(KERNEL_ENV)
    if env:
        return Path(env)
    kernels = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: _version_key(p.name))
    return kernels[-1] if kernels else None


def _version_key(name: str) -> list:
    import re
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def availability() -> str | None:
    """None when the lab VM can be booted here, else one sentence saying why not."""
    if not shutil.which("qemu-system-x86_64"):
        return "no qemu-system-x86_64 (Debian package qemu-system-x86)"
    if find_kernel() is None:
        return "no kernel under /boot (Debian package linux-image-amd64)"
    if find_vng() is None:
        return f"no virtme-ng (vng) in {lab_venv()} or on PATH (run tools/install-lab-deps.sh)"
    if os.geteuid() != 0:
        return "not root (the lab needs to read the kernel and run qemu as root)"
    return None


def _refuse_tmpfs(directory: Path) -> None:
    mount = mountinfo.mount_of(directory)
    fstype = mount.fstype if mount else ""
    if fstype in ("tmpfs", "ramfs"):
        raise IolabError(f"is on {fstype}: scratch disks must be on disk, not in RAM",
                         context=f"lab disk directory {directory}", hint="choose another directory")


def _make_disks(workdir: Path, config: LabConfig) -> list[Path]:
    sizes = ([config.scratch] if config.scratch else []) + list(config.disks) + list(config.nvme) + list(config.sata)
    files = []
    for index, size in enumerate(sizes):
        nbytes = parse_size(size, context=f"lab disk {index + 1} size")
        path = workdir / f"disk{index}.img"
        with open(path, "wb") as handle:
            handle.truncate(nbytes)  # sparse: costs only what the guest writes
        files.append(path)
    return files


def vng_argv(config: LabConfig, disks: list[Path], script: Path,
             py_images: list[pyimage.PyImage] = ()) -> list[str]:
    """The vng command line. Disks are given to qemu directly (raw format, a
    virtio-blk serial per disk, see :func:`guest.disk_serials`) rather than by
    ``--disk``, which leaves qemu guessing the format and names them by path."""
    kernel = config.kernel or find_kernel()
    qemu = ["-machine", "q35", "-cpu", "Nehalem"]  # q35 (vng's choice under TCG too): PCIe ports and AHCI
    for index, (disk, serial) in enumerate(zip(disks, guest.disk_serials(disks_count(config)))):
        if "," in str(disk) or " " in str(disk):
            raise IolabError("must not contain ',' or spaces (qemu option syntax)", context=f"lab disk path {disk}")
        qemu += _drive(f"iolab{index}", disk, f"{_cache(config, index)},aio=threads") + [
                 "-device", f"virtio-blk-pci,drive=iolab{index},serial={serial}"]
    virtio = len(guest.disk_serials(disks_count(config)))
    qemu += nvme_options(disks[virtio:virtio + len(config.nvme)])
    qemu += sata_options(disks[virtio + len(config.nvme):])
    qemu += network_options(config.ssh_port)
    for index, (image, serial) in enumerate(zip(py_images, guest.py_serials(len(py_images)))):
        qemu += _drive(f"iolabpy{index}", image.image, "readonly=on") + [
                 "-device", f"virtio-blk-pci,drive=iolabpy{index},serial={serial}"]
    argv = [str(find_vng()), "--disable-kvm", "-r", str(kernel), "--memory", config.memory,
            "--cpus", str(config.cpus), f"--qemu-opts={' '.join(qemu)}"]
    for directory in config.rodirs:
        argv += ["--rodir", str(directory)]
    for directory in config.rwdirs:
        argv += ["--rwdir", str(directory)]
    return argv + ["--exec", f"sh {script}"]


#: the PCIe root port each emulated NVMe drive sits behind advertises a Gen3 x4 link, a usual NVMe drive's slot; the
#: drive's own link is what the kernel trains between them (its generation and width are the drive's port in the record)
NVME_PORT_SPEED, NVME_PORT_WIDTH = "8", "4"
#: the emulated SATA SSD's model (qemu's ide-hd; a rotation rate of 1 means "non-rotating" in ATA IDENTIFY word 217)
SATA_MODEL = "iolab-sata-ssd"


#: an emulated drive's image reached directly: no host page cache between the guest's driver and the image file
DIRECT = "cache=none,aio=threads"
#: q35's built-in AHCI controller has six ports (ide.0 ... ide.5), one SATA drive each
AHCI_PORTS = 6


def _drive(drive_id: str, image: Path, options: str) -> list[str]:
    """qemu's ``-drive`` for one raw image, attached by ``drive_id`` to the ``-device`` that follows it."""
    return ["-drive", f"if=none,id={drive_id},file={image},format=raw,{options}"]


def check_sata_count(count: int) -> None:
    """Refuses more SATA drives than q35's AHCI controller has ports (the CLI asks before it makes anything)."""
    if count > AHCI_PORTS:
        raise IolabError(f"q35's AHCI controller has {AHCI_PORTS} ports", context=f"{count} SATA drives")


def nvme_options(images: list[Path]) -> list[str]:
    """qemu's emulated NVMe controller (NVMe 1.4, a SMART / Health log, 50 C) over each image, each behind its own PCIe
    root port (Gen3 x4): ``nvme`` and ``smartctl`` in the guest have a real drive to read, and sysfs a real PCIe link;
    its serial is ``iolab-nvme1``, ... in order."""
    options = []
    for index, image in enumerate(images):
        options += ["-device", f"pcie-root-port,id=iolabport{index},bus=pcie.0,chassis={index + 1},"
                               f"x-speed={NVME_PORT_SPEED},x-width={NVME_PORT_WIDTH}",
                    *_drive(f"iolabnvme{index}", image, DIRECT),
                    "-device", f"nvme,serial=iolab-nvme{index + 1},drive=iolabnvme{index},bus=iolabport{index}"]
    return options


def sata_options(images: list[Path]) -> list[str]:
    """A SATA SSD over each image on q35's built-in AHCI controller (ports ``ide.0`` ...): qemu's ATA disk answers
    IDENTIFY and SMART (attribute 190, airflow temperature), so ``smartctl`` reads a real ATA drive through the
    kernel's libata, and sysfs has its SATA link; serial ``iolab-sata1``, ... in order."""
    check_sata_count(len(images))
    options = []
    for index, image in enumerate(images):
        options += [*_drive(f"iolabsata{index}", image, DIRECT),
                    "-device", f"ide-hd,drive=iolabsata{index},bus=ide.{index},serial=iolab-sata{index + 1},"
                               f"model={SATA_MODEL},rotation_rate=1"]
    return options


def network_options(ssh_port: int | None) -> list[str]:
    """One user-mode network device whose only way in is this machine's ``127.0.0.1:ssh_port`` forwarded to
    the guest's port 22, and no way out (``restrict=on``: the guest reaches neither this machine nor any
    other; the forwarding rule is not affected). None: the VM has no network device at all.

    The guest gives the device the address qemu forwards to (:data:`guest.NET_ADDRESS`, found by its MAC).
    Any local user can connect to the port, as to any sshd: what lets a connection in is the guest sshd's
    authorized key."""
    if ssh_port is None:
        return []
    if not 1024 <= ssh_port <= 65535:
        raise IolabError("must be between 1024 and 65535", context=f"lab ssh port {ssh_port}")
    return ["-netdev", f"user,id=iolabnet,restrict=on,hostfwd=tcp:127.0.0.1:{ssh_port}-{guest.NET_ADDRESS}:22",
            "-device", f"virtio-net-pci,netdev=iolabnet,mac={guest.NET_MAC}"]


def _cache(config: LabConfig, index: int) -> str:
    """qemu's cache mode for lab disk ``index``: the scratch disk (the first, when there is one) ignores the
    guest's cache flushes, the test disks keep them.

    The scratch disk holds the guest's /var/tmp: the backing files of every loop and emulated device the lab
    tests build. With flushes passed on, each fsync in the guest cost a host fdatasync (~20 ms here), on the
    emulated sata-ssd as much as on the hdd, above the hdd's own 8 ms flush delay: the emulated devices were
    told apart by the host's disk, not by their profiles. The disk is thrown away with the VM, so a flush
    protects nothing on it. Writes still bypass the host's page cache (direct).
    """
    if config.scratch and index == 0:
        return "cache.direct=on,cache.no-flush=on"
    return "cache=none"


def hidden_in_guest(path: Path) -> bool:
    """Whether the guest's own tmpfs /tmp hides ``path`` of the host."""
    return str(path) == "/tmp" or str(path).startswith("/tmp/")


def disks_count(config: LabConfig) -> tuple[bool, int]:
    return bool(config.scratch), len(config.disks)


def run_in_vm(command: str, config: LabConfig | None = None) -> int:
    """Boot the VM, run ``command`` (a shell command line) inside, return its exit status.

    Raises IolabError when the lab is not available here or the VM outlives
    ``config.timeout``; Ctrl-C and SIGTERM kill the VM and propagate (KeyboardInterrupt).
    Every way out removes the VM's work directory and leaves no qemu.
    """
    config = config or LabConfig()
    why_not = availability()
    if why_not:
        raise IolabError(why_not, context="lab VM")
    disk_dir = Path(config.disk_dir or DEFAULT_DISK_DIR)
    _refuse_tmpfs(disk_dir.resolve())
    workdir, guard = None, None
    with sigterm_raises(lambda: KeyboardInterrupt("SIGTERM")):
        try:
            with held_signals():  # no interrupt between making the directory and its guard
                workdir = Path(tempfile.mkdtemp(prefix="iolab-lab-", dir=disk_dir))
                guard = Guard(workdir)
            return _prepare_and_boot(command, config, workdir, disk_dir, guard)
        finally:
            with held_signals():  # a second Ctrl-C must not cut the removal short
                if workdir is not None:
                    shutil.rmtree(workdir, ignore_errors=True)
                if guard is not None:
                    guard.release()


def _prepare_and_boot(command: str, config: LabConfig, workdir: Path, disk_dir: Path, guard: Guard) -> int:
    """Disks, the guest's script and the Python images in ``workdir``, then the VM."""
    disks = _make_disks(workdir, config)
    control = workdir / "control"
    control.mkdir()
    script = control / "guest.sh"
    py_images = _python_images(config, disk_dir)
    script.write_text(guest.script(command, scratch=bool(config.scratch), n_disks=len(config.disks),
                                   env=config.env, cwd=config.cwd, rwdirs=config.rwdirs,
                                   py_mounts=[image.source for image in py_images],
                                   overlay_cwd=config.overlay_cwd, network=config.ssh_port is not None))
    config = _with_rwdir(config, control)
    return _boot(vng_argv(config, disks, script, py_images), config.timeout, guard)


def _python_images(config: LabConfig, disk_dir: Path) -> list[pyimage.PyImage]:
    if not config.python_images:
        return []
    started = time.monotonic()
    pyimage.compile_checkout(CHECKOUT)
    made = pyimage.images(disk_dir, CHECKOUT / ".venv")
    log.info("lab: python images ready in %.1f s", time.monotonic() - started)
    return made


def _with_rwdir(config: LabConfig, directory: Path) -> LabConfig:
    from dataclasses import replace
    return replace(config, rwdirs=[*config.rwdirs, directory])


def _boot(argv: list[str], timeout: float | None, guard: Guard | None = None) -> int:
    env = dict(os.environ, PATH=f"{Path(argv[0]).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    log.info("lab: %s", " ".join(argv))
    started = time.monotonic()
    process, relays = None, []
    try:
        with held_signals():  # the VM is never running without a handle here and in its guard
            # through pipes: virtme-ng reopens /proc/self/fd/1 for the guest's console, which on a file
            # opens it anew at offset 0 (O_TRUNC): a log the caller redirected lost what came before
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=env, start_new_session=True)
            if guard is not None:
                guard.watch(process.pid)
            relays = [_relay(process.stdout, sys.stdout), _relay(process.stderr, sys.stderr)]
        rc = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with held_signals():
            processes.end(process, group=True)  # SIGTERM, 5 s, SIGKILL; reaped
        raise IolabError(f"did not finish within {timeout:g} s and was killed", context="lab VM") from None
    except BaseException:
        if process is not None:
            with held_signals():
                processes.end(process, group=True)  # SIGTERM, 5 s, SIGKILL; reaped
        raise
    finally:
        for relay in relays:
            relay.join(timeout=5)
    log.info("lab: VM exited with %s after %.0f s", rc, time.monotonic() - started)
    return rc


def _relay(stream, sink) -> threading.Thread:
    """Copy ``stream`` (a pipe from the VM) to ``sink`` as it comes, until the VM closes it."""
    def copy() -> None:
        out = getattr(sink, "buffer", sink)
        with stream:
            for chunk in iter(lambda: stream.read1(65536), b""):
                out.write(chunk)
                out.flush()

    thread = threading.Thread(target=copy, name="lab-console", daemon=True)
    thread.start()
    return thread
