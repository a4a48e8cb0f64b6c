"""Provider adapters: translate SDK calls and stream events into the timing core.

``_streams`` holds the sync/async stream shells shared by both providers; ``anthropic`` holds
the Messages taps, resources and clients; ``_openai_chat`` / ``_openai_responses`` the two
OpenAI APIs and ``openai`` its clients; ``_http`` and ``_raw`` the calls no resource method
sent. The semantic cache is reached only through ``core._hooks.AnswerHook``.

Layer: above ``telemetry``, beside ``emulator`` (neither imports the other). May import
``latencykit.core`` and ``latencykit.telemetry``.
"""
