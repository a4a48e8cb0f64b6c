"""Traffic, demo and benchmark commands (the ``bench`` extra: emulator, rich, OTel SDK).

May import everything else in latencykit; nothing in the library imports it.
"""
