"""RedisStore against a real redis-server on 127.0.0.1 (started here; skipped without one)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import RedisStore, SemanticCache, semantic_cacheable

from test_semantic_sync import CANARIES, canary_calls, holds

redis = pytest.importorskip("redis")
SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(SERVER is None, reason="redis-server not installed (bash .ci/semantic.sh)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A throwaway redis-server (no persistence) and a client for it."""
    port = _free_port()
    workdir: Path = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [str(SERVER), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not start")
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def store(redis_client: Any) -> Iterator[RedisStore]:
    s = RedisStore(redis_client, 16, ttl=60)
    s.clear()
    yield s
    s.clear()


def _unit(seed: int, dim: int = 16) -> Any:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_redis_threshold_and_partitions(store: RedisStore) -> None:
    """Found at the threshold in its own partition only; the best of several wins."""
    v, w = _unit(1), _unit(2)
    store.add(("tenant a", b"fp"), v, b"A", {"api": "messages"})
    store.add(("tenant a", b"fp"), w, b"W", {})
    hit = store.search(("tenant a", b"fp"), v, 0.99)
    assert hit is not None and hit.payload == b"A" and hit.meta == {"api": "messages"}
    assert store.search(("tenant b", b"fp"), v, 0.5) is None
    assert store.search(("tenant a", b"other"), v, 0.5) is None
    assert store.search(("tenant a", b"fp"), -v, 0.5) is None
    assert len(store) == 2


def test_redis_ttl(redis_client: Any) -> None:
    """Entries vanish with Redis's own TTL and are dropped from their partition."""
    store = RedisStore(redis_client, 16, ttl=0.2, prefix="lk-ttl:")
    store.add(("s", b"fp"), _unit(3), b"A", {})
    assert store.search(("s", b"fp"), _unit(3), 0.99) is not None
    time.sleep(0.35)
    assert store.search(("s", b"fp"), _unit(3), 0.99) is None
    assert len(store) == 0


def test_redis_clear_scope(store: RedisStore) -> None:
    """clear(scope) drops one scope's entries and keeps the others."""
    store.add(("a", b"fp"), _unit(4), b"A", {})
    store.add(("ab", b"fp"), _unit(4), b"B", {})
    store.clear("a")
    assert store.search(("a", b"fp"), _unit(4), 0.99) is None
    assert store.search(("ab", b"fp"), _unit(4), 0.99) is not None


def test_redis_store_behind_a_client(emu: Emulator, redis_client: Any) -> None:
    """Two clients (two caches) sharing one Redis: an answer stored by one is a hit for the other."""
    secret = b"s" * 32
    store = RedisStore(redis_client, 384, prefix="lk-e2e:")
    store.clear()
    req = {"model": "claude-sonnet-5", "max_tokens": 32, "messages": [{"role": "user", "content": "What is the return policy?"}]}
    one = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=secret))
    two = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=secret))
    first = one.messages.create(**req, extra_headers=semantic_cacheable("t"))
    again = two.messages.create(**{**req, "messages": [{"role": "user", "content": "what is the return policy"}]}, extra_headers=semantic_cacheable("t"))
    assert two.latency.last is not None and two.latency.last.semantic_hit is True
    assert again == first
    one.close()
    two.close()
    store.clear()


def test_redis_odd_scopes_are_stored_safely(store: RedisStore, emu: Emulator, redis_client: Any) -> None:
    """NUL, newline, 10 000 characters, a lone surrogate: each a scope of its own, as in the other stores; keys stay short."""
    from _odd_scopes import check_cache_scopes, check_scopes

    check_scopes(store, 16)
    assert max(len(k) for k in redis_client.scan_iter(match=f"{store.prefix}*")) < 300  # a long scope is hashed
    shared = RedisStore(redis_client, 384, prefix="lk-odd:")
    shared.clear()
    try:
        check_cache_scopes(emu.base_url, lambda: SemanticCache(store=shared, secret=b"s" * 32, encrypt=False))
    finally:
        shared.clear()


def _everything(redis_client: Any, prefix: str) -> bytes:
    """Every key under ``prefix`` and every value it holds (hash fields and values, set members), concatenated."""
    out: list[bytes] = []
    for key in redis_client.scan_iter(match=f"{prefix}*"):
        out.append(key)
        kind = redis_client.type(key)
        if kind == b"hash":
            for field, value in redis_client.hgetall(key).items():
                out += [field, value]
        elif kind == b"set":
            out += list(redis_client.smembers(key))
    return b"\n".join(out)


@pytest.mark.parametrize("encrypt", [True, False])
def test_redis_holds_no_canary_when_encrypted(emu: Emulator, redis_client: Any, encrypt: bool) -> None:
    """Two processes' caches sharing Redis with encryption on: no canary of instructions, system prompt, question or scope
    in any key or value (raw, hex, compressed), and they still share answers. Unencrypted (the control) the echoed instructions are there."""
    secret = b"redis-canary-secret-0123456789ab"
    store = RedisStore(redis_client, 384, prefix="lk-canary:")
    store.clear()
    one = SemanticCache(store=store, secret=secret, encrypt=encrypt)
    two = SemanticCache(store=store, secret=secret, encrypt=encrypt)
    question = f"What does {CANARIES['question']} mean for my order?"
    a_oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=one)
    a_ant = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=one)
    b_oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=two)
    b_ant = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=two)
    canary_calls(a_oai, a_ant, question)
    canary_calls(b_oai, b_ant, question.lower())
    assert [r.semantic_hit for r in b_oai.latency.calls + b_ant.latency.calls] == [True, True, True]
    found = {name for name, canary in CANARIES.items() if holds(_everything(redis_client, "lk-canary:"), canary)}
    if encrypt:
        assert found == set()
    else:
        assert {"instructions", "scope"} <= found
    for client in (a_oai, a_ant, b_oai, b_ant):
        client.close()
    store.clear()


