"""Many servers at once: the inventory, fio servers and SSH tunnels, the server-side job gate,
fleet runs through one fio client, and batch runs of the measure notebook per server.

May import: every layer below (core, analysis, isolation, devices, engine, classic).
"""
