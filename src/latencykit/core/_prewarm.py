"""A request cut down to its static prefix, to fill the prompt cache before the first real call.

`prewarm_request` keeps a request's blocks up to and including block ``upto`` (the furthest
breakpoint the planner put at a static boundary: the end of the system prompt, the last
retrieved document, the last few-shot example) and drops the rest, then asks for as little as
the API allows: ``prompt_cache_options.prewarm: true`` on Responses (GPT-5.6+: the cache is
filled, nothing is generated), one output token on Chat Completions (whose options take no
``prewarm``) and on Anthropic (which needs a user message: a one-character one is added when
none is left, after the last breakpoint, so it is not cached). Pure: a copy, the input untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._blocks import Shape, dump

__all__ = ["PLACEHOLDER", "prewarm_request"]

PLACEHOLDER: dict[str, Any] = {"role": "user", "content": "."}
"""The message an Anthropic pre-warm sends when the static prefix ends before the messages."""
_DROP = ("stream", "stream_options", "n", "cache_control")


def _plain(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else dict(dump(value))


def prewarm_request(api: str, request: Mapping[str, Any], shape: Shape, upto: int) -> dict[str, Any]:
    """``request`` (its `Shape` is ``shape``) cut after block ``upto``, asking for no (or one) output token."""
    out = {k: v for k, v in request.items() if k not in _DROP}
    path = shape.blocks[upto].path
    key = path[0]
    items = "messages" if api != "responses" else "input"
    in_items = key in ("messages", "input")
    if key == "tools":
        out["tools"] = list(request["tools"])[: path[1] + 1]
        out.pop("system", None)
        out.pop("instructions", None)
        out[items] = []
    elif key in ("system", "instructions"):
        if len(path) == 2:
            out["system"] = list(request["system"])[: path[1] + 1]
        out[items] = []
    elif len(path) == 2:
        out[key] = list(request[key])[: path[1] + 1]
    elif len(path) > 2:
        kept = list(request[key])[: path[1] + 1]
        field = path[2] if len(path) == 4 else "content"
        last = _plain(kept[-1])
        last[field] = list(last[field])[: path[-1] + 1]
        kept[-1] = last
        out[key] = kept
    if api == "responses":
        if not out.get("input"):
            out.pop("input", None)
        options = request.get("prompt_cache_options")
        out["prompt_cache_options"] = {**(options if isinstance(options, Mapping) else {}), "prewarm": True}
        return out
    if api == "chat.completions":
        out.pop("max_tokens", None)
        out["max_completion_tokens"] = 1
        return out
    if not out.get("messages"):
        out["messages"] = [PLACEHOLDER]
    thinking = request.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, Mapping) and thinking.get("type") == "enabled" else None
    if isinstance(budget, int) and in_items:
        out["max_tokens"] = budget + 1  # thinking is part of the messages' cache context: keep it, with the least it allows
    else:
        out.pop("thinking", None)
        out["max_tokens"] = 1
    return out
