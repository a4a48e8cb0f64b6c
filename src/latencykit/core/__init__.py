"""Pure logic with no I/O: timing, records, request planning, cache verification, usage.

Owns: the per-call timing state machine (``_timing``) and record (``_record``); request
planning for the prompt cache (``_segments`` with ``_fingerprint``, ``_blocks``, ``_builder``,
``_tool_runs``, ``_message_runs``; ``_learn``, ``_breakpoints``, ``_ledger``), cache
verification (``_verify``), usage extraction (``_usage``), retries (``_retry``), the errors
users see (``_errors``) and the hook through which an upper layer may answer a call
(``_hooks``). Everything here is driven by an injected clock and plain method calls, so the
same code serves sync and async clients and both providers.

Layer: the bottom. May import only the standard library and numpy; every other
layer may import it.
"""
