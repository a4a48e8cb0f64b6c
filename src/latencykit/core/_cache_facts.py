"""Prompt-cache facts in one table: limits, minimum lengths, TTLs and price multipliers.

Every number here comes from ``shared/reference/api-facts.md`` §2–3 and is used by both
the library (planning, verification, reports) and the emulator, so a change in the
providers' rules is a one-line edit. Sources disagree on the per-model minimums; the
table follows the latest summary (2026-10) and can be overridden per client with
``CachePolicy(min_tokens={...})``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Optional

__all__ = [
    "MAX_MARKERS",
    "LOOKBACK_BLOCKS",
    "TTL_SECONDS",
    "ANTHROPIC_MIN_TOKENS",
    "DEFAULT_MIN_TOKENS",
    "OPENAI_MIN_TOKENS",
    "OPENAI_INCREMENT",
    "OPENAI_ROUTING_TOKENS",
    "OPENAI_TTL_SECONDS",
    "PRICE_MULTIPLIERS",
    "OPENAI_MAX_BREAKPOINTS",
    "OPENAI_BREAKPOINT_WINDOW",
    "OPENAI_BREAKPOINT_TTLS",
    "OPENAI_DEFAULT_TTL",
    "OPENAI_BREAKPOINTS_FROM",
    "OPENAI_WRITE_PRICES",
    "accepts_breakpoints",
    "cache_prices",
    "min_cacheable_tokens",
    "ttl_seconds",
]

MAX_MARKERS = 4
"""Anthropic: at most 4 ``cache_control`` blocks per request (the top-level one included)."""
LOOKBACK_BLOCKS = 20
"""Anthropic: a breakpoint looks back at most 20 blocks for an earlier cache entry."""
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
"""Anthropic ``cache_control.ttl`` values; ``5m`` is the default; refreshed on every hit."""

# Substring of the model id → minimum cacheable prefix in tokens. First match wins, so the
# more specific names come first.
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-5", 512),
    ("fable-5", 512),
    ("mythos-5", 512),
    ("sonnet-5", 1024),
    ("opus-4-8", 1024),
    ("opus-4-7", 2048),
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("haiku-3", 2048),
    ("sonnet-4", 1024),
    ("opus-4", 1024),
    ("sonnet-3", 1024),
)
DEFAULT_MIN_TOKENS = 1024
"""Minimum for a model the table does not know."""

OPENAI_MIN_TOKENS = 1024
"""OpenAI caches prompts of at least 1024 tokens, automatically."""
OPENAI_INCREMENT = 128
"""OpenAI cache hits grow in 128-token increments (models before GPT-5.6)."""
OPENAI_ROUTING_TOKENS = 256
"""OpenAI routes by a hash of about the first 256 prompt tokens, combined with ``prompt_cache_key``."""
OPENAI_TTL_SECONDS = 300.0
"""In-memory retention: cleared after 5–10 minutes of inactivity; the lower bound is used."""

# GPT-5.6 and later: explicit breakpoints (openai SDK 3.60 types: `PromptCacheOptions`,
# `prompt_cache_breakpoint` on content parts, `cache_write_tokens`; api-facts §3).
OPENAI_BREAKPOINTS_FROM = (5, 6)
"""The first ``gpt-X.Y`` that accepts ``prompt_cache_breakpoint`` / ``prompt_cache_options`` (the SDK's "gpt-5.6 and later")."""
OPENAI_MAX_BREAKPOINTS = 4
"""Breakpoints a request writes: the implicit one and the latest 3 explicit (``mode: "implicit"``), or the latest 4 explicit."""
OPENAI_BREAKPOINT_WINDOW = 80
"""Cache matching considers the latest 80 breakpoints of the conversation (no content-block look-back limit)."""
OPENAI_BREAKPOINT_TTLS: Mapping[str, float] = {"30m": 1800.0, "12h": 43_200.0}
"""``prompt_cache_options.ttl`` / per-breakpoint ``ttl``: minimum lifetimes (Chat's request-level ``ttl`` takes ``30m`` only)."""
OPENAI_DEFAULT_TTL = "30m"

PRICE_MULTIPLIERS: Mapping[str, Mapping[str, float]] = {
    "anthropic": {"read": 0.1, "write_5m": 1.25, "write_1h": 2.0},
    "openai": {"read": 0.1, "write_5m": 1.0, "write_1h": 1.0},
}
"""Cache price × the base input price. OpenAI reads vary by model (0.1–0.5×); writes are free before GPT-5.6."""
OPENAI_WRITE_PRICES: tuple[tuple[str, float], ...] = ()
"""Per-model OpenAI write multipliers by model-name substring, first match wins (none known beyond the default)."""
OPENAI_BREAKPOINT_WRITE = 1.25
"""GPT-5.6 and later: a cache write costs 1.25× the uncached input rate (OpenAI's prompt-caching guide)."""

_GPT_VERSION = re.compile(r"(?:^|[^a-z0-9])gpt-(\d+)(?:\.(\d+))?")


def min_cacheable_tokens(model: Optional[str], overrides: Optional[Mapping[str, int]] = None) -> int:
    """The minimum cacheable prefix for an Anthropic ``model`` (overrides first, by substring)."""
    table = tuple(overrides.items()) if overrides else ()
    try:
        return _min_tokens(model, table)  # remembered: asked once per planned call
    except TypeError:  # an unhashable override value: no memo
        return _min_tokens.__wrapped__(model, table)


@functools.lru_cache(maxsize=1024)
def _min_tokens(model: Optional[str], overrides: tuple[tuple[str, int], ...]) -> int:
    name = (model or "").lower()
    for table in (overrides, ANTHROPIC_MIN_TOKENS):
        for key, value in table:
            if key.lower() in name:
                return int(value)
    return DEFAULT_MIN_TOKENS


def ttl_seconds(ttl: Optional[str]) -> float:
    """Seconds of a ``cache_control.ttl`` value (``None`` or unknown means ``5m``)."""
    return TTL_SECONDS.get(ttl or "5m", TTL_SECONDS["5m"])


@functools.lru_cache(maxsize=1024)
def accepts_breakpoints(model: Optional[str]) -> bool:
    """Whether an OpenAI ``model`` takes explicit prompt-cache breakpoints: ``gpt-5.6`` and later.

    The rule reads the ``gpt-X[.Y]`` in the name (``gpt-5.6-mini``, ``gpt-6``, ``ft:gpt-5.6:org::id``);
    ``gpt-4o``, ``gpt-5-mini``, ``o3`` and names without a version do not.
    """
    found = _GPT_VERSION.search((model or "").lower())
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= OPENAI_BREAKPOINTS_FROM


def cache_prices(provider: str, model: Optional[str], overrides: Optional[Mapping[str, Mapping[str, float]]] = None) -> Mapping[str, float]:
    """``{"read", "write_5m", "write_1h"}`` × base input price for a call (``write_1h``: Anthropic 1h, OpenAI 12h).

    ``overrides``: model-name substring → any of those keys, first match wins.
    """
    name = (model or "").lower()
    for key, prices in (overrides or {}).items():
        if key.lower() in name:
            base = dict(cache_prices(provider, model))
            base.update(prices)
            return base
    if provider == "anthropic":
        return PRICE_MULTIPLIERS["anthropic"]
    write = next((w for key, w in OPENAI_WRITE_PRICES if key in name), None)
    if write is None:
        write = OPENAI_BREAKPOINT_WRITE if accepts_breakpoints(model) else PRICE_MULTIPLIERS["openai"]["write_5m"]
    return {"read": PRICE_MULTIPLIERS["openai"]["read"], "write_5m": write, "write_1h": write}
