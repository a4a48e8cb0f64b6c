"""PgVectorStore's async twins and async clients against a real PostgreSQL + pgvector (mirror of
test_semantic_pgvector.py). Without a server binary or the drivers: skipped here, a failure under CI."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, AsyncIterator, Iterator

import pytest
from anthropic.types import Message

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import SemanticCache, StoreHit, semantic_cacheable

from _pg_server import PgServer, unavailable_reason

REASON = unavailable_reason()
if REASON is not None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the pgvector store tests must run under CI: {REASON}", pytrace=False)
    pytest.skip(REASON, allow_module_level=True)

from latencykit.semantic import PgVectorStore  # noqa: E402

from test_semantic_pgvector import DIM, QUESTION, SECRET, near, opened, sealed, unit  # noqa: E402


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    """One PostgreSQL + pgvector for this module, stopped by its PID at the end."""
    server = PgServer()
    yield server
    server.stop()


@pytest.fixture
async def store(pg: PgServer) -> AsyncIterator[PgVectorStore]:
    """A store on a fresh table; its async pool lives in this test's event loop."""
    s = PgVectorStore(pg.dsn, DIM, table=f"t_{uuid.uuid4().hex[:12]}", ttl=60, lru_resolution=0, maintain_every=1e9)
    yield s
    await s.aclose()


async def test_async_threshold_partitions_and_types(store: PgVectorStore) -> None:
    """asearch finds the best entry of its own partition only, with exact types; aclear(scope) drops one scope."""
    v = unit(1)
    for i, cos in enumerate((0.91, 0.99, 0.95)):
        await store.aadd(("a", b"fp"), near(v, cos, 50 + i), f"a{i}".encode(), {"n": i})
    await store.aadd(("b", b"fp"), v, b"b", {})
    hit = await store.asearch(("a", b"fp"), v, 0.9)
    assert isinstance(hit, StoreHit) and type(hit.payload) is bytes and type(hit.similarity) is float
    assert hit.payload == b"a1" and hit.meta == {"n": 1}
    assert await store.asearch(("c", b"fp"), v, 0.0) is None
    assert await store.asearch(("a", b"other"), v, 0.0) is None
    assert await store.acount() == 4
    await store.aclear("a")
    assert await store.acount() == 1 and (await store.asearch(("b", b"fp"), v, 0.99)) is not None
    await store.aclear()
    assert await store.acount() == 0


async def test_async_ttl_and_lru(pg: PgServer) -> None:
    """Expired entries are never returned and amaintain() deletes them; above max_entries the least recently used goes."""
    s = PgVectorStore(pg.dsn, DIM, table=f"t_{uuid.uuid4().hex[:12]}", ttl=0.5, max_entries=2, lru_resolution=0, maintain_every=1e9)
    await s.aadd(("s", b"fp"), unit(2), b"old", {})
    await asyncio.sleep(0.6)
    assert await s.asearch(("s", b"fp"), unit(2), 0.99) is None
    for i in range(3):
        await s.aadd(("s", b"fp"), unit(10 + i), f"e{i}".encode(), {})
    assert await s.asearch(("s", b"fp"), unit(10), 0.99) is not None  # e0 used: e1 is the oldest
    assert await s.amaintain() == (1, 1)
    assert await s.asearch(("s", b"fp"), unit(11), 0.99) is None and await s.acount() == 2
    assert (s.expirations, s.evictions) == (1, 1)
    await s.aclose()


async def test_tasks_keep_scopes_apart_and_payloads_whole(store: PgVectorStore) -> None:
    """Tasks of eight scopes store and look up at once: only their own answers, read whole; one row per shared answer."""
    v = unit(6)

    async def tenant(t: int) -> None:
        for i in range(8):
            await store.aadd((f"tenant-{t}", b"fp"), near(v, 0.999, 5000 + 100 * t + i), sealed(f"tenant-{t}", 2000 * (i % 3)), {"t": t})
            await store.aadd(("shared", b"fp"), v, sealed("same", 40_000), {})
            hit = await store.asearch((f"tenant-{t}", b"fp"), v, 0.9)
            assert hit is not None and opened(hit.payload) == f"tenant-{t}" and hit.meta == {"t": t}
            shared = await store.asearch(("shared", b"fp"), v, 0.99)
            assert shared is not None and opened(shared.payload) == "same"

    await asyncio.gather(*(tenant(t) for t in range(8)))
    assert await store.acount() == 8 * 8 + 1


async def test_async_client_hit_through_postgres(pg: PgServer, emu: Emulator) -> None:
    """Two async clients (two caches) sharing the table: the second is answered from PostgreSQL with the SDK's Message."""
    with PgVectorStore(pg.dsn, 384, table=f"t_{uuid.uuid4().hex[:12]}") as store:
        req: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 32, "messages": [{"role": "user", "content": QUESTION}]}
        one = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=SECRET))
        two = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=SECRET))
        first = await one.messages.create(**req, extra_headers=semantic_cacheable("t"))
        again = await two.messages.create(**req, extra_headers=semantic_cacheable("t"))
        assert type(again) is Message and again == first
        assert two.latency.last is not None and two.latency.last.semantic_hit is True
        await two.messages.create(**req, extra_headers=semantic_cacheable("u"))
        assert two.latency.last.semantic_hit is False
        await one.close()
        await two.close()


async def test_async_odd_scopes_are_stored_safely(store: PgVectorStore) -> None:
    """The async twins take the odd scopes as the sync methods and the other stores do."""
    from _odd_scopes import acheck_scopes

    await acheck_scopes(store.aadd, store.asearch, store.aclear, store.acount, DIM)


async def test_a_locked_table_does_not_hold_an_async_clients_event_loop(pg: PgServer, emu: Emulator) -> None:
    """The store's table locked by another session (a migration, a long transaction): a marked
    call's lookup waits on PostgreSQL while another call on the same event loop completes. Before,
    the lookup ran on the loop and held every call until the store's statement timeout."""
    import psycopg

    table = f"t_{uuid.uuid4().hex[:12]}"
    with PgVectorStore(pg.dsn, 384, table=table, timeout=3.0) as store:
        client = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store))
        req: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 16, "messages": [{"role": "user", "content": QUESTION}]}
        try:
            await client.messages.create(**req, extra_headers=semantic_cacheable("t"))  # the table exists, one entry
            with psycopg.connect(pg.dsn) as locker:
                locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # held until the rollback below
                marked = asyncio.ensure_future(client.messages.create(**req, extra_headers=semantic_cacheable("t")))
                await asyncio.sleep(0)  # the marked call goes first, to its lookup
                other = await client.messages.create(**{**req, "messages": [{"role": "user", "content": "Another question"}]})
                assert other.content
                assert not marked.done()  # still waiting on the lock
                locker.rollback()
            assert type(await marked) is Message
            assert client.latency.last is not None and client.latency.last.semantic_hit is True
        finally:
            await client.close()
