"""A local, dependency-free token estimate (about 4 characters per token).

Good enough to compare a prefix with a minimum cacheable length and to say how many
tokens a cache read should have covered; never used for billing or TPOT. Images and
documents count a flat 1500 tokens. Exact counts can come from the SDK's
``count_tokens`` endpoint through ``CachePolicy(estimator=...)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MARKER_KEYS", "CHARS_PER_TOKEN", "FLAT_BLOCK_TOKENS", "PER_MESSAGE_TOKENS", "PER_REQUEST_TOKENS", "block_size", "canonical"]

CHARS_PER_TOKEN = 4
FLAT_BLOCK_TOKENS = 1500
PER_MESSAGE_TOKENS = 4
PER_REQUEST_TOKENS = 3
_FLAT_TYPES = frozenset({"image", "image_url", "input_image", "document", "input_file"})
MARKER_KEYS = frozenset({"cache_control", "prompt_cache_breakpoint"})
_TEXT_TYPES = frozenset({"text", "input_text"})
"""Keys of a block that mark it for the prompt cache without changing the prompt (Anthropic, OpenAI)."""


def canonical(value: Any) -> str:
    """A stable text form of a block: its text for a plain text block, else sorted JSON.

    ``cache_control`` / ``prompt_cache_breakpoint`` are left out (a marker does not change the prompt), and a plain text
    block and the same string canonicalize alike (the API renders them alike).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        rest = {k: v for k, v in value.items() if k not in MARKER_KEYS}
        if rest.get("type") in _TEXT_TYPES and isinstance(rest.get("text"), str) and set(rest) <= {"type", "text"}:
            return str(rest["text"])
        return json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def block_size(value: Any) -> tuple[int, int]:
    """``(characters, fixed tokens)`` a block contributes to the prompt."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind in _FLAT_TYPES:
            return 0, FLAT_BLOCK_TOKENS
        text = value.get("text")
        if isinstance(text, str):
            return len(text), 0
        content = value.get("content")
        if isinstance(content, (str, list, tuple)):
            chars = fixed = 0
            for item in [content] if isinstance(content, str) else content:
                c, f = block_size(item)
                chars, fixed = chars + c, fixed + f
            return chars, fixed
    return len(canonical(value)), 0
