"""A semantic cache whose store goes down (an unreachable Redis or PostgreSQL) costs one call the store's own
timeout, not every call: the cache pauses (``skipped["store_unavailable"]``), says so once, tries the store again
after `STORE_PAUSE_S` (doubling while it keeps failing) and says when it answers again. Calls always reach the
provider; nothing raises from ``stats()`` or ``repr``. The real-store twins are in test_semantic_redis.py and
test_semantic_pgvector.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterator

import pytest

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import HashedEmbedder, MemoryStore, SemanticCache, semantic_cacheable
from latencykit.semantic._cache import STORE_PAUSE_S

ASK = {"model": "gpt-4o-mini", "max_tokens": 16, "messages": [{"role": "user", "content": "What is the return policy?"}]}
MARK = semantic_cacheable("shop")


class OutageStore(MemoryStore):
    """A `MemoryStore` that fails every call while ``down`` (as a store whose server is gone), counting calls."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.down = False
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_fail()
        return super().search(*args, **kwargs)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self._maybe_fail()
        super().add(*args, **kwargs)

    def __len__(self) -> int:
        self._maybe_fail()
        return super().__len__()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def outage() -> tuple[OutageStore, Clock, SemanticCache]:
    store, clock = OutageStore(256), Clock()
    return store, clock, SemanticCache(HashedEmbedder(256), store=store, clock=clock)


@pytest.fixture
def client(emu: Emulator, outage: tuple[OutageStore, Clock, SemanticCache]) -> Iterator[lk.OpenAI]:
    c = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, semantic=outage[2])
    yield c
    c.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "latencykit" and r.levelno >= logging.WARNING]


def test_a_store_outage_pauses_the_cache_and_every_call_still_answers(
    client: lk.OpenAI, outage: tuple[OutageStore, Clock, SemanticCache], caplog: pytest.LogCaptureFixture
) -> None:
    store, clock, cache = outage
    caplog.set_level(logging.DEBUG, logger="latencykit")
    store.down = True
    answer = client.chat.completions.create(**ASK, extra_headers=MARK)
    assert answer.choices[0].message.content and client.latency.last.semantic_hit is None  # not looked up
    assert store.calls == 1
    assert _warnings(caplog) == [
        "latencykit: the semantic cache's OutageStore failed (ConnectionError: Error 111 connecting to 127.0.0.1:6379. "
        f"Connection refused.); requests go to the provider without the cache, and the store is tried again in {STORE_PAUSE_S:g} s"
    ]
    # paused: the store is not asked (nor is the query embedded), the call goes straight out
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert store.calls == 1 and client.latency.last.semantic_hit is None
    stats = cache.stats()
    assert (stats.store_errors, stats.skipped["store_unavailable"], stats.entries) == (1, 1, None)
    assert "entries=?" in repr(cache) and store.calls == 1  # neither asks a paused store
    # the pause is over: asked again, fails again, the next pause is twice as long and said at DEBUG only
    clock.now += STORE_PAUSE_S + 0.1
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert store.calls == 2 and cache.stats().store_errors == 2 and len(_warnings(caplog)) == 1
    clock.now += STORE_PAUSE_S + 0.1  # within the doubled pause
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert store.calls == 2
    # back: asked, a miss stored, said once; the next call is a hit
    clock.now += STORE_PAUSE_S + 0.1
    store.down = False
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert client.latency.last.semantic_hit is False
    assert _warnings(caplog)[-1] == "latencykit: the semantic cache's OutageStore answers again"
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert client.latency.last.semantic_hit is True
    stats = cache.stats()
    assert (stats.hits, stats.stored, stats.entries, stats.store_errors, stats.skipped["store_unavailable"]) == (1, 1, 1, 2, 2)


def test_a_store_that_fails_to_store_pauses_the_cache_too(
    client: lk.OpenAI, outage: tuple[OutageStore, Clock, SemanticCache]
) -> None:
    store, clock, cache = outage
    store.add = _failing  # type: ignore[method-assign]  # lookups work, storing fails (a read-only replica)
    client.chat.completions.create(**ASK, extra_headers=MARK)  # looked up (a miss), the answer not stored
    assert client.latency.last.semantic_hit is False and store.calls == 1
    stats = cache.stats()
    assert (stats.stored, stats.store_errors, stats.entries) == (0, 1, None)
    client.chat.completions.create(**ASK, extra_headers=MARK)
    assert store.calls == 1 and client.latency.last.semantic_hit is None


def _failing(*args: Any, **kwargs: Any) -> None:
    raise ConnectionError("READONLY You can't write against a read only replica.")


def test_async_clients_pause_alike(emu: Emulator, outage: tuple[OutageStore, Clock, SemanticCache]) -> None:
    store, clock, cache = outage
    store.down = True

    async def run() -> list[Any]:
        async with lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, semantic=cache) as c:
            hits = []
            for _ in range(3):
                await c.chat.completions.create(**ASK, extra_headers=MARK)
                hits.append(c.latency.last.semantic_hit)
            return hits

    assert asyncio.run(run()) == [None, None, None]
    stats = cache.stats()
    assert (store.calls, stats.store_errors, stats.skipped["store_unavailable"]) == (1, 1, 2)
