"""Python's own files as read-only disk images for the lab guest.

The guest sees this machine's root over 9p, where every ``stat`` and ``open``
is a round trip through TCG-emulated kernel code: measured, ``import pandas``
took 71 s there (40 s of it system time) and ``import pytest`` 40 s. The same
files on an ext4 image attached as a virtio disk cost one block read each.
So the interpreter's prefix (stdlib, ``sys.base_prefix``) and the checkout's
``.venv`` are each copied into an ext4 image (``mkfs.ext4 -d``), cached under
``<disk dir>/iolab-lab.pyimages`` and rebuilt only when a file under them changed,
and the guest mounts them read-only on top of the same paths.

The checkout itself stays on 9p (it changes all the time and is small); its
bytecode is compiled on the host first (:func:`compile_checkout`), since the
guest cannot write ``__pycache__`` on its read-only root.
"""
from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from iolab.core.errors import IolabError

log = logging.getLogger(__name__)

CACHE_NAME = "iolab-lab.pyimages"  # not iolab-lab-*: those are one VM's, removed when it ends
SLACK = 64 * 1024**2  # ext4 metadata and journal on top of the files' own size


@dataclass(frozen=True)
class PyImage:
    """An image of ``source``, to be mounted read-only on ``source`` in the guest."""
    source: Path
    image: Path


def python_trees(venv: Path) -> list[Path]:
    """The trees Python reads while importing: the interpreter's prefix and the venv."""
    trees = [Path(sys.base_prefix).resolve()]
    if venv.is_dir() and venv.resolve() not in trees:
        trees.append(venv.resolve())
    return trees


def _fingerprint(tree: Path) -> tuple[str, int]:
    """A digest of every path, size and mtime under ``tree``, and the bytes it holds."""
    digest, total = hashlib.sha256(), 0
    for top, dirs, files in os.walk(tree):
        dirs.sort()
        for name in sorted(files):
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            digest.update(f"{top}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            total += st.st_blocks * 512
    return digest.hexdigest()[:16], total


def _build(tree: Path, image: Path, nbytes: int) -> None:
    partial = image.with_suffix(f".{os.getpid()}.partial")  # two builders never share a file
    with open(partial, "wb") as handle:
        handle.truncate(int(nbytes * 1.15) + SLACK)
    proc = subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "root_owner=0:0",
                           "-L", "iolab-py", "-d", str(tree), str(partial)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise IolabError(f"mkfs.ext4 -d failed: {proc.stderr.strip() or proc.returncode}",
                         context=f"lab python image of {tree}", hint="e2fsprogs 1.43 or newer is needed")
    os.replace(partial, image)  # a running VM keeps the old inode


def images(cache_root: Path, venv: Path) -> list[PyImage]:
    """Up-to-date images of :func:`python_trees`, built when missing or stale."""
    cache = cache_root / CACHE_NAME
    cache.mkdir(exist_ok=True)
    return [_image_for(tree, cache) for tree in python_trees(venv)]


def _image_for(tree: Path, cache: Path) -> PyImage:
    key, nbytes = _fingerprint(tree)
    stem = hashlib.sha256(str(tree).encode()).hexdigest()[:8]
    image = cache / f"{stem}-{key}.img"
    if not image.exists():
        for stale in cache.glob(f"{stem}-*.img"):
            stale.unlink(missing_ok=True)
        log.info("lab: building the python image of %s (%d MiB)", tree, nbytes >> 20)
        _build(tree, image, nbytes)
    return PyImage(tree, image)


def compile_checkout(checkout: Path) -> None:
    """Write the checkout's bytecode on the host (the guest's root is read-only)."""
    targets = [str(checkout / name) for name in ("iolab", "tests") if (checkout / name).is_dir()]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *targets],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        log.warning("lab: compileall of %s failed (imports in the guest will be slower): %s",
                    checkout, proc.stdout.strip()[-500:])
