"""The odd scopes every store takes the same way (docs/semantic.md, "Scopes"), as one check for all stores.

A NUL, a newline, 10 000 characters and a lone surrogate UTF-8 cannot encode, each beside a scope that
differs from it only where a careless encoding would merge the two: the text before the NUL, one
character shorter, the replacement character, the hashed form of another scope."""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable

import numpy as np

import latencykit as lk
from latencykit.semantic import SemanticCache, semantic_cacheable
from latencykit.semantic._scope import stored_scope

LONG = random.Random(39).randbytes(5_000).hex()
"""10 000 characters that do not compress (PostgreSQL would compress ``"x" * 10_000`` into a B-tree row)."""
ODD = ("acme\x00", "line\nbreak", LONG, "a\udcff")
NEIGHBOURS = ("acme", "line", LONG[:-1], "a\ufffd", "a", stored_scope("acme\x00"))
GONE = ("acme\x00", "a\udcff", LONG)
"""The scopes `acheck_scopes` clears."""
SCOPES = ODD + NEIGHBOURS


def _unit(dim: int) -> Any:
    v = np.random.default_rng(5).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


async def acheck_scopes(add: Callable[..., Awaitable[None]], search: Callable[..., Awaitable[Any]],
                        clear: Callable[[str], Awaitable[None]], count: Callable[[], Awaitable[int]], dim: int) -> None:  # fmt: skip
    """Every scope stored and found under itself only (the same vector everywhere: only the scope tells them
    apart), and ``clear(scope)`` drops that scope alone."""
    vec = _unit(dim)
    for i, scope in enumerate(SCOPES):
        await add((scope, b"fp"), vec, f"answer {i}".encode(), {"i": i})
    assert await count() == len(SCOPES)
    for i, scope in enumerate(SCOPES):
        hit = await search((scope, b"fp"), vec, 0.99)
        assert hit is not None and hit.payload == f"answer {i}".encode() and hit.meta == {"i": i}, repr(scope)[:40]
        assert await search((scope, b"other"), vec, 0.5) is None
    for gone in GONE:
        await clear(gone)
        assert await search((gone, b"fp"), vec, 0.5) is None
    assert await count() == len(SCOPES) - 3
    for i, scope in enumerate(SCOPES):
        if scope not in GONE:
            hit = await search((scope, b"fp"), vec, 0.99)
            assert hit is not None and hit.payload == f"answer {i}".encode(), repr(scope)[:40]


def check_scopes(store: Any, dim: int) -> None:
    """`acheck_scopes` on a store's sync methods."""

    async def add(*a: Any) -> None:
        store.add(*a)

    async def search(*a: Any) -> Any:
        return store.search(*a)

    async def clear(scope: str) -> None:
        store.clear(scope)

    async def count() -> int:
        return len(store)

    asyncio.run(acheck_scopes(add, search, clear, count, dim))


def check_cache_scopes(base_url: str, make_cache: Callable[[], SemanticCache]) -> None:
    """Through the real SDK and a cache on the store: per odd scope, a repeat is answered from the cache, and the same
    question under its neighbour scope is not."""
    req = {"model": "claude-sonnet-5", "max_tokens": 16, "messages": [{"role": "user", "content": "What is the return policy?"}]}
    one = lk.Anthropic(base_url=base_url, api_key="k", max_retries=0, semantic=make_cache())
    two = lk.Anthropic(base_url=base_url, api_key="k", max_retries=0, semantic=make_cache())
    try:
        for scope, neighbour in zip(ODD, NEIGHBOURS):
            first = one.messages.create(**req, extra_headers=semantic_cacheable(scope))
            assert one.latency.last is not None and one.latency.last.semantic_hit is False
            again = two.messages.create(**req, extra_headers=semantic_cacheable(scope))
            assert two.latency.last is not None and two.latency.last.semantic_hit is True, repr(scope)[:40]
            assert again == first
            two.messages.create(**req, extra_headers=semantic_cacheable(neighbour))
            assert two.latency.last is not None and two.latency.last.semantic_hit is False, repr(neighbour)[:40]
    finally:
        one.close()
        two.close()