def test_a_redis_url_works_as_a_pgvector_connection_string_does(redis_client: Any) -> None:
    """``RedisStore("redis://...")`` makes its own client (was an AttributeError from inside the first call)."""
    kwargs = redis_client.connection_pool.connection_kwargs
    store = RedisStore(f"redis://{kwargs['host']}:{kwargs['port']}/0", 4, ttl=60, prefix="lk-url:")
    vec = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    store.add(("acme", b"fp"), vec, b"answer", {"api": "x"})
    hit = store.search(("acme", b"fp"), vec, 0.9)
    assert hit is not None and hit.payload == b"answer" and hit.meta == {"api": "x"}
    store.clear()
    assert store.search(("acme", b"fp"), vec, 0.9) is None
    store.redis.close()


def test_a_dead_server_pauses_the_cache(emu: Emulator) -> None:
    """Nothing listens at the Redis URL: the first marked call's lookup fails at once (refused), the next calls
    skip the paused cache, every call answers from the provider."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", 8)
    cache = SemanticCache(lk.semantic.HashedEmbedder(8), store=store)
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, semantic=cache)
    ask = {"model": "gpt-4o-mini", "max_tokens": 8, "messages": [{"role": "user", "content": "Where is my order?"}]}
    try:
        for _ in range(3):
            answer = client.chat.completions.create(**ask, extra_headers=semantic_cacheable("shop"))
            assert answer.choices[0].message.content and client.latency.last.semantic_hit is None
        stats = cache.stats()
    finally:
        client.close()
        store.redis.close()
    assert (stats.store_errors, stats.skipped["store_unavailable"], stats.entries) == (1, 2, None)


async def test_a_paused_redis_does_not_hold_an_async_clients_event_loop(emu: Emulator, redis_client: Any) -> None:
    """A real Redis that answers slowly (``CLIENT PAUSE``: every command waits 2 s) under an async
    client: another call on the same event loop completes while a marked call's lookup waits on
    Redis. Before, the lookup ran on the loop and held every call for the whole pause."""
    store = RedisStore(redis_client, 384, prefix="lk-paused:")
    store.clear()
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=SemanticCache(store=store))
    ask = {"model": "gpt-4o-mini", "max_tokens": 16, "messages": [{"role": "user", "content": "What is the return policy?"}]}
    try:
        await client.chat.completions.create(**ask)  # connections open, nothing marked
        redis_client.client_pause(2000, all=True)
        paused_at = time.monotonic()
        marked = asyncio.ensure_future(client.chat.completions.create(**ask, extra_headers=semantic_cacheable("t")))
        await asyncio.sleep(0)  # the marked call goes first, to its lookup
        other = await client.chat.completions.create(**{**ask, "messages": [{"role": "user", "content": "Another question"}]})
        waited = time.monotonic() - paused_at
        assert other.choices[0].message.content
        assert not marked.done() and waited < 1.5, f"the other call took {waited:.2f} s, inside a 2 s pause of Redis"
        assert (await marked).choices[0].message.content  # and the marked one ends when Redis answers
        assert client.latency.last is not None and client.latency.last.semantic_hit is False
    finally:
        await client.close()
        store.clear()


def test_an_add_near_an_entry_replaces_it_as_in_the_other_stores(store: RedisStore) -> None:
    """The `VectorStore` contract: an entry with a near-identical vector (cosine ≥ 0.9999) gets the new answer, as
    in `MemoryStore` and `PgVectorStore`. Before, every add made an entry of its own."""
    v = _unit(7)
    store.add(("s", b"fp"), v, b"first", {})
    store.add(("s", b"fp"), v, b"second", {})
    hit = store.search(("s", b"fp"), v, 0.99)
    assert len(store) == 1 and hit is not None and hit.payload == b"second"
    store.add(("s", b"fp"), _unit(8), b"other", {})  # another question: an entry of its own
    store.add(("t", b"fp"), v, b"other scope", {})  # another partition: likewise
    assert len(store) == 3


def test_a_herd_of_identical_misses_leaves_one_entry(store: RedisStore) -> None:
    """Sixteen writers (threads, as an async client's worker threads or several processes) storing the same question
    at once: one entry, holding one of their answers. Before: sixteen."""
    import threading

    v, go = _unit(9), threading.Barrier(16)

    def write(i: int) -> None:
        go.wait()
        store.add(("s", b"fp"), v, f"answer {i}".encode(), {})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hit = store.search(("s", b"fp"), v, 0.99)
    assert len(store) == 1 and hit is not None and hit.payload.startswith(b"answer ")


async def test_concurrent_async_misses_of_one_question_store_it_once(emu: Emulator, redis_client: Any) -> None:
    """An async client asking each of 4 questions 8 times at once, all missing: 4 entries, and the next round hits."""
    store = RedisStore(redis_client, 384, prefix="lk-herd:")
    store.clear()
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=SemanticCache(store=store))

    async def ask(i: int) -> None:
        await client.chat.completions.create(model="gpt-4o-mini", max_tokens=8, extra_headers=semantic_cacheable("t"),
                                             messages=[{"role": "user", "content": f"What does plan {i % 4} cost?"}])  # fmt: skip

    try:
        await asyncio.gather(*(ask(i) for i in range(32)))
        assert len(store) == 4
        await asyncio.gather(*(ask(i) for i in range(32)))
        assert sum(1 for r in client.latency.calls if r.semantic_hit) == 32 and len(store) == 4
    finally:
        await client.close()
        store.clear()
