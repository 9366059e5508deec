"""The classic tools the articles used, as engines beside fio: Bonnie++, hdparm, GNOME Disks,
pgbench on its own PostgreSQL cluster, sql-bench on its own MariaDB server, and the originals run beside
their fio equivalents.

May import: iolab.core, iolab.analysis, iolab.isolation, iolab.devices, iolab.engine.
"""
