"""Usage extraction: one normalized view of each provider's token counts.

Anthropic reports cache tokens *in addition to* ``input_tokens``; OpenAI reports
``cached_tokens`` as a *subset* of ``prompt_tokens`` / ``input_tokens``. Both are resolved
here, once, into the record's ``input_tokens`` (all input, cached included),
``cache_read_tokens`` and ``cache_write_tokens`` (``None`` when the server did not say).
Objects are read by attribute, so SDK models and test doubles both work.
"""

from __future__ import annotations

from typing import Any, Optional

from ._record import CallRecord

__all__ = ["apply_anthropic_usage", "apply_openai_chat_usage", "apply_openai_responses_usage"]


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) else None


def apply_anthropic_usage(rec: CallRecord, usage: Any) -> None:
    """Fold an Anthropic ``Usage`` / cumulative ``MessageDeltaUsage`` into ``rec``.

    ``message_delta`` usage is cumulative and its optional fields are omitted when not
    applicable, so a missing field keeps the value ``message_start`` gave.
    """
    if usage is None:
        return
    out = _int(getattr(usage, "output_tokens", None))
    if out is not None:
        rec.output_tokens = out
    uncached = _int(getattr(usage, "input_tokens", None))
    write = _int(getattr(usage, "cache_creation_input_tokens", None))
    read = _int(getattr(usage, "cache_read_input_tokens", None))
    if write is not None:
        rec.cache_write_tokens = write
    if read is not None:
        rec.cache_read_tokens = read
    if uncached is not None:
        rec.uncached_input_tokens = uncached
    base = rec.uncached_input_tokens
    if base is not None:
        rec.input_tokens = base + (rec.cache_write_tokens or 0) + (rec.cache_read_tokens or 0)
    creation = getattr(usage, "cache_creation", None)
    one_hour = _int(getattr(creation, "ephemeral_1h_input_tokens", None)) if creation is not None else None
    if one_hour is not None:
        rec.extra["cache_write_1h_tokens"] = one_hour
    details = getattr(usage, "output_tokens_details", None)
    thinking = _int(getattr(details, "thinking_tokens", None)) if details is not None else None
    if thinking is not None:
        rec.reasoning_tokens = thinking


def apply_openai_chat_usage(rec: CallRecord, usage: Any) -> None:
    """Fold a Chat Completions ``CompletionUsage`` into ``rec``."""
    if usage is None:
        return
    prompt = _int(getattr(usage, "prompt_tokens", None))
    if prompt is not None:
        rec.input_tokens = prompt
    completion = _int(getattr(usage, "completion_tokens", None))
    if completion is not None:
        rec.output_tokens = completion
    details = getattr(usage, "prompt_tokens_details", None)
    if details is not None:
        rec.cache_read_tokens = _int(getattr(details, "cached_tokens", None))
        write = _int(getattr(details, "cache_write_tokens", None))
        if write is not None:
            rec.cache_write_tokens = write
    out_details = getattr(usage, "completion_tokens_details", None)
    if out_details is not None:
        rec.reasoning_tokens = _int(getattr(out_details, "reasoning_tokens", None))


def apply_openai_responses_usage(rec: CallRecord, usage: Any) -> None:
    """Fold a Responses ``ResponseUsage`` into ``rec``."""
    if usage is None:
        return
    rec.input_tokens = _int(getattr(usage, "input_tokens", None))
    rec.output_tokens = _int(getattr(usage, "output_tokens", None))
    details = getattr(usage, "input_tokens_details", None)
    if details is not None:
        rec.cache_read_tokens = _int(getattr(details, "cached_tokens", None))
        write = _int(getattr(details, "cache_write_tokens", None))
        if write is not None:
            rec.cache_write_tokens = write
    out_details = getattr(usage, "output_tokens_details", None)
    if out_details is not None:
        rec.reasoning_tokens = _int(getattr(out_details, "reasoning_tokens", None))
