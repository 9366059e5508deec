"""Keeping the page cache out of a measurement, and proving it: memory- and io-limited
cgroups (v1 and v2, or a systemd scope), huge-page reservations, verified cache drops and the
block-device counters that show what the device really served.

May import: iolab.core.
"""
