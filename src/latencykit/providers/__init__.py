"""Provider adapters: translate SDK calls and stream events into the timing core.

``_streams`` holds the sync/async stream shells shared by both providers; ``anthropic`` and
``openai`` hold the event taps, the resource subclasses and the client classes. May import
``latencykit.core`` and ``latencykit.telemetry``.
"""
