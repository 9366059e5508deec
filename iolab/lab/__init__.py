"""The lab: a throwaway VM with the distribution's own kernel.

This machine's kernel may lack what iolab's users have (cgroup v2, md, dm,
null_blk). :func:`iolab.lab.vm.run_in_vm` boots the installed stock kernel
under qemu (TCG, through virtme-ng) with this machine's root file system shared
read-only, scratch disks attached as real block devices and result directories
shared read-write, runs one shell command inside and returns its exit status.
``tools/install-lab-deps.sh`` installs what it needs.

- :mod:`iolab.lab.vm`: find the parts, boot, run, kill on timeout or Ctrl-C;
- :mod:`iolab.lab.guest`: the shell script that runs first inside the guest;
- :mod:`iolab.lab.pyimage`: the interpreter and ``.venv`` as cached ext4 images (9p is slow);
- :mod:`iolab.lab.tier`: ``python -m iolab.lab.tier``, the test tier that runs
  ``pytest -m 'lab or stock_kernel'`` (tests/lab and the host tests that need md, dm, cgroup v2
  or loop partitions) inside one VM booted through ``iolab lab`` (:mod:`iolab.cli.lab`).

It runs iolab's commands and tests inside the VM as programs, importing none of them.
"""
from iolab.lab.vm import LabConfig, availability, run_in_vm

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core",)

__all__ = ["LabConfig", "availability", "run_in_vm"]
