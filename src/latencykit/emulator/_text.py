"""Deterministic token counting, request hashing, ids and generated words.

Token counting is an approximation (about 4 characters per token) that only has to be
stable, not faithful: the text of `system`/`instructions` and of every message's string
content or text blocks, 1500 tokens per image block, other blocks (tool_use input,
tool results) as their JSON, the tool definitions JSON-serialised with sorted keys,
plus 4 tokens per message and 3 per request.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["count_tokens", "make_id", "request_key", "words"]

IMAGE_TOKENS = 1500
PER_MESSAGE_TOKENS = 4
PER_REQUEST_TOKENS = 3
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image", "document", "input_file"})
_ALPHANUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_HEX = "0123456789abcdef"
# Request fields that change the transport or the cache routing, not the answer.
_TRANSPORT_FIELDS = ("stream", "stream_options", "prompt_cache_key", "cache_control", "prompt_cache_options")
_MARKERS = frozenset({"cache_control", "prompt_cache_breakpoint"})

VOCABULARY = (
    "the", "model", "stream", "token", "latency", "cache", "prompt", "server", "batch", "decode",
    "request", "answer", "quickly", "system", "time", "first", "value", "steady", "queue", "signal",
    "window", "budget", "result", "simple", "careful", "measure", "output", "input", "engine", "slot",
    "and", "of", "to", "in", "is", "for", "with", "on", "it", "as",
    "bright", "river", "stone", "green", "paper", "north", "light", "quiet", "small", "large",
    "clock", "route", "field", "table", "order", "frame", "trace", "event", "metric", "sample",
    "state", "graph",
)  # fmt: skip


def _walk(value: Any) -> Iterator[tuple[int, int]]:
    """Yield (characters, fixed tokens) contributions of a content value."""
    if isinstance(value, str):
        yield len(value), 0
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, Mapping):
        kind = value.get("type")
        if kind in _IMAGE_TYPES:
            yield 0, IMAGE_TOKENS
        elif isinstance(value.get("text"), str):
            yield len(value["text"]), 0
        elif "content" in value:
            yield from _walk(value["content"])
        else:
            yield len(json.dumps(value, sort_keys=True)), 0


def count_tokens(body: Mapping[str, Any]) -> int:
    """Approximate prompt tokens of an Anthropic, Chat Completions or Responses request body."""
    chars = 0
    fixed = PER_REQUEST_TOKENS
    for field in ("system", "instructions"):
        for c, f in _walk(body.get(field)):
            chars, fixed = chars + c, fixed + f
    for field in ("messages", "input"):
        items = body.get(field)
        if isinstance(items, str):
            chars += len(items)
            fixed += PER_MESSAGE_TOKENS
        elif isinstance(items, list):
            for message in items:
                fixed += PER_MESSAGE_TOKENS
                for c, f in _walk(message.get("content", message) if isinstance(message, Mapping) else message):
                    chars, fixed = chars + c, fixed + f
    if body.get("tools"):
        chars += len(json.dumps(body["tools"], sort_keys=True))
    return math.ceil(chars / 4) + fixed


def request_key(body: Mapping[str, Any]) -> str:
    """Hex digest of the canonical request, ignoring streaming, cache keys and options and cache markers."""
    canonical = {k: _unmarked(v) for k, v in body.items() if k not in _TRANSPORT_FIELDS}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` / ``prompt_cache_breakpoint`` keys (a marker changes caching, not the answer)."""
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k not in _MARKERS}
    return value


def make_id(seed: int, key: str, purpose: str, length: int, alphabet: str = _ALPHANUM) -> str:
    """A deterministic random-looking id: same seed, request and purpose give the same id."""
    digest = hashlib.shake_256(f"{seed}:{key}:{purpose}".encode()).digest(length)
    return "".join(alphabet[b % len(alphabet)] for b in digest)


def make_hex_id(seed: int, key: str, purpose: str, length: int) -> str:
    """Like `make_id` but lower-case hex, as OpenAI Responses ids are."""
    return make_id(seed, key, purpose, length, _HEX)


def words(seed: int, key: str, stream: str, count: int) -> tuple[str, ...]:
    """`count` one-word tokens: the first bare, the rest with a leading space, the last ending in '.'."""
    rng = random.Random(f"{seed}:{key}:{stream}")
    out = [(" " if i else "") + rng.choice(VOCABULARY) for i in range(count)]
    if out:
        out[-1] += "."
    return tuple(out)
