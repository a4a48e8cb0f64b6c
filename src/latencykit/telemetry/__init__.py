"""Where finished call records go: the in-process Recorder, its summaries and reports.

May import ``latencykit.core`` and numpy; never the providers.
"""
