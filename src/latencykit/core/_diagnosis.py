"""The server's own cache verdict beside latencykit's: reading it, and whether the two agree.

OpenAI Responses (GPT-5.6+) return ``prompt_cache_diagnostics`` when a request names a
``comparison_response_id``: ``cache_hit``; ``cache_miss`` with a ``reason`` (``model_changed``,
``prompt_cache_key_changed``, ``tools_changed``, ``input_changed``, ``text_format_changed``,
``reasoning_effort_changed``, ``verbosity_changed``, ``context_compacted``,
``service_tier_changed``) and ``cache_missed_tokens``; ``comparison_response_not_found``; or
``unavailable`` (openai SDK 3.60, ``responses/response.py``). Anthropic's cache diagnostics
(beta) give ``system_changed`` / ``tools_changed`` / ``messages_changed`` / ``model_changed``.
Either lands in ``CallRecord.server_cache_miss_reason`` (OpenAI's hit as ``cache_hit``).

`diagnosis_agrees` compares: a server hit agrees with a call latencykit judged a read (``hit``
or ``partial``); a server miss agrees with latencykit's ``prefix_changed`` in the segment the
server names (``tools`` ↔ ``tools_changed``; ``system`` / ``message k`` ↔ ``input_changed`` on
OpenAI, ``system_changed`` / ``messages_changed`` on Anthropic; ``model`` ↔ ``model_changed``);
anything else is a disagreement. A verdict that compares nothing (not found, unavailable,
pending) is neither.
"""

from __future__ import annotations

from typing import Any, Optional

from ._record import CallRecord
from ._usage import _field

__all__ = ["NO_VERDICT", "diagnosis_agrees", "read_openai_diagnostics"]

NO_VERDICT = frozenset({"pending", "unavailable", "previous_message_not_found", "comparison_response_not_found", "unknown"})
"""Server diagnoses that compare nothing: never counted as agreeing or disagreeing."""
_READS = frozenset({"hit", "partial"})


def read_openai_diagnostics(rec: CallRecord, response: Any) -> None:
    """Record a Response's ``prompt_cache_diagnostics`` (when the request asked for them)."""
    diagnostics = _field(response, "prompt_cache_diagnostics")
    if diagnostics is None:
        return
    kind = _field(diagnostics, "type")
    if kind == "cache_miss":
        rec.server_cache_miss_reason = str(_field(diagnostics, "reason") or "unknown")
        missed = _field(diagnostics, "cache_missed_tokens")
        if isinstance(missed, int):
            rec.extra["server_cache_missed_tokens"] = missed
    else:
        rec.server_cache_miss_reason = str(kind or "unknown")


def _ours(rec: CallRecord) -> Optional[str]:
    """latencykit's miss reason in the server's words (``None``: no change-based explanation)."""
    if rec.cache_miss_reason != "prefix_changed":
        return None
    segment = str(rec.extra.get("cache_changed_segment") or "")
    if segment in ("model", "tools"):
        return f"{segment}_changed"
    if rec.provider == "anthropic":
        return "system_changed" if segment == "system" else "messages_changed"
    return "input_changed"


def diagnosis_agrees(rec: CallRecord) -> Optional[bool]:
    """Whether the server's cache verdict and latencykit's agree; ``None`` when there is nothing to compare."""
    server = rec.server_cache_miss_reason
    if server is None or server in NO_VERDICT or rec.cache_verdict is None:
        return None
    if server == "cache_hit":
        return rec.cache_verdict in _READS
    return _ours(rec) == server
