"""The classic tools the articles used, as engines beside fio: Bonnie++, hdparm, GNOME Disks,
pgbench on its own PostgreSQL cluster, sql-bench on its own MariaDB server, and the originals run beside
their fio equivalents.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation", "devices", "engine")
