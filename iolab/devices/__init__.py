"""Block devices and what may be done to them: the inventory and its safety verdicts,
loop devices, emulated devices with known limits, and setup plans (partition, mkfs, RAID, mount)
with their size limits.

May import: iolab.core, iolab.analysis, iolab.isolation (an emulated device is throttled by a cgroup).
"""
