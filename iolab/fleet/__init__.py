"""Many servers at once: the inventory, fio servers and SSH tunnels, the server-side job gate,
fleet runs through one fio client, and batch runs of the measure notebook per server.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation", "devices", "engine", "classic")
