"""Usage extraction: one normalized view of each provider's token counts.

Anthropic reports cache tokens *in addition to* ``input_tokens``; OpenAI reports
``cached_tokens`` as a *subset* of ``prompt_tokens`` / ``input_tokens``. Both are resolved
here, once, into the record's ``input_tokens`` (all input, cached included),
``cache_read_tokens`` and ``cache_write_tokens`` (``None`` when the server did not say;
vLLM's ``prompt_tokens_details.created_cache_tokens`` is its write count).
Objects are read by attribute, so SDK models and test doubles both work.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from ._record import CallRecord

__all__ = ["apply_anthropic_usage", "apply_openai_chat_usage", "apply_openai_responses_usage"]


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) else None


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: fields the installed SDK does not model arrive as dicts.

    An SDK (pydantic) model keeps its fields in ``__dict__`` and unmodelled ones in
    ``__pydantic_extra__``; both are read directly, since ``getattr`` of a missing field
    goes through pydantic's ``__getattr__`` and a raised ``AttributeError`` (microseconds
    each, several times per event).
    """
    if isinstance(obj, dict):
        return obj.get(name)
    fields = getattr(obj, "__dict__", None)
    if fields is not None and name in fields:
        return fields[name]
    extra = getattr(obj, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        if name in extra:
            return extra[name]
        if not _class_has(type(obj), name):  # type: ignore[arg-type]  # (classes are hashable; no property of that name either)
            return None
    return getattr(obj, name, None)


_ABSENT = object()
_NO_FIELDS: dict[str, Any] = {}


def _fields(obj: Any) -> dict[str, Any]:
    """``obj`` itself if a dict, else its instance ``__dict__`` (an SDK model's fields), read
    once for several `_get`s; ``{}`` for an object without one."""
    if type(obj) is dict:
        return obj
    fields = getattr(obj, "__dict__", None)
    return fields if type(fields) is dict else _NO_FIELDS


def _get(fields: dict[str, Any], obj: Any, name: str) -> Any:
    """`_field` with ``obj``'s fields (`_fields`) already in hand: one dict lookup for a modelled field."""
    value = fields.get(name, _ABSENT)
    return _field(obj, name) if value is _ABSENT else value


@functools.lru_cache(maxsize=4096)
def _class_has(cls: type, name: str) -> bool:
    """``hasattr(cls, name)``, remembered: on a pydantic model class a miss goes through the
    metaclass's ``__getattr__`` and a raised ``AttributeError``, for a field the installed
    SDK does not model (``iterations``), on every call."""
    return hasattr(cls, name)


def _total(items: list[Any], *path: str) -> Optional[int]:
    """Sum of an int field over ``items`` (``None`` if no item has it)."""
    found = False
    total = 0
    for item in items:
        value: Any = item
        for name in path:
            value = _field(value, name) if value is not None else None
        if isinstance(value, int):
            found = True
            total += value
    return total if found else None


def apply_anthropic_usage(rec: CallRecord, usage: Any, placeholder_output: bool = False) -> None:
    """Fold an Anthropic ``Usage`` / cumulative ``MessageDeltaUsage`` into ``rec``.

    ``message_delta`` usage is cumulative and its optional fields are omitted when not
    applicable, so a missing field keeps the value ``message_start`` gave.
    ``placeholder_output``: the usage is ``message_start``'s, whose ``output_tokens`` is a
    placeholder, not a count (an abandoned stream's output is unknown, not 1).
    With ``usage.iterations`` (server-side steps such as compaction) the top-level counters
    describe the last step only; the record sums every step, so a compaction step's cache
    read is not lost.
    """
    if usage is None:
        return
    fields = _fields(usage)
    iterations = _get(fields, usage, "iterations")
    if isinstance(iterations, list) and iterations:
        _apply_iterations(rec, iterations)
    else:
        if not placeholder_output:
            out = _get(fields, usage, "output_tokens")
            if isinstance(out, int):
                rec.output_tokens = out
        write = _get(fields, usage, "cache_creation_input_tokens")
        if isinstance(write, int):
            rec.cache_write_tokens = write
        read = _get(fields, usage, "cache_read_input_tokens")
        if isinstance(read, int):
            rec.cache_read_tokens = read
        uncached = _get(fields, usage, "input_tokens")
        if isinstance(uncached, int):
            rec.uncached_input_tokens = uncached
        creation = _get(fields, usage, "cache_creation")
        if creation is not None:
            one_hour = _field(creation, "ephemeral_1h_input_tokens")
            if isinstance(one_hour, int):
                rec.extra["cache_write_1h_tokens"] = one_hour
    base = rec.uncached_input_tokens
    if base is not None:
        rec.input_tokens = base + (rec.cache_write_tokens or 0) + (rec.cache_read_tokens or 0)
    details = _get(fields, usage, "output_tokens_details")
    if details is not None:
        thinking = _field(details, "thinking_tokens")
        if isinstance(thinking, int):
            rec.reasoning_tokens = thinking


def _apply_iterations(rec: CallRecord, iterations: list[Any]) -> None:
    for attr, key in (
        ("output_tokens", "output_tokens"),
        ("uncached_input_tokens", "input_tokens"),
        ("cache_write_tokens", "cache_creation_input_tokens"),
        ("cache_read_tokens", "cache_read_input_tokens"),
    ):
        value = _total(iterations, key)
        if value is not None:
            setattr(rec, attr, value)
    one_hour = _total(iterations, "cache_creation", "ephemeral_1h_input_tokens")
    if one_hour is not None:
        rec.extra["cache_write_1h_tokens"] = one_hour
    rec.extra["usage_iterations"] = len(iterations)


def apply_openai_chat_usage(rec: CallRecord, usage: Any) -> None:
    """Fold a Chat Completions ``CompletionUsage`` into ``rec`` (or the usage as its JSON: a dict)."""
    if usage is None:
        return
    get = _reader(usage)
    prompt = _int(get("prompt_tokens", None))
    if prompt is not None:
        rec.input_tokens = prompt
    completion = _int(get("completion_tokens", None))
    if completion is not None:
        rec.output_tokens = completion
    details = get("prompt_tokens_details", None)
    if details is not None:
        get_detail = _reader(details)
        rec.cache_read_tokens = _int(get_detail("cached_tokens", None))
        write = _int(get_detail("cache_write_tokens", None))
        if write is None:  # vLLM: the tokens newly written to its prefix cache
            write = _int(get_detail("created_cache_tokens", None))
        if write is not None:
            rec.cache_write_tokens = write
    out_details = get("completion_tokens_details", None)
    if out_details is not None:
        rec.reasoning_tokens = _int(_reader(out_details)("reasoning_tokens", None))


def _reader(obj: Any) -> Callable[[str, Any], Any]:
    """``obj.get`` for a dict (a usage read from its JSON), else ``getattr`` on ``obj``."""
    return obj.get if type(obj) is dict else functools.partial(getattr, obj)


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
        by_ttl = _field(details, "cache_write_tokens_details")  # GPT-5.6+: the 12-hour part (a dict on SDKs before 3.60)
        long_ttl = _int(_field(by_ttl, "ttl_12h_tokens")) if by_ttl is not None else None
        if long_ttl:
            rec.extra["cache_write_12h_tokens"] = long_ttl
    out_details = getattr(usage, "output_tokens_details", None)
    if out_details is not None:
        rec.reasoning_tokens = _int(getattr(out_details, "reasoning_tokens", None))
