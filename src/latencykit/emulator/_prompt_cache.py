"""`PromptCache`: the providers' prompt-caching rules, as the emulator's default `CacheModel`.

Anthropic (api-facts §2): an exact prefix over ``tools → system → messages`` is cached only
at blocks carrying ``cache_control`` (or the last cacheable block, for a top-level
``cache_control``); at most 4 markers (else HTTP 400, the API's message), ``1h`` markers
before ``5m`` ones; each marker looks back at most 20 blocks for an entry an earlier
request wrote; prefixes below the model's minimum are not cached, silently; TTLs (5m / 1h)
restart on every hit; writes are reported per TTL in ``cache_creation``.

OpenAI (api-facts §3): prompts of at least 1024 tokens are cached automatically; hits grow
in 128-token steps; requests are routed by ``prompt_cache_key`` plus a hash of the first
~256 tokens, so a different key (another machine) misses; writes are free and reported as 0.
From GPT-5.6 on, explicit breakpoints, modes, TTLs and the 80-breakpoint window instead
(`_openai_cache_rules`).

Capacity is bounded (LRU over entries of both providers). Time is ``clock() + advanced``
seconds, so tests can expire entries with `advance` instead of sleeping.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ..core._cache_facts import (
    LOOKBACK_BLOCKS, MAX_MARKERS, OPENAI_INCREMENT, OPENAI_MIN_TOKENS, OPENAI_ROUTING_TOKENS, OPENAI_TTL_SECONDS,
    accepts_breakpoints, min_cacheable_tokens, ttl_seconds,
)  # fmt: skip
from ..core._segments import is_markable as _markable
from ..core._segments import marker_ttl as _ttl
from ._cache import CacheModel, CacheResult, Provider
from ._errors import BadRequest
from ._openai_cache_rules import Fingerprint
from ._openai_cache_rules import lookup as breakpoint_lookup
from ._text import IMAGE_TOKENS, PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS

__all__ = ["PromptCache"]

_FLAT = frozenset({"image", "document"})


def _strip(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != "cache_control"} if isinstance(value, Mapping) else value


def _text(value: Any) -> str:
    value = _strip(value)
    if isinstance(value, Mapping) and value.get("type") == "text" and set(value) <= {"type", "text"}:
        return str(value.get("text"))
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _chars(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        return len(value), 0
    if isinstance(value, Mapping):
        if value.get("type") in _FLAT:
            return 0, IMAGE_TOKENS
        if isinstance(value.get("text"), str):
            return len(value["text"]), 0
        if isinstance(value.get("content"), (str, list)):
            content = value["content"]
            parts = [_chars(c) for c in ([content] if isinstance(content, str) else content)]
            return sum(p[0] for p in parts), sum(p[1] for p in parts)
    return len(json.dumps(_strip(value), sort_keys=True)), 0


class PromptCache(CacheModel):
    """Prefix caching as Anthropic and OpenAI do it (see the module docstring)."""

    def __init__(
        self,
        *,
        capacity: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        min_tokens: Optional[Mapping[str, int]] = None,
    ) -> None:
        self.capacity = capacity
        self._clock = clock
        self._advanced = 0.0
        self.min_tokens = dict(min_tokens or {})
        self._entries: OrderedDict[bytes, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.responses: OrderedDict[str, Fingerprint] = OrderedDict()
        """OpenAI Responses (GPT-5.6+) served, by id, for ``comparison_response_id`` diagnostics."""

    def now(self) -> float:
        """Cache time: the clock plus everything `advance` added."""
        return self._clock() + self._advanced

    def advance(self, seconds: float) -> None:
        """Move cache time forward (expire entries without sleeping)."""
        with self._lock:
            self._advanced += seconds

    def clear(self) -> None:
        """Evict every entry (as a cache flush or another replica would look)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, provider: Provider, body: Mapping[str, Any], prompt_tokens: int) -> CacheResult:
        """Apply the provider's rules to one request; raises `BadRequest` where the API answers 400."""
        if provider == "anthropic":
            return self._anthropic(body, prompt_tokens)
        return self._openai(provider, body, prompt_tokens)

    # -- entries ----------------------------------------------------------------------------

    def _live(self, key: bytes, now: float) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry[0] > now

    def _put(self, key: bytes, ttl: float, now: float) -> None:
        old = self._entries.get(key)
        if old is not None and old[0] > now:
            ttl = max(ttl, old[1])
        self._entries[key] = (now + ttl, ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    # -- Anthropic --------------------------------------------------------------------------

    def _anthropic(self, body: Mapping[str, Any], prompt_tokens: int) -> CacheResult:
        blocks: list[tuple[str, Any, bool]] = []  # (tag, value, starts a message)
        for i, tool in enumerate(body.get("tools") or []):
            blocks.append((f"tool{i}", tool, False))
        system = body.get("system")
        for j, block in enumerate([system] if isinstance(system, str) else system or []):
            blocks.append((f"system{j}", block, False))
        for m, message in enumerate(body.get("messages") or []):
            content = message.get("content") if isinstance(message, Mapping) else None
            role = message.get("role") if isinstance(message, Mapping) else None
            for b, block in enumerate([content] if isinstance(content, str) else content or []):
                blocks.append((f"m{m}:{role}:{b}", block, b == 0))
        markers = [(i, ttl) for i, (_, v, _) in enumerate(blocks) if (ttl := _ttl(v)) is not None]
        top = body.get("cache_control")
        if isinstance(top, Mapping):
            last = next((i for i in range(len(blocks) - 1, -1, -1) if _markable(blocks[i][1])), None)
            if last is not None:
                markers = [mk for mk in markers if mk[0] != last] + [(last, _ttl({"cache_control": top}) or "5m")]
                markers.sort()
        found = sum(1 for _, v, _ in blocks if _ttl(v) is not None) + (1 if isinstance(top, Mapping) else 0)
        if found > MAX_MARKERS:
            raise BadRequest(f"A maximum of {MAX_MARKERS} blocks with cache_control may be provided. Found {found}.")
        seen_5m = False
        for _, ttl in markers:
            if ttl == "1h" and seen_5m:
                raise BadRequest("cache_control: a ttl='1h' breakpoint must not come after a ttl='5m' breakpoint")
            seen_5m = seen_5m or ttl == "5m"
        # Cumulative prefix digests and token counts.
        state = hashlib.sha256(str(body.get("model")).encode()).digest()
        context = json.dumps([body.get("tool_choice"), body.get("thinking")], sort_keys=True, default=str).encode()
        chars, fixed = 0, PER_REQUEST_TOKENS
        digests: list[bytes] = []
        tokens: list[int] = []
        first_message = True
        for tag, value, starts in blocks:
            if tag.startswith("m") and first_message:
                state = hashlib.sha256(state + context).digest()
                first_message = False
            if starts:
                fixed += PER_MESSAGE_TOKENS
            c, f = _chars(value)
            chars, fixed = chars + c + (2 if tag.startswith("tool") else 0), fixed + f
            state = hashlib.sha256(state + tag.encode() + _text(value).encode()).digest()
            digests.append(b"a" + state)
            tokens.append(min(math.ceil(chars / 4) + fixed, prompt_tokens))
        minimum = min_cacheable_tokens(str(body.get("model")), self.min_tokens)
        with self._lock:
            now = self.now()
            read = -1
            for p, _ in markers:
                for q in range(p, max(p - LOOKBACK_BLOCKS, -1), -1):
                    if self._live(digests[q], now):
                        read = max(read, q)
                        break
            if read >= 0:
                old = self._entries[digests[read]]
                self._entries[digests[read]] = (now + old[1], old[1])
            cached = tokens[read] if read >= 0 else 0
            written = written_1h = 0
            for p, ttl in markers:
                if tokens[p] < minimum:
                    continue
                self._put(digests[p], ttl_seconds(ttl), now)
                if p > read:
                    written = max(written, tokens[p] - cached)
                    if ttl == "1h":
                        written_1h = max(written_1h, tokens[p] - cached)
        return CacheResult(cached_tokens=cached, written_tokens=written, written_1h_tokens=written_1h)

    # -- OpenAI -----------------------------------------------------------------------------

    def _openai(self, provider: Provider, body: Mapping[str, Any], prompt_tokens: int) -> CacheResult:
        if accepts_breakpoints(str(body.get("model"))):
            return breakpoint_lookup(self, provider, body, prompt_tokens)
        if prompt_tokens < OPENAI_MIN_TOKENS:
            return CacheResult()
        parts = [json.dumps(t, sort_keys=True) for t in body.get("tools") or []]
        if provider == "openai-responses":
            if isinstance(body.get("instructions"), str):
                parts.append(json.dumps({"instructions": body["instructions"]}))
            items = body.get("input")
            items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        else:
            items = body.get("messages") or []
        parts += [json.dumps(item, sort_keys=True) for item in items]
        text = "".join(parts).encode()
        route = hashlib.sha256(
            f"{body.get('model')}\x1f{body.get('prompt_cache_key')}\x1f".encode() + text[: OPENAI_ROUTING_TOKENS * 4]
        ).digest()
        limit = min(len(text) // 4, prompt_tokens)
        boundaries = list(range(OPENAI_MIN_TOKENS, limit + 1, OPENAI_INCREMENT))
        h = hashlib.sha256(route)
        keys: list[bytes] = []
        done = 0
        for n in boundaries:
            h.update(text[done : n * 4])
            done = n * 4
            keys.append(b"o" + h.copy().digest())
        ttl = 86_400.0 if body.get("prompt_cache_retention") == "24h" else OPENAI_TTL_SECONDS
        with self._lock:
            now = self.now()
            cached = 0
            for n, key in zip(boundaries, keys):
                if self._live(key, now):
                    cached = n
            for key in keys:
                self._put(key, ttl, now)
        return CacheResult(cached_tokens=cached)
