"""Where finished call records go: the in-process Recorder, its summaries and reports.

Layer: above ``core``. May import ``latencykit.core``, numpy and the OpenTelemetry API; never
the providers, the emulator or anything above them.
"""
