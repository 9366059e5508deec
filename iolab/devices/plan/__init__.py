"""Device setup as code: a YAML plan, a dry run, setup step by step, teardown in reverse.

A plan (every section optional, but something must be in it)::

    name: two-loops                 # optional, defaults to the file name
    description: one line
    loop_devices:                   # files iolab creates, attached with direct I/O
      - name: disk1
        file: images/disk1.img      # relative to the plan's directory; must not exist yet
        size: 256M
        sector_size: 512            # optional: 512 (default), 1024, 2048 or 4096
        direct_io: true             # optional, default true
        sparse: false               # optional: true = truncate instead of fallocate
    devices:                        # existing block devices (safety-checked)
      - name: ssd
        path: /dev/disk/by-id/nvme-XYZ
    raid:                           # mdadm RAID0 or RAID1 arrays
      - name: r0                    # becomes /dev/md/r0
        level: 0                    # 0 (striping) or 1 (mirror, created --assume-clean: no resync
                                    # runs under a benchmark; fresh members read back as zeros alike)
        chunk: 512K                 # RAID0 only: optional, default 512K (mdadm's), always passed explicitly
        members: [disk1, disk2]
    delay:                          # dm-delay: a device slow inside the kernel (/dev/mapper/<name>)
      - {name: slow, device: disk2, read_ms: 8, write_ms: 8}
    cache:                          # dm-cache: origin cached on a fast device (/dev/mapper/<name>)
      - {name: cached, origin: slow, cache: ssd, mode: writethrough, policy: smq, block_size: 64K}
                                    # (keys, carved metadata, teardown: iolab.devices.plan.dm)
    iscsi:                          # a plan device exported by LIO on 127.0.0.1, logged in with open-iscsi:
      - {name: remote, export: disk2}   # the SCSI disk that appears (/dev/sdX) is the device `remote`
                                    # (target names, iscsid, teardown: iolab.devices.plan.iscsi)
    partitions:                     # a GPT on a device, partitions 1 MiB-aligned
      - device: disk1
        parts:
          - {name: disk1p1, size: 100M, label: data}
          - {name: disk1p2}         # no size: the rest (only the last one)
    filesystems:
      - device: disk1p1
        type: ext4                  # ext4 or xfs
        options: -E lazy_itable_init=0   # mkfs options: a string or a list
        label: data
        mount: /mnt/iolab/ext4      # optional; created if missing, removed on teardown
        mount_options: noatime      # optional: a string or a list

Every name (loop device, device, array, partition) is one namespace; each
device is used once (as an array member, a partitioned disk or a file system).

**Safety.** Existing devices must pass :func:`iolab.devices.safety.check_writable`
(before anything is done and again right before each write, followed by an
``O_EXCL`` open); ``confirm`` (``--confirm DEVICE``) overrides only a signature,
device by device. Devices the plan itself creates (loop devices over new
files, partitions, arrays) are checked for being mounted, swap, held or in the
chain of / but not for stale signatures: their content is the plan's to write.
Existing loop files are never reused (teardown deletes the files iolab made).

**State.** Each step is recorded *before* it acts (``pending``) and after it
succeeded (``done``, with what it made: the loop device, the md device, the
mount) in ``<plan dir>/.<plan file stem>.state.json``, written atomically. A
new process can therefore tear down (``iolab teardown PLAN.yaml``), also after
a crash in the middle of a step. The state file lives beside the plan (not in
/run) so that files iolab created are still found and deleted after a reboot;
teardown checks every resource's identity (a loop device's backing file, a
mount's device number, an array's members, a file's inode) before undoing it,
so a stale state never touches something that is not iolab's.

**Teardown** runs in reverse: umount (and remove mount points iolab created),
``mdadm --stop``, detach loop devices, delete files and directories iolab
created. It does not wipe: partition tables and file systems on existing
devices stay. If setup fails or is interrupted (Ctrl-C, SIGTERM), it tears
down what it did and re-raises; signals are held off during teardown.

The package's modules, in the order a plan meets them: :mod:`~iolab.devices.plan.schema` (the fields a
plan file may hold), :mod:`~iolab.devices.plan.load` (reading it, what spans entries) with
:mod:`~iolab.devices.plan.limits` (sizes), :mod:`~iolab.devices.plan.model` (what a plan is),
:mod:`~iolab.devices.plan.steps` (its steps, their exact commands, the checks before, carrying them
out), :mod:`~iolab.devices.plan.state` (the state file), :mod:`~iolab.devices.plan.undo` (teardown);
:mod:`~iolab.devices.plan.dm` and :mod:`~iolab.devices.plan.iscsi` for the ``delay``/``cache`` and
``iscsi`` entries.
"""
from iolab.devices.plan.load import load_plan
from iolab.devices.plan.model import DeviceSpec, FsSpec, LoopSpec, PartSpec, Plan, RaidSpec, TableSpec, state_path
from iolab.devices.plan.state import status
from iolab.devices.plan.steps import Step, plan_commands, preflight, setup
from iolab.devices.plan.undo import teardown, teardown_commands

__all__ = ["DeviceSpec", "FsSpec", "LoopSpec", "PartSpec", "Plan", "RaidSpec", "Step", "TableSpec", "load_plan",
           "plan_commands", "preflight", "setup", "state_path", "status", "teardown", "teardown_commands"]
