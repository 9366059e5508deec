"""What other tools wrote, brought into the store, and iolab's runs written the way other tools read:
plain fio JSON and bench-fio trees, CrystalDiskMark/KDiskMark text exports (in), fio-plot's folder
layout and CrystalDiskMark's text layout (out); the JSON Schemas editors read for iolab's YAML files.
"""

#: The layers below this one its modules may import (their own always); tests/test_layout.py checks every import.
MAY_IMPORT = ("core", "analysis", "isolation", "devices", "engine", "classic", "fleet")
